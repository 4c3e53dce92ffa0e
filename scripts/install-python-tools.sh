#!/usr/bin/env bash
# Installs the Python tools the checks and tests use, pinned, into one virtual environment
# (default ~/.cache/genjobs/venv; GENJOBS_PY_VENV overrides it): openapi-spec-validator and
# schemathesis for scripts/check-openapi.sh, moto's S3 server for the output store's tests, and the
# official clients the black-box tests drive genjobs with, as a user's tool would: `openai` (the
# OpenAI-compatible edge) and `standardwebhooks` (verifying webhooks sent to clients).
set -euo pipefail
venv="${GENJOBS_PY_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/genjobs/venv}"
fail() { echo "install-python-tools: $*" >&2; exit 1; }
[ -x "$venv/bin/pip" ] || python3 -m venv "$venv" || fail "cannot create a Python virtual environment at $venv"
"$venv/bin/pip" install --quiet openapi-spec-validator==0.9.0 schemathesis==4.32.5 'moto[server]==5.2.5' \
  openai==3.57.0 standardwebhooks==1.1.0 \
  || fail "cannot install the Python tools from PyPI"
[ -x "$venv/bin/moto_server" ] || fail "moto_server is missing from $venv after installing moto[server]"
echo "$venv"
