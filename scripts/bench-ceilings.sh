#!/usr/bin/env bash
# `just bench-ceilings`: one replica against the ceilings of the shared bench folder
# (`../shared/bench` beside the checkout): GET of a job against a constant-JSON server, submissions
# against the least a correct accept can do on the same stack (accepting only, and end to end), the
# answers behind PgBouncer with the database out of reach, then batches in the same run; writes
# docs/benchmarks-ceilings.md and docs/benchmarks-batches.md. With `--flame`, also draws
# flame graphs of genjobs under wrk (docs/flame-submissions.svg, docs/flame-reads.svg). It installs what it
# uses (wrk, perf, pgbouncer), builds the ceiling from its source, and targets loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { echo "bench-ceilings: $*" >&2; exit 1; }

# BENCH_SHARED only for a checkout that is not where the shared folder expects it (a worktree).
shared="${BENCH_SHARED:-../shared/bench}"
[ -f "$shared/README.md" ] || fail "no $shared beside the checkout: the ceilings live there"

missing=()
command -v wrk >/dev/null || missing+=(wrk)
command -v psql >/dev/null || missing+=(postgresql-client)
command -v perf >/dev/null || missing+=(linux-perf)
[ -x /usr/sbin/pgbouncer ] || missing+=(pgbouncer)
if [ "${#missing[@]}" -gt 0 ]; then
  apt-get update -qq && apt-get install -y -qq "${missing[@]}" || fail "cannot install ${missing[*]}"
fi
scripts/postgres-up.sh || fail "Postgres is not running where DATABASE_URL says"

target="${CARGO_TARGET_DIR:-target}"
echo "[bench] building the ceiling from $shared/ceiling"
# The shared folder is read-only and cargo writes a lock file beside the manifest: build a copy.
rm -rf target/ceiling-src
mkdir -p target
cp -r "$shared/ceiling" target/ceiling-src
chmod -R u+w target/ceiling-src
printf '\n[workspace]\n' >> target/ceiling-src/Cargo.toml
cargo build --release -q --manifest-path target/ceiling-src/Cargo.toml --target-dir "$target/ceiling"
echo "[bench] building release binaries"
cargo build --release -q -p genjobs -p genjobs-upstream-sim -p genjobs-bench
profiled="$(scripts/profiled-postgres.sh)"
BENCH_SHARED="$shared" BENCH_PROFILED_DATABASE_URL="$profiled" BENCH_CEILING="$target/ceiling/release/ceiling" BENCH_FLAME="${1:-}" \
  timeout 1800 "$target/release/genjobs-bench" ceilings
