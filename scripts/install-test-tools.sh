#!/usr/bin/env bash
# Installs or starts what the test suite needs, each only when it is missing, so that a fresh
# machine with Rust and Postgres's packages runs the whole suite (`cargo xtask test` calls it):
# Postgres running at 127.0.0.1:5432; Debian's chromium and chromium-driver (the playground's
# browser test), pgbouncer (the pooler tests), libpq-dev (diesel_cli), curl and jq (the README's
# walkthrough, scripts/check-walkthrough.py); diesel_cli (the schema
# check); the Python tools (scripts/install-python-tools.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
fail() { echo "install-test-tools: $*" >&2; exit 1; }

if command -v pg_isready >/dev/null && ! pg_isready -h 127.0.0.1 -p 5432 -q; then
  if command -v pg_ctlcluster >/dev/null; then
    version=$(ls /etc/postgresql | sort -n | tail -n 1)
    pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  fi
  for _ in $(seq 1 30); do pg_isready -h 127.0.0.1 -p 5432 -q && break; sleep 1; done
fi
pg_isready -h 127.0.0.1 -p 5432 -q || fail "Postgres is not running at 127.0.0.1:5432 and could not be started"

missing=()
for package in chromium chromium-driver pgbouncer libpq-dev curl jq; do
  dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "install-test-tools: installing ${missing[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null \
    || fail "cannot install ${missing[*]} from Debian's packages"
fi

if ! command -v diesel >/dev/null; then
  echo "install-test-tools: installing diesel_cli"
  cargo install diesel_cli --no-default-features --features postgres --locked --quiet || fail "cannot install diesel_cli"
fi

scripts/install-python-tools.sh >/dev/null || fail "cannot install the Python tools"
echo "install-test-tools: Postgres, Chromium, chromedriver, pgbouncer, diesel_cli and the Python tools are ready"
