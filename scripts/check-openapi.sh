#!/usr/bin/env bash
# Checks the served OpenAPI document from outside: openapi-spec-validator on the document, then a
# bounded schemathesis run against a running genjobs (no 5xx; every status, content type, header
# and body as documented), once as a user and once as the operator.
# Usage: scripts/check-openapi.sh [path to the genjobs binary]
set -euo pipefail
cd "$(dirname "$0")/.."
binary="${1:-target/debug/genjobs}"
fail() { echo "check-openapi: $*" >&2; exit 1; }
[ -x "$binary" ] || fail "no genjobs binary at $binary (cargo build -p genjobs)"

venv="${GENJOBS_PY_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/genjobs/venv}"
if [ ! -x "$venv/bin/schemathesis" ] || [ ! -x "$venv/bin/openapi-spec-validator" ]; then
  python3 -m venv "$venv" || fail "cannot create a Python virtual environment at $venv"
  "$venv/bin/pip" install --quiet openapi-spec-validator==0.9.0 schemathesis==4.32.5 \
    || fail "cannot install openapi-spec-validator and schemathesis from PyPI"
fi

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
base="http://127.0.0.1:$port"
admin="openapi-check-admin-token-of-32-characters"
log=$(mktemp)
GENJOBS_BIND="127.0.0.1:$port" GENJOBS_SIM_PORT=0 GENJOBS_ADMIN_TOKEN="$admin" GENJOBS_SIM_QUEUE_MS=20 GENJOBS_SIM_RUN_MS=200 \
  GENJOBS_POLL_INTERVAL_MS=100 GENJOBS_STREAM_MAX_SECS=2 GENJOBS_LOG_FORMAT=json RUST_LOG=warn \
  "$binary" >"$log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 1 50); do curl -sf "$base/healthz" >/dev/null && break; sleep 0.2; done
curl -sf "$base/healthz" >/dev/null || { cat "$log"; fail "genjobs did not start"; }

document=$(mktemp --suffix=.json)
curl -sf "$base/api/v1/openapi.json" -o "$document" || fail "GET /api/v1/openapi.json failed"
"$venv/bin/openapi-spec-validator" "$document" || fail "the OpenAPI document is not valid"
grep -q '"openapi":"3.1' "$document" || fail "the document is not OpenAPI 3.1"

# A user whose limits the fuzzer cannot reach, so that its requests test the logic, not the 429.
user=$(curl -sf "$base/api/admin/users" -H "Authorization: Bearer $admin" -H 'Content-Type: application/json' \
  -d '{"name":"fuzzer","credits":1000000000,"rate_limit_per_minute":1000000,"max_concurrent_jobs":100000}')
key=$(python3 -c 'import json, sys; print(json.load(sys.stdin)["api_key"])' <<<"$user")

checks=not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,response_schema_conformance
run() {
  "$venv/bin/schemathesis" run "$base/api/v1/openapi.json" --checks "$checks" --max-examples 25 \
    --request-timeout 70 --seed 20261122 --no-color "$@"
}
echo "-- schemathesis as a user"
run -H "Authorization: Bearer $key" --exclude-tag admin || fail "schemathesis found failures (user routes)"
echo "-- schemathesis as the operator"
run -H "Authorization: Bearer $admin" --include-tag admin --include-path /metrics \
  || fail "schemathesis found failures (admin routes)"
kill -0 "$pid" 2>/dev/null || { cat "$log"; fail "genjobs died during the run"; }
echo "check-openapi: document valid; schemathesis found no failure"
