#!/usr/bin/env bash
# The domain crate must not depend on any I/O crate (web framework, database driver, HTTP client,
# async runtime) nor on mockall: reused by other tools, it must stay pure, and its mocks are for
# tests only (the `mocks` feature is enabled from dev-dependencies alone). The production binary
# must not compile mockall either.
set -euo pipefail
cd "$(dirname "$0")/.."
forbidden='^(actix[-a-z]*|diesel[-a-z_]*|reqwest|hyper[-a-z]*|tokio[-a-z]*|mio|deadpool[-a-z]*|tokio-postgres|sqlx[-a-z]*|mockall[-a-z_]*) '
tree=$(cargo tree -p genjobs-domain -e normal --prefix none)
found=$(printf '%s\n' "$tree" | grep -E "$forbidden" | sort -u || true)
if [ -n "$found" ]; then
  echo "genjobs-domain depends on crates it must not:" >&2
  printf '%s\n' "$found" >&2
  exit 1
fi
binary=$(cargo tree -p genjobs -e normal --prefix none)
if printf '%s\n' "$binary" | grep -qE '^mockall '; then
  echo "the genjobs binary compiles mockall: enable the domain's mocks feature only from dev-dependencies" >&2
  exit 1
fi
echo "genjobs-domain: no I/O crate and no mockall among $(printf '%s\n' "$tree" | sort -u | wc -l) dependencies; the binary has no mockall"

# The domain is provider-neutral: no provider's name, endpoint id or parameter name appears in it
# (those live in crates/upstream-fal).
provider=$(grep -rnwiE 'fal|queue\.fal\.run' crates/domain || true)
provider+=$(grep -rnE 'fal-ai/|bytedance/|num_images|image_urls|image_size|"duration":' crates/domain || true)
if [ -n "$provider" ]; then
  echo "crates/domain names the provider's endpoints or fields:" >&2
  printf '%s\n' "$provider" >&2
  exit 1
fi
echo "genjobs-domain: provider-neutral (no provider name, endpoint id or parameter name)"

# The domain decides and never waits: its concurrency is never spelled as nested futures, it
# races nothing (no `select!`), and it sleeps nowhere. Long-polls, streams and retries get a
# decision from it (answer now, or wait until a time) and the edge or the driver does the waiting.
waits=$(grep -rnwE 'Either|select_biased' crates/domain/src || true)
waits+=$(grep -rnE 'select(_biased)?!|\.sleep\(' crates/domain/src || true)
if [ -n "$waits" ]; then
  echo "crates/domain races futures or sleeps; the waiting belongs in crates/driver or the edge:" >&2
  printf '%s\n' "$waits" >&2
  exit 1
fi
echo "genjobs-domain: no Either, no select!, no sleep"
