//! Flame graphs of a process under load, drawn into `docs/` so that where a replica's time goes
//! can be read without tools: `perf record` samples its stacks while the load runs (DWARF
//! unwinding, since a release build keeps no frame pointers), `perf script` prints them, and they
//! are folded (one line per distinct stack, with its count) and drawn as an SVG here: Debian
//! packages no flame graph renderer, and the drawing is a page of code.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use super::Failure;

/// Samples per second and thread.
const FREQUENCY: &str = "99";
const WIDTH: f64 = 1200.0;
const ROW: f64 = 16.0;

/// A `perf record` under way.
pub(super) struct Recording {
    child: Child,
    data: PathBuf,
}

/// Starts sampling process `pid` for `seconds` into `data`.
pub(super) fn record(pid: u32, seconds: u64, data: &Path) -> Result<Recording, Failure> {
    let child = Command::new("perf")
        .args(["record", "-q", "-F", FREQUENCY, "--call-graph", "dwarf,8192", "-p", &pid.to_string(), "-o"])
        .arg(data)
        .args(["--", "sleep", &seconds.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    Ok(Recording { child, data: data.to_owned() })
}

impl Recording {
    /// Waits for the recording to end and draws it into `svg` under `title`.
    pub(super) fn draw(mut self, svg: &Path, title: &str) -> Result<(), Failure> {
        if !self.child.wait()?.success() {
            return Err("perf record failed (is perf installed, and may it sample other processes?)".into());
        }
        let script = Command::new("perf").args(["script", "-i"]).arg(&self.data).stderr(Stdio::null()).output()?;
        std::fs::remove_file(&self.data)?;
        let folded = fold(&String::from_utf8_lossy(&script.stdout));
        std::fs::write(svg, draw(&folded, title))?;
        Ok(())
    }
}

/// `perf script`'s samples as stacks, root first, with how many samples each had.
fn fold(script: &str) -> BTreeMap<Vec<String>, u64> {
    let mut stacks = BTreeMap::new();
    for sample in script.split("\n\n") {
        let mut lines = sample.lines().filter(|l| !l.trim().is_empty());
        let Some(header) = lines.next() else { continue };
        let thread = header.split_whitespace().next().unwrap_or("?").to_owned();
        let mut frames: Vec<String> = lines.filter_map(symbol).collect();
        frames.push(thread);
        frames.reverse();
        *stacks.entry(frames).or_insert(0) += 1;
    }
    stacks
}

/// The function of a frame line (`addr symbol+0xoff (dso)`), without its offset.
fn symbol(line: &str) -> Option<String> {
    let (_, rest) = line.trim().split_once(char::is_whitespace)?;
    let name = rest.rsplit_once(" (").map_or(rest, |(name, _)| name).trim();
    let name = name.rsplit_once("+0x").map_or(name, |(name, _)| name);
    Some(if name == "[unknown]" { "?".to_owned() } else { name.to_owned() })
}

#[derive(Default)]
struct Node {
    samples: u64,
    children: BTreeMap<String, Node>,
}

fn draw(stacks: &BTreeMap<Vec<String>, u64>, title: &str) -> String {
    let mut root = Node::default();
    for (stack, count) in stacks {
        root.samples += count;
        let mut node = &mut root;
        for frame in stack {
            node = node.children.entry(frame.clone()).or_default();
            node.samples += count;
        }
    }
    let depth = stacks.keys().map(Vec::len).max().unwrap_or(0) + 1;
    let height = (depth as f64 + 2.0) * ROW;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\" font-family=\"monospace\" \
         font-size=\"11\">\n<text x=\"4\" y=\"12\">{} ({} samples; hover for names and shares)</text>\n",
        escape(title),
        root.samples
    );
    let scale = WIDTH / root.samples.max(1) as f64;
    draw_children(&mut svg, &root, 0.0, height - ROW, scale, root.samples.max(1));
    svg.push_str("</svg>\n");
    svg
}

fn draw_children(svg: &mut String, node: &Node, x: f64, y: f64, scale: f64, total: u64) {
    let mut left = x;
    for (name, child) in &node.children {
        let width = child.samples as f64 * scale;
        if width >= 0.5 {
            let hue = name.bytes().fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b))) % 60;
            let share = 100.0 * child.samples as f64 / total as f64;
            let label: String =
                if width > 40.0 { name.chars().take((width / 7.0) as usize).collect() } else { String::new() };
            let _ = writeln!(
                svg,
                "<g><title>{} ({share:.1} %)</title><rect x=\"{left:.1}\" y=\"{:.1}\" width=\"{width:.1}\" height=\"{:.1}\" \
                 fill=\"hsl({hue},80%,60%)\"/><text x=\"{:.1}\" y=\"{:.1}\">{}</text></g>",
                escape(name),
                y - ROW,
                ROW - 1.0,
                left + 2.0,
                y - 4.0,
                escape(&label)
            );
            draw_children(svg, child, left, y - ROW, scale, total);
        }
        left += width;
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCRIPT: &str = "genjobs 10 [000] 1.0: 1 cycles:\n\t    55aa handle+0x10 (/bin/genjobs)\n\t    55bb main+0x2 (/bin/genjobs)\n\n\
                          genjobs 10 [000] 1.1: 1 cycles:\n\t    55aa handle+0x12 (/bin/genjobs)\n\t    55bb main+0x2 (/bin/genjobs)\n\n\
                          tokio 11 [001] 1.2: 1 cycles:\n\t    77cc [unknown] (/lib/x.so)\n";

    #[test]
    fn samples_fold_into_stacks_root_first() {
        let folded = fold(SCRIPT);
        let main = vec!["genjobs".to_owned(), "main".to_owned(), "handle".to_owned()];
        assert_eq!(folded.get(&main), Some(&2));
        assert_eq!(folded.get(&vec!["tokio".to_owned(), "?".to_owned()]), Some(&1));
        assert_eq!(folded.len(), 2);
    }

    #[test]
    fn the_drawing_gives_each_frame_its_share() {
        let svg = draw(&fold(SCRIPT), "a <test>");
        assert!(svg.contains("a &lt;test&gt; (3 samples"), "{svg}");
        assert!(svg.contains("<title>handle (66.7 %)</title>"), "{svg}");
        assert!(svg.contains("<title>tokio (33.3 %)</title>"), "{svg}");
    }
}
