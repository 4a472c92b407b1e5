#!/usr/bin/env bash
# Regenerates pb/ from the contract in ../../proto with buf and this module's pinned plugins
# (go.mod `tool` directives). buf comes from $BUF, else PATH, else npm (@bufbuild/buf).
set -euo pipefail
cd "$(dirname "$0")"
buf="${BUF:-$(command -v buf || true)}"
if [[ -z "$buf" ]]; then
  tools="$(mktemp -d)"
  trap 'rm -rf "$tools"' EXIT
  npm install --silent --no-audit --no-fund --prefix "$tools" @bufbuild/buf@1.75.0 >/dev/null
  buf="$tools/node_modules/.bin/buf"
fi
rm -rf pb
"$buf" generate
