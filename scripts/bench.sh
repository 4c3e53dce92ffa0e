#!/usr/bin/env bash
# `just bench`: builds the release binaries and runs every benchmark on the Postgres store against
# the simulator, each next to its baseline measured in the same run; writes docs/benchmarks.md.
# It installs what it uses, bounds its own run time, and targets loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { echo "bench: $*" >&2; exit 1; }

if ! command -v pgbench >/dev/null; then
  apt-get update -qq && apt-get install -y -qq postgresql-client || fail "cannot install pgbench"
fi
if ! command -v wrk >/dev/null; then
  apt-get update -qq && apt-get install -y -qq wrk || fail "cannot install wrk"
fi
if [ ! -x /usr/sbin/pgbouncer ]; then
  apt-get update -qq && apt-get install -y -qq pgbouncer || fail "cannot install pgbouncer"
fi
scripts/postgres-up.sh || fail "Postgres is not running where DATABASE_URL says"

# 10,000 open streams need as many descriptors in genjobs and in the load generator.
ulimit -n "$(ulimit -Hn)"
[ "$(ulimit -n)" -ge 12000 ] || fail "the file-descriptor limit is $(ulimit -n); 10,000 streams need more"

echo "[bench] building release binaries"
cargo build --release -q -p genjobs -p genjobs-upstream-sim -p genjobs-bench
timeout 900 target/release/genjobs-bench
# Usage reports over 10 million generated jobs: its own report, docs/benchmarks-usage.md.
timeout 2400 target/release/genjobs-bench usage
# The operators' job listing over 10 million generated jobs: docs/benchmarks-admin-jobs.md.
timeout 2400 target/release/genjobs-bench admin-jobs
# A key's budget and allowlist against plain keys, alternated: docs/benchmarks-keys.md.
timeout 600 target/release/genjobs-bench key-checks
# The next two also show where Postgres spends its time, on a cluster that loads pg_stat_statements.
profiled="$(scripts/profiled-postgres.sh)"
# A burst of 1,000 jobs and 10 of another user on one fal key capped at 4: the second user's
# wait and the scheduler's statements per job sent, docs/benchmarks-capacity.md.
DATABASE_URL="$profiled" timeout 600 target/release/genjobs-bench capacity
# 1, 2 and 4 replicas, directly and through PgBouncer: docs/benchmarks-replicas.md.
DATABASE_URL="$profiled" timeout 900 target/release/genjobs-bench replicas
# One replica as an outside load test measures it (wrk): docs/benchmarks-outside.md; then its
# submissions again on the profiled cluster: docs/benchmarks-outside-statements.md.
BENCH_PROFILED_DATABASE_URL="$profiled" timeout 600 target/release/genjobs-bench outside
# Webhooks to clients: latency to a receiver, and memory over 100,000 undelivered events.
timeout 600 target/release/genjobs-bench client-webhooks
# A job's accepted → sent with moderation off and on: docs/benchmarks-moderation.md.
timeout 600 target/release/genjobs-bench moderation
# One replica against the ceilings of ../shared/bench, then batches of 5,000 items (acceptance and
# its statements, throughput, an interactive user's wait behind one, 100,000 items waiting) in the
# same run: docs/benchmarks-ceilings.md and docs/benchmarks-batches.md.
scripts/bench-ceilings.sh
