#!/usr/bin/env bash
# Runs genjobs-client's example against a running genjobs: the documented way to use the client
# works end to end (submit, stream, download).
# Usage: scripts/check-client-example.sh [path to the genjobs binary]
set -euo pipefail
cd "$(dirname "$0")/.."
binary="${1:-target/debug/genjobs}"
fail() { echo "check-client-example: $*" >&2; exit 1; }
[ -x "$binary" ] || fail "no genjobs binary at $binary (cargo build -p genjobs)"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
out=$(mktemp)
GENJOBS_BIND="127.0.0.1:$port" GENJOBS_SIM_PORT=0 GENJOBS_SIM_RUN_MS=500 GENJOBS_POLL_INTERVAL_MS=100 RUST_LOG=warn \
  "$binary" >"$out" 2>/dev/null &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; rm -f "$out"' EXIT
for _ in $(seq 1 50); do grep -q "demo user API key" "$out" && break; sleep 0.2; done
key=$(sed -n 's/^demo user API key: //p' "$out")
[ -n "$key" ] || fail "genjobs did not start"
printed=$(GENJOBS_API_URL="http://127.0.0.1:$port" GENJOBS_API_KEY="$key" \
  cargo run --quiet -p genjobs-client --example generate -- "a lighthouse") || fail "the example failed"
printf '%s\n' "$printed"
grep -q "Done: Succeeded 100%" <<<"$printed" || fail "the example did not see the job succeed"
[ "$(grep -c '\.png (' <<<"$printed")" -eq 2 ] || fail "the example did not download two images"
