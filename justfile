# genjobs tasks; `just --list` shows them.

# Run the service on the embedded default (in-memory store, built-in simulated upstream).
run:
    cargo run --release -p genjobs

# Install or start what the tests need, then run every check CI runs (`cargo xtask test`).
test:
    cargo xtask test

# Format check, clippy with warnings as errors, and the domain's dependency guard.
lint:
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets -- -D warnings
    scripts/check-domain-deps.sh
    python3 scripts/check-msrv.py
    RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet
    scripts/check-schema.sh

# Run on Postgres (DATABASE_URL, or the local server's `genjobs` database).
run-postgres:
    psql "${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}" -qc 'CREATE DATABASE genjobs' 2>/dev/null || true
    DATABASE_URL="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/genjobs}" cargo run --release -p genjobs

# Chaos soak: two replicas on Postgres, a provider failing one call in ten, each replica
# killed with SIGKILL, database sessions terminated; then every credit and job checked.
# `just soak` runs 30 s, `just soak --secs 600` ten minutes.
soak *ARGS:
    cargo build -p genjobs -p genjobs-upstream-sim -p genjobs-upstream-replicate-sim -p genjobs-soak
    target/debug/genjobs-soak --bin-dir target/debug {{ARGS}}

# One replica against the ceilings of ../shared/bench (GET, submissions accepting only and end to
# end, the database unreachable behind PgBouncer), then batches in the same run; writes
# docs/benchmarks-ceilings.md and docs/benchmarks-batches.md. `just bench-ceilings --flame` also draws
# docs/flame-submissions.svg.
bench-ceilings *ARGS:
    scripts/bench-ceilings.sh {{ARGS}}

# Measure throughput, latency, streams and upstream economy; writes docs/benchmarks.md.
bench:
    scripts/bench.sh
