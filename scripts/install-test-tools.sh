#!/usr/bin/env bash
# Installs or starts what the test suite needs, each only when it is missing, so that a fresh
# machine with Rust and Postgres's packages runs the whole suite (`cargo xtask test` calls it):
# Postgres answering where DATABASE_URL says (scripts/postgres-up.sh); Debian's chromium and
# chromium-driver (the playground's browser test), pgbouncer (the pooler tests), libpq-dev (diesel_cli), curl and jq (the README's
# walkthrough, scripts/check-walkthrough.py) and, without an npm on the PATH, Node.js and npm (the
# official OpenAI Node client's tests); diesel_cli (the schema check); the Python tools
# (scripts/install-python-tools.sh) and the Node tools (scripts/install-node-tools.sh); `just`, which
# runs the recipes the README and docs name (`just bench`).
set -euo pipefail
cd "$(dirname "$0")/.."
fail() { echo "install-test-tools: $*" >&2; exit 1; }

scripts/postgres-up.sh || fail "Postgres is not running where DATABASE_URL says, and could not be started"

missing=()
for package in chromium chromium-driver pgbouncer libpq-dev curl jq; do
  dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
done
command -v npm >/dev/null || missing+=(nodejs npm)
if [ "${#missing[@]}" -gt 0 ]; then
  echo "install-test-tools: installing ${missing[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null \
    || fail "cannot install ${missing[*]} from Debian's packages"
fi

if ! command -v just >/dev/null; then
  echo "install-test-tools: installing just"
  cargo install just --locked --quiet || fail "cannot install just"
fi

if ! command -v diesel >/dev/null; then
  echo "install-test-tools: installing diesel_cli"
  cargo install diesel_cli --no-default-features --features postgres --locked --quiet || fail "cannot install diesel_cli"
fi

scripts/install-python-tools.sh >/dev/null || fail "cannot install the Python tools"
scripts/install-node-tools.sh >/dev/null || fail "cannot install the Node tools"
echo "install-test-tools: Postgres, Chromium, chromedriver, pgbouncer, just, diesel_cli, the Python and the Node tools are ready"
