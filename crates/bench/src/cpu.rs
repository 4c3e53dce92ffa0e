//! Where the machine's CPU went during a run: the server under test, Postgres (every process
//! named `postgres`) and the machine as a whole, read from `/proc` before and after. The
//! submission ceilings compare these per request, which says which side of the stack the gap
//! between genjobs and the least a correct accept can do is on.

use std::fs;

/// CPU time used so far, in clock ticks (`USER_HZ`, a hundredth of a second on Linux).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Snapshot {
    server: u64,
    postgres: u64,
    machine: u64,
}

/// CPU time used between two snapshots, in milliseconds.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Split {
    pub(super) server_ms: f64,
    pub(super) postgres_ms: f64,
    pub(super) machine_ms: f64,
}

impl Snapshot {
    /// The CPU used so far by process `server`, by Postgres and by the machine. A figure that
    /// cannot be read counts as zero: the split is a report, not a check.
    pub(super) fn take(server: u32) -> Self {
        let postgres = fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|entry| fs::read_to_string(entry.path().join("stat")).ok())
            .filter(|stat| stat.contains("(postgres)"))
            .map(|stat| process_ticks(&stat))
            .sum();
        let server = fs::read_to_string(format!("/proc/{server}/stat")).map_or(0, |stat| process_ticks(&stat));
        Self { server, postgres, machine: machine_ticks(&fs::read_to_string("/proc/stat").unwrap_or_default()) }
    }

    /// What was used since `self`.
    pub(super) fn until(self, later: Self) -> Split {
        let ms = |from: u64, to: u64| to.saturating_sub(from) as f64 * 10.0;
        Split {
            server_ms: ms(self.server, later.server),
            postgres_ms: ms(self.postgres, later.postgres),
            machine_ms: ms(self.machine, later.machine),
        }
    }
}

impl Split {
    /// Microseconds of the server, Postgres and the rest (the load generator, the kernel) per
    /// request, of `requests`.
    pub(super) fn per_request(&self, requests: u64) -> (f64, f64, f64) {
        let per = |ms: f64| ms * 1000.0 / requests.max(1) as f64;
        let rest = (self.machine_ms - self.server_ms - self.postgres_ms).max(0.0);
        (per(self.server_ms), per(self.postgres_ms), per(rest))
    }
}

/// utime + stime of a `/proc/<pid>/stat` line; its command name, in parentheses, may hold spaces.
fn process_ticks(stat: &str) -> u64 {
    let fields: Vec<&str> = stat.rsplit_once(')').map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect());
    // After the name: state is field 3 of the line, utime 14 and stime 15.
    let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    field(14) + field(15)
}

/// Busy ticks of the machine: the first line of `/proc/stat` without idle and iowait.
fn machine_ticks(stat: &str) -> u64 {
    let ticks: Vec<u64> =
        stat.lines().next().unwrap_or_default().split_whitespace().skip(1).filter_map(|f| f.parse().ok()).collect();
    ticks.iter().enumerate().filter(|(i, _)| *i != 3 && *i != 4).map(|(_, t)| t).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_line_gives_user_and_system_ticks_even_with_spaces_in_its_name() {
        let stat = "4242 (actix server) S 1 4242 4242 0 -1 4194560 100 0 0 0 731 269 0 0 20 0 9 0 55 0 0";
        assert_eq!(process_ticks(stat), 1000);
    }

    #[test]
    fn the_machine_is_busy_for_all_but_idle_and_iowait() {
        let stat = "cpu  100 5 50 9000 40 0 3 2 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n";
        assert_eq!(machine_ticks(stat), 100 + 5 + 50 + 3 + 2);
    }

    #[test]
    fn the_rest_is_what_neither_server_nor_postgres_used() {
        let split = Split { server_ms: 2_000.0, postgres_ms: 5_000.0, machine_ms: 10_000.0 };
        assert_eq!(split.per_request(10_000), (200.0, 500.0, 300.0));
    }
}
