#!/usr/bin/env bash
# CI for the Go client (clients/go): checks formatting, vet and that the generated stubs in pb/
# are current, then runs the tests (-race) against the real session-svc and memory-svc,
# including ADK Go's own session conformance suite and the cross-language test with the Python
# client.
#
#   clients/go/ci.sh                     # builds the two servers with cargo if needed
#   ADK_SERVICES_BIN_DIR=DIR ci.sh       # use already built binaries from DIR instead
#   ADK_TEST_POSTGRES=postgres://... ci.sh  # the session and memory tests again on PostgreSQL
#   ADK_TEST_PYTHON=PYTHON ci.sh         # a Python with clients/python installed (else one is
#                                        # made in a temporary virtual environment)
#
# Needs Go 1.26, npm (buf, for the stub check), python3 >= 3.10 (the cross-language test),
# and psql when ADK_TEST_POSTGRES is set. Everything else comes from the Go module proxy, npm
# and PyPI. Extra arguments go to `go test`. Exits non-zero when anything fails.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
started=$SECONDS
step() { printf '\n== %s (at %d s)\n' "$*" "$((SECONDS - started))"; }

go version
if [[ -z "${ADK_SERVICES_BIN_DIR:-}" ]]; then
  step "building session-svc and memory-svc"
  (cd "$repo" && cargo build --quiet -p session-svc -p memory-svc)
  target_dir="${CARGO_TARGET_DIR:-$repo/target}"
  [[ "$target_dir" = /* ]] || target_dir="$repo/$target_dir"
  export ADK_SERVICES_BIN_DIR="$target_dir/debug"
fi
ADK_SERVICES_BIN_DIR="$(cd "$ADK_SERVICES_BIN_DIR" && pwd)"
export ADK_SERVICES_BIN_DIR

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
cd "$here"

step "modules (the Go module proxy)"
go mod download
go mod verify
go mod tidy -diff

step "gofmt, go vet"
unformatted="$(gofmt -l .)"
if [[ -n "$unformatted" ]]; then
  echo "gofmt: these files need formatting:" >&2
  echo "$unformatted" >&2
  exit 1
fi
go vet ./...

step "generated stubs (pb/) are current"
npm install --silent --no-audit --no-fund --prefix "$scratch/npm" @bufbuild/buf@1.75.0 >/dev/null
"$scratch/npm/node_modules/.bin/buf" generate -o "$scratch/generated"
if ! diff -r pb "$scratch/generated/pb"; then
  echo "pb/ is stale: run ./generate.sh (or go generate .) and commit the result" >&2
  exit 1
fi
echo "pb/: current"

if [[ -z "${ADK_TEST_PYTHON:-}" ]]; then
  step "the Python client for the cross-language test (clients/python, from PyPI)"
  python3 -m venv "$scratch/venv"
  "$scratch/venv/bin/python" -m pip install --quiet --disable-pip-version-check "$repo/clients/python"
  export ADK_TEST_PYTHON="$scratch/venv/bin/python"
fi

step "go test -race (servers from $ADK_SERVICES_BIN_DIR, on sled)"
env -u ADK_TEST_POSTGRES go test -race -count=1 "$@" ./...

if [[ -n "${ADK_TEST_POSTGRES:-}" ]]; then
  step "the session and memory tests again on PostgreSQL (a fresh schema per server)"
  go test -race -count=1 "$@" ./grpcsession/ ./grpcmemory/ ./cmd/... ./examples/...
fi
step "done"
