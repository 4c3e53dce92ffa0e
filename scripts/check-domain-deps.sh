#!/usr/bin/env bash
# The domain crate must not depend on any I/O crate: no web framework, database driver, HTTP
# client or async runtime. Reused by other tools, it must stay pure.
set -euo pipefail
cd "$(dirname "$0")/.."
tree=$(cargo tree -p genjobs-domain -e normal --prefix none)
forbidden=$(printf '%s\n' "$tree" | grep -E '^(actix[-a-z]*|diesel[-a-z_]*|reqwest|hyper[-a-z]*|tokio[-a-z]*|mio|deadpool[-a-z]*|tokio-postgres|sqlx[-a-z]*) ' | sort -u || true)
if [ -n "$forbidden" ]; then
  echo "genjobs-domain depends on I/O crates:" >&2
  printf '%s\n' "$forbidden" >&2
  exit 1
fi
echo "genjobs-domain: no I/O crates among $(printf '%s\n' "$tree" | sort -u | wc -l) dependencies"
