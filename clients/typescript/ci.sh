#!/usr/bin/env bash
# CI for the TypeScript client (clients/typescript): installs its locked dependencies from npm,
# checks that the generated code is current, formatting, lint and strict types, runs the tests
# against the real session-svc and memory-svc, packs the package and imports it from a fresh
# project, and runs the fidelity tool against itself.
#
#   clients/typescript/ci.sh                   # builds the two servers with cargo if needed
#   ADK_SERVICES_BIN_DIR=DIR ci.sh             # use already built binaries from DIR instead
#   ADK_TEST_POSTGRES=postgres://... ci.sh     # session and memory filter cases also on PostgreSQL (needs psql)
#
# Needs Node 20 or newer with npm. Extra arguments go to vitest. Exits non-zero when anything
# fails.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"

node -e 'process.exit(Number(process.versions.node.split(".")[0]) < 20 ? 1 : 0)' \
  || { echo "ci.sh: Node $(node --version) is older than Node 20" >&2; exit 1; }

if [[ -z "${ADK_SERVICES_BIN_DIR:-}" ]]; then
  echo "== building session-svc and memory-svc"
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

echo "== npm ci"
npm ci --no-audit --no-fund --loglevel=error

echo "== generated code is current (npm run generate)"
npx buf generate --template buf.gen.yaml -o "$scratch/generated"
diff -r src/gen "$scratch/generated/src/gen" \
  || { echo "ci.sh: src/gen differs from the proto files: run npm run generate" >&2; exit 1; }

echo "== format, lint, types"
npx prettier --check .
npx eslint .
npx tsc --noEmit

echo "== build"
npm run build

echo "== tests"
npx vitest run "$@"

echo "== the packed package installs and imports"
tarball="$(npm pack --silent --pack-destination "$scratch")"
mkdir "$scratch/consumer"
(
  cd "$scratch/consumer"
  npm init -y >/dev/null
  npm pkg set type=module >/dev/null
  npm install --no-audit --no-fund --loglevel=error "$scratch/$tarball"
  node --input-type=module -e '
    import { GrpcSessionService, GrpcMemoryService } from "@adk-services/grpc";
    import { BaseSessionService } from "@google/adk";
    const sessions = new GrpcSessionService({ uri: "grpc://127.0.0.1:1" });
    if (!(sessions instanceof BaseSessionService)) throw new Error("not a BaseSessionService");
    sessions.close();
    new GrpcMemoryService({ uri: "grpc://127.0.0.1:1" }).close();
    console.log("packed package imports: ok");
  '
  test -f node_modules/@adk-services/grpc/dist/index.d.ts
)

echo "== fidelity (TypeScript with itself)"
python3 "$repo/clients/fidelity/check.py" --pairs typescript:typescript
echo "== ci.sh: all passed"
