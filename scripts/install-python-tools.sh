#!/usr/bin/env bash
# Installs the Python tools the checks and tests use, pinned, into one virtual environment
# (default ~/.cache/genjobs/venv; GENJOBS_PY_VENV overrides it): openapi-spec-validator and
# schemathesis for scripts/check-openapi.sh, and moto's S3 server for the output store's tests.
set -euo pipefail
venv="${GENJOBS_PY_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/genjobs/venv}"
fail() { echo "install-python-tools: $*" >&2; exit 1; }
[ -x "$venv/bin/pip" ] || python3 -m venv "$venv" || fail "cannot create a Python virtual environment at $venv"
"$venv/bin/pip" install --quiet openapi-spec-validator==0.9.0 schemathesis==4.32.5 'moto[server]==5.2.5' \
  || fail "cannot install the Python tools from PyPI"
[ -x "$venv/bin/moto_server" ] || fail "moto_server is missing from $venv after installing moto[server]"
echo "$venv"
