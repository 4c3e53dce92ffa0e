#!/usr/bin/env bash
# Makes sure the Postgres server that DATABASE_URL names (the tests' default,
# postgres://postgres@127.0.0.1:5432/postgres, when it is unset) answers. A server elsewhere is
# only waited for; a local one that is down is started however this machine runs Postgres:
# Debian's clusters (pg_ctlcluster), systemd or SysV's service, or a data directory in PGDATA
# (pg_ctl). A machine with no Postgres at all gets Debian's package, whose cluster then starts.
# POSTGRES_UP_WAIT_SECS (default 30) bounds each wait for the server to answer.
set -euo pipefail
url=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
wait_secs=${POSTGRES_UP_WAIT_SECS:-30}
fail() { echo "postgres-up: $*" >&2; exit 1; }

ready() { command -v pg_isready >/dev/null && pg_isready -d "$url" -q; }
wait_ready() { for _ in $(seq 1 "$wait_secs"); do ready && return 0; sleep 1; done; ready; }
ready && exit 0

authority=${url#*://}
authority=${authority%%/*}
host=${authority##*@}
host=${host%:*}
case "$host" in
  127.0.0.1 | localhost | ::1 | '[::1]' | '') ;;
  *) wait_ready || fail "the server DATABASE_URL names ($host) does not answer"; exit 0 ;;
esac

if ! command -v pg_ctlcluster >/dev/null && ! command -v pg_ctl >/dev/null && [ -z "$(ls /usr/lib/postgresql 2>/dev/null)" ]; then
  command -v apt-get >/dev/null || fail "no Postgres on this machine, and no apt-get to install it"
  echo "postgres-up: installing Postgres from Debian's packages"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null \
    || fail "cannot install postgresql"
fi

if command -v pg_ctlcluster >/dev/null && [ -d /etc/postgresql ]; then
  for version in $(ls /etc/postgresql | sort -rn); do
    for cluster in $(ls "/etc/postgresql/$version"); do
      pg_ctlcluster --skip-systemctl-redirect "$version" "$cluster" start 2>/dev/null || true
    done
  done
  wait_ready && exit 0
fi
if command -v systemctl >/dev/null && systemctl start postgresql 2>/dev/null; then wait_ready && exit 0; fi
if command -v service >/dev/null && service postgresql start >/dev/null 2>&1; then wait_ready && exit 0; fi
if [ -n "${PGDATA:-}" ]; then
  pg_ctl=$(command -v pg_ctl || ls /usr/lib/postgresql/*/bin/pg_ctl 2>/dev/null | sort -V | tail -n 1)
  [ -n "$pg_ctl" ] && { "$pg_ctl" -D "$PGDATA" -l "$PGDATA/server.log" start >/dev/null || true; }
  wait_ready && exit 0
fi
fail "Postgres does not answer at $host and could not be started: start it, or set DATABASE_URL to a server that runs"
