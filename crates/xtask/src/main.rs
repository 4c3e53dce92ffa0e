//! # xtask
//!
//! The project's own commands, run as `cargo xtask <command>` (an alias in `.cargo/config.toml`),
//! so that a fresh machine needs nothing but Rust to run the whole suite:
//!
//! - `cargo xtask setup` installs or starts what the tests need, each only when it is missing
//!   (`scripts/install-test-tools.sh`: Postgres answering where `DATABASE_URL` says, started
//!   however the machine runs it (`scripts/postgres-up.sh`), Chromium and its driver, pgbouncer,
//!   libpq-dev, Node.js, `just`, diesel_cli, the Python and the Node tools).
//! - `cargo xtask config-table` writes the configuration reference's tables
//!   (`docs/configuration.md`) from `genjobs`'s flags (after a merge that adds settings, say); a
//!   test fails while they are stale.
//! - `cargo xtask test` does that, then runs every check CI runs, in order, naming each step and
//!   its time: formatting, clippy, the domain's dependency guard, the modules' circle check
//!   (`scripts/check-module-circles.py`), rust-version, docs, the domain's
//!   example, the schema check, `cargo test --workspace`, clippy and a build of `genjobs` without
//!   its simulator (the production build), the OpenAPI check, the client's example, the README's
//!   walkthrough run as written (`scripts/check-walkthrough.py`), the links of the README and
//!   `docs/` (`scripts/check-links.py`) and a 30 s chaos soak. `.ci/run` is this command.
//!
//! Tests never install anything themselves: a test whose tool is missing fails and names
//! `cargo xtask test`.

use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::time::Instant;

const USAGE: &str = "usage: cargo xtask <command>

commands:
  setup         install or start what the test suite needs (Postgres, Chromium, pgbouncer, just, diesel_cli, Python and Node tools)
  config-table  write docs/configuration.md's tables from genjobs's flags
  test          setup, then every check CI runs, in order";

/// One step of the suite: a name for the progress lines, and the program with its arguments.
struct Step {
    name: &'static str,
    program: String,
    args: Vec<String>,
    env: Vec<(&'static str, String)>,
    /// Text the step's output must contain, when its exit code alone does not prove it.
    expect: Option<&'static str>,
}

impl Step {
    fn new(name: &'static str, program: &str, args: &[&str]) -> Self {
        Self {
            name,
            program: program.to_owned(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            env: Vec::new(),
            expect: None,
        }
    }

    fn env(mut self, name: &'static str, value: &str) -> Self {
        self.env.push((name, value.to_owned()));
        self
    }

    fn expect(mut self, text: &'static str) -> Self {
        self.expect = Some(text);
        self
    }
}

/// The workspace's root: xtask lives at `crates/xtask`.
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Where cargo puts binaries: `CARGO_TARGET_DIR`, else `target`.
fn target_dir() -> String {
    std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| root().join("target").display().to_string())
}

fn setup_steps() -> Vec<Step> {
    vec![Step::new("install or start the test tools", "scripts/install-test-tools.sh", &[])]
}

fn test_steps() -> Vec<Step> {
    let debug = format!("{}/debug", target_dir());
    let genjobs = format!("{debug}/genjobs");
    let mut steps = setup_steps();
    steps.extend([
        Step::new("cargo fmt --check", "cargo", &["fmt", "--all", "--", "--check"]),
        Step::new(
            "cargo clippy -D warnings",
            "cargo",
            &["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"],
        ),
        Step::new("the domain depends on no I/O crate", "scripts/check-domain-deps.sh", &[]),
        Step::new("no crate's modules import each other in a circle", "scripts/check-module-circles.py", &[]),
        Step::new("the links of README.md and docs/*.md", "scripts/check-links.py", &[]),
        Step::new("rust-version covers the dependencies", "python3", &["scripts/check-msrv.py"]),
        Step::new("docs build without warnings", "cargo", &["doc", "--workspace", "--no-deps", "--quiet"])
            .env("RUSTDOCFLAGS", "-D warnings"),
        Step::new(
            "the domain's example drives a job",
            "cargo",
            &["run", "--quiet", "-p", "genjobs-domain", "--example", "drive_a_job"],
        )
        .expect("succeeded with 2 outputs"),
        Step::new("schema.rs matches the migrations", "scripts/check-schema.sh", &[]),
        Step::new("cargo test --workspace", "cargo", &["test", "--workspace"]),
        // Before "build the binaries": this build of `genjobs` replaces the one with the simulator,
        // which the steps after it run.
        Step::new(
            "cargo clippy, genjobs without the simulator",
            "cargo",
            &["clippy", "-p", "genjobs", "--no-default-features", "--", "-D", "warnings"],
        ),
        Step::new(
            "the production build: genjobs without the simulator",
            "cargo",
            &["build", "--quiet", "-p", "genjobs", "--no-default-features"],
        ),
        Step::new(
            "build the binaries",
            "cargo",
            &[
                "build",
                "--quiet",
                "-p",
                "genjobs",
                "-p",
                "genjobs-upstream-sim",
                "-p",
                "genjobs-upstream-replicate-sim",
                "-p",
                "genjobs-soak",
            ],
        ),
        Step::new("the OpenAPI document: validator and schemathesis", "scripts/check-openapi.sh", &[&genjobs]),
        Step::new("genjobs-client's example against genjobs", "scripts/check-client-example.sh", &[&genjobs]),
        Step::new("the README's walkthrough against the embedded default", "scripts/check-walkthrough.py", &[&genjobs]),
        Step::new("chaos soak, 30 s", &format!("{debug}/genjobs-soak"), &["--secs", "30", "--bin-dir", &debug]),
    ]);
    steps
}

/// Runs the steps in order, stopping at the first that fails.
fn run(steps: &[Step]) -> ExitCode {
    let started = Instant::now();
    for (index, step) in steps.iter().enumerate() {
        println!("== [{}/{}] {}", index + 1, steps.len(), step.name);
        let began = Instant::now();
        let mut command = Command::new(&step.program);
        command.args(&step.args).current_dir(root()).envs(step.env.iter().map(|(k, v)| (*k, v.as_str())));
        let passed = match step.expect {
            None => command.status().map(|status| status.success()),
            Some(text) => command.output().map(|output| {
                let printed = String::from_utf8_lossy(&output.stdout);
                print!("{printed}");
                eprint!("{}", String::from_utf8_lossy(&output.stderr));
                output.status.success() && printed.contains(text)
            }),
        };
        let secs = began.elapsed().as_secs_f64();
        match passed {
            Ok(true) => println!("== [{}/{}] {} passed in {secs:.0} s", index + 1, steps.len(), step.name),
            Ok(false) => {
                eprintln!("xtask: {} failed after {secs:.0} s", step.name);
                return ExitCode::FAILURE;
            }
            Err(error) => {
                eprintln!("xtask: cannot run {} for {}: {error}", step.program, step.name);
                return ExitCode::FAILURE;
            }
        }
    }
    println!("xtask: all {} steps passed in {:.0} s", steps.len(), started.elapsed().as_secs_f64());
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["setup"] => run(&setup_steps()),
        ["test"] => run(&test_steps()),
        ["config-table"] => run(&[Step::new(
            "docs/configuration.md's tables from genjobs's flags",
            "cargo",
            &["run", "--quiet", "-p", "genjobs", "--", "config-table", "--file", "docs/configuration.md"],
        )]),
        ["help" | "--help" | "-h"] => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}
