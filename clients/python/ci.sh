#!/usr/bin/env bash
# CI for the Python client (clients/python): installs the package with its test extras and its
# native builder (clients/python/native) into a fresh virtual environment, lints and type-checks
# it, and runs its tests against the real session-svc and memory-svc.
#
#   clients/python/ci.sh                # builds the two servers with cargo if needed
#   ADK_SERVICES_BIN_DIR=DIR ci.sh      # use already built binaries from DIR instead
#   ADK_PY_VENV=DIR ci.sh               # keep the virtual environment in DIR (faster reruns)
#   PYTHON=python3.12 ci.sh             # another interpreter (3.10 or newer)
#
# Extra arguments go to pytest. Exits non-zero when anything fails.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
python="${PYTHON:-python3}"

"$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
  || { echo "ci.sh: $python is older than Python 3.10" >&2; exit 1; }

if [[ -z "${ADK_SERVICES_BIN_DIR:-}" ]]; then
  echo "== building session-svc and memory-svc"
  (cd "$repo" && cargo build --quiet -p session-svc -p memory-svc)
  target_dir="${CARGO_TARGET_DIR:-$repo/target}"
  [[ "$target_dir" = /* ]] || target_dir="$repo/$target_dir"
  export ADK_SERVICES_BIN_DIR="$target_dir/debug"
fi

# The tests run from this folder; a relative directory given by the caller means theirs.
ADK_SERVICES_BIN_DIR="$(cd "$ADK_SERVICES_BIN_DIR" && pwd)"

if [[ -n "${ADK_PY_VENV:-}" ]]; then
  mkdir -p "$ADK_PY_VENV"
  venv="$(cd "$ADK_PY_VENV" && pwd)"
else
  scratch="$(mktemp -d)"
  trap 'rm -rf "$scratch"' EXIT
  venv="$scratch/venv"
fi

echo "== installing adk-grpc-services[test] and its native builder into $venv"
[[ -x "$venv/bin/python" ]] || "$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$here[test]"
# The optional native builder (maturin builds it with cargo); its tests fail if it is missing.
# The dev profile: it reuses what a workspace build already compiled (pyo3, prost), and checks
# arithmetic overflow; users' installs build it in release mode.
MATURIN_PEP517_ARGS="--profile dev" \
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$here/native"
export ADK_GRPC_NATIVE_REQUIRED=1

cd "$here"
echo "== ruff, mypy --strict"
"$venv/bin/python" -m ruff check --no-cache --quiet src tests tools
"$venv/bin/python" -m ruff format --no-cache --check --quiet src tests tools
"$venv/bin/python" -m mypy --cache-dir "$venv/.mypy_cache"

echo "== pytest (servers from $ADK_SERVICES_BIN_DIR)"
"$venv/bin/python" -m pytest -p no:cacheprovider "$@"

if [[ $# -eq 0 ]]; then
  # What a client installed without the native builder reads sessions with.
  echo "== pytest: the session tests again without the native builder (ADK_GRPC_NATIVE=0)"
  ADK_GRPC_NATIVE=0 "$venv/bin/python" -m pytest -p no:cacheprovider -q \
    tests/test_session_service.py tests/test_session_contract.py tests/test_large_sessions.py
fi
