#!/usr/bin/env bash
# Installs podman and runc from Debian packages and writes the containers.conf these machines need:
# the default ulimits podman sets fail inside an unprivileged parent container, and crun is not
# what the runtime checks use. Idempotent: a second run changes nothing.
set -euo pipefail
if ! command -v podman >/dev/null 2>&1 || ! command -v runc >/dev/null 2>&1; then
  echo "setup-podman: installing podman and runc (apt-get)" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc >&2
fi
conf=/etc/containers/containers.conf.d/50-svc.conf
want='[containers]
default_ulimits = []

[engine]
runtime = "runc"'
if [ "$(cat "$conf" 2>/dev/null)" != "$want" ]; then
  mkdir -p "$(dirname "$conf")"
  printf '%s\n' "$want" > "$conf"
  echo "setup-podman: wrote $conf" >&2
fi
