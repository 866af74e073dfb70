#!/usr/bin/env bash
# Builds the Caddy ingress adapter (adapter/, docs/ingress.md) into .tools/bin:
#   svc-caddy      lean flavour: Caddy's standard modules + the svc modules
#   svc-caddy-dns  the same plus DNS provider modules (managed wildcard certificates)
# A binary newer than every file under adapter/ is kept as it is, so repeated
# `make test` does not rebuild. Progress goes to stderr. Needs Go >= 1.26 and
# the Go module proxy (modules are pinned by adapter/go.sum).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$root/.tools/bin"
mkdir -p "$bin"

if ! command -v go >/dev/null 2>&1; then
  echo "build-caddy: go is not installed; install Go 1.26 or newer" >&2
  exit 1
fi

# No -trimpath, so that `go test ./...` in adapter/ (make adapter-test) shares
# the build cache with this build instead of compiling Caddy twice; release
# builds may set GOFLAGS=-trimpath. -buildvcs=false: CI's clone may lack the
# history VCS stamping reads. -s -w drop the symbol tables (82 MB -> 56 MB).
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-buildvcs=false"
ldflags="-s -w"

fresh() { # fresh <binary>: true when the binary is newer than every file under adapter/
  [ -x "$1" ] || return 1
  [ -z "$(find "$root/adapter" -type f -newer "$1" -print -quit)" ]
}

build() { # build <name>
  local name="$1" out="$bin/$1"
  if fresh "$out"; then
    echo "build-caddy: $name is up to date ($out)" >&2
    return
  fi
  echo "build-caddy: building $name (first build downloads modules and takes a few minutes) ..." >&2
  local start=$SECONDS
  (cd "$root/adapter" && go build -ldflags="$ldflags" -o "$out.tmp" "./cmd/$name")
  mv -f "$out.tmp" "$out"
  echo "build-caddy: built $out in $((SECONDS - start))s ($(du -h "$out" | cut -f1))" >&2
}

build svc-caddy
build svc-caddy-dns
