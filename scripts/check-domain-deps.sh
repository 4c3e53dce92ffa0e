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

# The domain holds rules, not scheduling: its concurrency is never spelled as nested futures
# (the loops that race timers, signals and work live in crates/driver, on tokio).
either=$(grep -rnw 'Either' crates/domain || true)
if [ -n "$either" ]; then
  echo "crates/domain races futures with Either; such loops belong in crates/driver:" >&2
  printf '%s\n' "$either" >&2
  exit 1
fi
echo "genjobs-domain: no Either"
