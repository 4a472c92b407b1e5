#!/usr/bin/env bash
# CI for the gateway's MCP clients (gateway/tests/clients): the Python MCP SDK over streamable
# HTTP and stdio, the TypeScript SDK, an ADK agent with McpToolset, authorization and hostile
# input, all against the real gateway, session-svc and memory-svc.
#
#   gateway/ci.sh                     # builds the three binaries with cargo
#   ADK_BIN_DIR=DIR gateway/ci.sh     # use binaries already built in DIR instead
#   ADK_PY_VENV=DIR gateway/ci.sh     # keep the virtual environment in DIR (faster reruns)
#
# Extra arguments go to pytest. Exits non-zero when anything fails.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/.." && pwd)"
clients="$here/tests/clients"
python="${PYTHON:-python3}"

if [[ -z "${ADK_BIN_DIR:-}" ]]; then
  echo "== building session-svc, memory-svc and gateway"
  (cd "$repo" && cargo build --quiet -p session-svc -p memory-svc -p gateway)
  target_dir="${CARGO_TARGET_DIR:-$repo/target}"
  [[ "$target_dir" = /* ]] || target_dir="$repo/$target_dir"
  export ADK_BIN_DIR="$target_dir/debug"
fi
ADK_BIN_DIR="$(cd "$ADK_BIN_DIR" && pwd)"
export ADK_BIN_DIR

if [[ -n "${ADK_PY_VENV:-}" ]]; then
  mkdir -p "$ADK_PY_VENV"
  venv="$(cd "$ADK_PY_VENV" && pwd)"
else
  scratch="$(mktemp -d)"
  trap 'rm -rf "$scratch"' EXIT
  venv="$scratch/venv"
fi

echo "== installing the Python MCP SDK and google-adk into $venv"
[[ -x "$venv/bin/python" ]] || "$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$clients/requirements.txt"

echo "== ruff and mypy"
(cd "$clients/python" && "$venv/bin/ruff" check . && "$venv/bin/ruff" format --check . \
  && "$venv/bin/mypy" .)

echo "== the TypeScript SDK's test (npm ci, tsc --strict)"
(cd "$clients/typescript" && npm ci --no-audit --no-fund --silent && npx tsc -p .)

echo "== pytest"
cd "$clients/python"
"$venv/bin/python" -m pytest -q "$@"
