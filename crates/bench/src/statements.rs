//! Where Postgres spends its time during a run, from `pg_stat_statements`: the statements of one
//! database, per job accepted in the run, and the commits per job. Read only where the server
//! loads the extension (`shared_preload_libraries`): the shared development server does not, so
//! `just bench` runs the benchmarks that profile on a cluster of its own that does
//! (`scripts/profiled-postgres.sh`).

use std::fmt::Write as _;
use std::process::{Command, Stdio};

use super::Failure;

/// How many statements the profile lists, the costliest first.
const TOP: usize = 20;

/// A statement's share of one run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Statement {
    pub calls: u64,
    pub total_ms: f64,
    pub rows: u64,
    pub query: String,
}

/// What Postgres did for one run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Profile {
    pub jobs: u64,
    pub commits: u64,
    pub statements: Vec<Statement>,
    /// All statements' time, not only the listed ones.
    pub total_ms: f64,
    /// All statements' calls, not only the listed ones'.
    pub calls: u64,
}

pub(crate) fn query(url: &str, sql: &str) -> Result<String, Failure> {
    let output = Command::new("psql").args([url, "-qtAX", "-F", "\t", "-c", sql]).stderr(Stdio::inherit()).output()?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(format!("psql failed: {sql}").into())
    }
}

/// Whether the server of `url` collects statement statistics.
pub(crate) fn available(url: &str) -> Result<bool, Failure> {
    Ok(query(url, "SHOW shared_preload_libraries")?.contains("pg_stat_statements"))
}

/// The one number `sql` selects.
fn count(url: &str, sql: &str) -> Result<u64, Failure> {
    let text = query(url, sql)?;
    text.trim().parse().map_err(|_| format!("not a count from {sql}: {text}").into())
}

fn commits(url: &str) -> Result<u64, Failure> {
    count(url, "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")
}

fn jobs(url: &str) -> Result<u64, Failure> {
    count(url, "SELECT count(*) FROM jobs")
}

/// A run being profiled: what the database had counted when it began.
pub(crate) struct Window {
    commits: u64,
    jobs: u64,
}

impl Window {
    /// Begins a run on the database of `url`, on a server that collects statement statistics
    /// ([`available`]): the statistics made readable from the database and emptied, its commits
    /// and jobs so far noted.
    pub(crate) fn open(url: &str) -> Result<Self, Failure> {
        query(url, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")?;
        query(url, "SELECT pg_stat_statements_reset()")?;
        // The statistics collector reports commits with a delay of up to a second.
        query(url, "SELECT pg_stat_force_next_flush()")?;
        Ok(Self { commits: commits(url)?, jobs: jobs(url)? })
    }

    /// The run's profile, per job accepted since [`Window::open`].
    pub(crate) fn close(self, url: &str) -> Result<Profile, Failure> {
        query(url, "SELECT pg_stat_force_next_flush()")?;
        read(url, commits(url)?.saturating_sub(self.commits), jobs(url)?.saturating_sub(self.jobs))
    }
}

fn read(url: &str, commits: u64, jobs: u64) -> Result<Profile, Failure> {
    let text = query(
        url,
        "SELECT s.calls, s.total_exec_time, s.rows, regexp_replace(s.query, '\\s+', ' ', 'g') \
         FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid \
         WHERE d.datname = current_database() AND s.query NOT LIKE '%pg_stat_%' \
         ORDER BY s.total_exec_time DESC",
    )?;
    let all: Vec<Statement> = text.lines().filter_map(parse_row).collect();
    let total_ms = all.iter().map(|s| s.total_ms).sum();
    let calls = all.iter().map(|s| s.calls).sum();
    Ok(Profile { jobs, commits, statements: all.into_iter().take(TOP).collect(), total_ms, calls })
}

fn parse_row(line: &str) -> Option<Statement> {
    let mut fields = line.splitn(4, '\t');
    Some(Statement {
        calls: fields.next()?.parse().ok()?,
        total_ms: fields.next()?.parse().ok()?,
        rows: fields.next()?.parse().ok()?,
        query: fields.next()?.to_owned(),
    })
}

/// The profile as a Markdown table, per job.
pub(crate) fn table(profile: &Profile) -> String {
    let jobs = profile.jobs.max(1) as f64;
    let mut doc = format!(
        "{} jobs accepted; {:.2} commits per job; {:.3} ms of statement time per job in all.\n\n\
         | calls per job | ms per job | share | rows per call | statement |\n|---|---|---|---|---|\n",
        profile.jobs,
        profile.commits as f64 / jobs,
        profile.total_ms / jobs,
    );
    for s in &profile.statements {
        let _ = writeln!(
            doc,
            "| {:.2} | {:.4} | {:.1}% | {:.1} | `{}` |",
            s.calls as f64 / jobs,
            s.total_ms / jobs,
            100.0 * s.total_ms / profile.total_ms.max(f64::EPSILON),
            s.rows as f64 / (s.calls.max(1) as f64),
            shorten(&s.query).replace('|', "\\|"),
        );
    }
    doc
}

fn shorten(query: &str) -> String {
    const LONGEST: usize = 110;
    match query.char_indices().nth(LONGEST) {
        Some((at, _)) => format!("{} …", &query[..at]),
        None => query.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::float_cmp, reason = "test: exact values parsed from text")]

    use super::*;

    #[test]
    fn rows_of_psql_are_read_and_shown_per_job() {
        let row = parse_row("200\t50.5\t200\tUPDATE users SET credits = $1 WHERE id = $2").unwrap();
        assert_eq!((row.calls, row.total_ms, row.rows), (200, 50.5, 200));
        assert!(parse_row("not\ta row").is_none());
        let profile = Profile { jobs: 100, commits: 250, statements: vec![row], total_ms: 101.0, calls: 200 };
        let text = table(&profile);
        assert!(text.contains("2.50 commits per job"), "{text}");
        assert!(
            text.contains("| 2.00 | 0.5050 | 50.0% | 1.0 | `UPDATE users SET credits = $1 WHERE id = $2` |"),
            "{text}"
        );
    }

    #[test]
    fn long_statements_are_cut_and_pipes_escaped() {
        let long = "SELECT a | b FROM t WHERE ".to_owned() + &"x = 1 AND ".repeat(30);
        let text = table(&Profile {
            jobs: 1,
            commits: 1,
            statements: vec![Statement { calls: 1, total_ms: 1.0, rows: 1, query: long }],
            total_ms: 1.0,
            calls: 1,
        });
        assert!(text.contains("SELECT a \\| b"), "{text}");
        assert!(text.contains(" …`"), "{text}");
    }
}
