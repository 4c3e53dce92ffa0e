#!/usr/bin/env bash
# Installs the Node tools the black-box tests use, pinned, into one directory (default
# ~/.cache/genjobs/node; GENJOBS_NODE_TOOLS overrides it): the official `openai` package, which
# tests/node/openai_client.mjs drives the OpenAI-compatible edge with, as a user's tool would.
set -euo pipefail
tools="${GENJOBS_NODE_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/genjobs/node}"
fail() { echo "install-node-tools: $*" >&2; exit 1; }
command -v npm >/dev/null || fail "npm is missing: install Node.js 18 or later"
mkdir -p "$tools" || fail "cannot create $tools"
[ -f "$tools/package.json" ] || echo '{"private": true}' >"$tools/package.json"
npm install --prefix "$tools" --no-audit --no-fund --silent --save-exact openai@7.55.0 \
  || fail "cannot install the Node tools from npm"
[ -f "$tools/node_modules/openai/package.json" ] || fail "openai is missing from $tools after installing it"
echo "$tools"
