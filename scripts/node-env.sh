#!/usr/bin/env bash
# Sourced by the Makefile: puts a Node.js >= 22.18 on PATH.
# The machine's own Node is used when new enough; otherwise Node 24 LTS is
# fetched once from the npm registry (package `node@24`) into .tools/node24.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
node_ok() {
  command -v node >/dev/null 2>&1 || return 1
  node -e 'const [a,b]=process.versions.node.split(".").map(Number);process.exit(a>22||(a===22&&b>=18)?0:1)'
}
if ! node_ok; then
  if [ ! -x "$root/.tools/node24/.bin/node" ]; then
    echo "svc: fetching Node.js 24 from the npm registry into .tools/node24" >&2
    mkdir -p "$root/.tools/node24-install"
    npm install --prefix "$root/.tools/node24-install" node@24 --no-audit --no-fund --loglevel=error >&2
    rm -rf "$root/.tools/node24"
    mv "$root/.tools/node24-install/node_modules" "$root/.tools/node24"
    rm -rf "$root/.tools/node24-install"
  fi
  export PATH="$root/.tools/node24/.bin:$PATH"
fi
