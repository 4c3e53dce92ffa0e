#!/usr/bin/env bash
# crates/store-postgres/src/schema.rs must be what `diesel print-schema` generates from
# migrations/: apply them to a scratch database and compare.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v diesel >/dev/null || { echo "diesel CLI missing: cargo install diesel_cli --no-default-features --features postgres" >&2; exit 1; }
server=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
base=${server%/*}
name="genjobs_schema_check_$$"
psql "$server" -qc "CREATE DATABASE $name" >/dev/null
trap 'psql "$server" -qc "DROP DATABASE IF EXISTS $name WITH (FORCE)" >/dev/null' EXIT
url="$base/$name"
diesel migration run --database-url "$url" --locked-schema >/dev/null
generated=$(mktemp)
diesel print-schema --database-url "$url" > "$generated"
if ! diff -u crates/store-postgres/src/schema.rs "$generated"; then
  echo "schema.rs is out of date: run 'diesel migration run' and commit the result" >&2
  exit 1
fi
echo "schema.rs matches the migrations"
