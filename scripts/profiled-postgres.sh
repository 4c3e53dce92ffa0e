#!/usr/bin/env bash
# A Postgres cluster of the benchmarks' own that loads pg_stat_statements, so that they can show
# where Postgres spends its time: the shared server does not load it, and loading it there would
# restart everyone's database. Started once and left running; prints its URL. Needs root (the
# cluster runs as the postgres user), as `just bench` does.
set -euo pipefail

port="${PROFILED_PG_PORT:-5499}"
dir="${PROFILED_PG_DIR:-/tmp/genjobs-profiled-postgres}"
bin="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)"

if ! pg_isready -h 127.0.0.1 -p "$port" -q; then
  if [ ! -f "$dir/data/PG_VERSION" ]; then
    mkdir -p "$dir"
    chown postgres "$dir"
    su postgres -c "$bin/initdb -D $dir/data -A trust -U postgres" >/dev/null
  fi
  su postgres -c "$bin/pg_ctl -D $dir/data -l $dir/log -w -o \"-p $port -k $dir -c listen_addresses=127.0.0.1 \
    -c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all\" start" >/dev/null
fi
pg_isready -h 127.0.0.1 -p "$port" -q || { echo "profiled-postgres: the cluster at port $port did not start" >&2; exit 1; }
echo "postgres://postgres@127.0.0.1:$port/postgres"
