#!/usr/bin/env bash
# Installs the pinned MinIO server the integration tests run against (docs/architecture.md; the choice and pin are in docs/decisions.md "Store: MinIO
# for the store contract tests"). Built from source through the Go module proxy into
# .tools/bin/minio; skipped when that binary already carries the pinned module version.
# Needs only Go (>= the module's go line) and the module proxy.
set -euo pipefail

# MinIO tags are not semver, so the proxy serves commits as pseudo-versions. This one is
# the last commit on the proxy (2026-02-12); anything before August 2025 lets If-Match on a
# missing key succeed, which the store self-test refuses.
MINIO_MODULE=github.com/minio/minio
MINIO_VERSION=v0.0.0-20260212201848-7aac2a2c5b7c

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin_dir="$root/.tools/bin"
target="$bin_dir/minio"

say() { echo "install-minio: $*" >&2; }

if ! command -v go >/dev/null 2>&1; then
  say "Go is required to build MinIO (https://go.dev/dl/)"
  exit 1
fi

# `go version -m` reads the module version stamped into the binary at build time, so the
# cache check needs no side file that could disagree with the binary.
if [ -x "$target" ] && go version -m "$target" 2>/dev/null | grep -Eq "^[[:space:]]+mod[[:space:]]+$MINIO_MODULE[[:space:]]+$MINIO_VERSION([[:space:]]|\$)"; then
  say "MinIO $MINIO_VERSION already at $target"
  exit 0
fi

mkdir -p "$bin_dir"
say "building MinIO $MINIO_VERSION with $(go version | cut -d' ' -f3) (takes a few minutes on a cold cache)"
start=$(date +%s)
# A private GOBIN keeps a half-written binary out of .tools/bin if the build is interrupted.
staging="$(mktemp -d "$bin_dir/.minio-build.XXXXXX")"
trap 'rm -rf "$staging"' EXIT
# The proxy is named explicitly unless the caller set one: `direct` would need git and a
# network path to GitHub, which CI machines need not have.
GOPROXY="${GOPROXY:-https://proxy.golang.org}" \
  GOFLAGS="${GOFLAGS:-} -trimpath" \
  CGO_ENABLED=0 \
  GOBIN="$staging" \
  go install "$MINIO_MODULE@$MINIO_VERSION"
mv -f "$staging/minio" "$target"
say "built $target in $(($(date +%s) - start)) s"
