#!/usr/bin/env bash
# CI for the Java client (clients/java): checks formatting (spotless, google-java-format),
# generates the gRPC stubs from proto/, builds, and runs the tests against the real session-svc
# and memory-svc (and both on PostgreSQL when ADK_TEST_POSTGRES is set), all in
# `mvn -B verify`. Needs JDK 17+ and Maven 3.8+ (Debian: openjdk-17-jdk-headless, maven);
# dependencies come from Maven Central.
#
#   clients/java/ci.sh                     # builds the two servers with cargo if needed
#   ADK_SERVICES_BIN_DIR=DIR ci.sh         # use already built binaries from DIR instead
#   ADK_TEST_POSTGRES=postgres://... ci.sh # also the session and memory filter cases on PostgreSQL
#
# Extra arguments go to Maven. Exits non-zero when anything fails.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"

if ! command -v mvn >/dev/null; then
  echo "== installing maven"
  apt-get install -y -qq --no-install-recommends maven >/dev/null
fi

if [[ -z "${ADK_SERVICES_BIN_DIR:-}" ]]; then
  echo "== building session-svc and memory-svc"
  (cd "$repo" && cargo build --quiet -p session-svc -p memory-svc)
  target_dir="${CARGO_TARGET_DIR:-$repo/target}"
  [[ "$target_dir" = /* ]] || target_dir="$repo/$target_dir"
  export ADK_SERVICES_BIN_DIR="$target_dir/debug"
fi
ADK_SERVICES_BIN_DIR="$(cd "$ADK_SERVICES_BIN_DIR" && pwd)"
export ADK_SERVICES_BIN_DIR

echo "== mvn verify (servers from $ADK_SERVICES_BIN_DIR)"
cd "$here"
mvn -B -ntp verify "$@"
