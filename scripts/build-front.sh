#!/usr/bin/env bash
# Builds cell-front, the resident part of `cell serve` (the Go module in runtime/front/,
# docs/runtime.md), into the file given: runtime/bin/cell-front for a checkout (make setup),
# dist/cell-front for a release (make dist), one per architecture for the images (make images,
# with GOARCH set). The one place its build flags live:
#   CGO_ENABLED=0     static: runs on any Linux of its architecture, in a FROM-scratch image too;
#   -trimpath         no build machine paths in the binary;
#   -s -w             no symbol tables (a smaller file to map once per application);
#   -buildvcs=false   a clone without history (CI) or a copied tree builds the same binary.
# Usage: build-front.sh <output>; GOOS/GOARCH from the environment (default: this machine).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
[ $# -eq 1 ] || { echo "usage: build-front.sh <output>" >&2; exit 2; }
out="$(cd "$(dirname "$1")" 2>/dev/null && pwd)/$(basename "$1")" ||
  { echo "build-front: the folder of $1 does not exist" >&2; exit 1; }

if ! command -v go >/dev/null 2>&1; then
  echo "build-front: go is not installed; install Go 1.26 or newer" >&2
  exit 1
fi

# Written beside the target and moved over it: a half-written binary is never left at <output>.
cd "$root/runtime/front"
CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags='-s -w' -o "$out.tmp" .
mv -f "$out.tmp" "$out"
