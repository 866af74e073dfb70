#!/bin/sh
# Installs what the ACME end-to-end test in adapter/ needs: Knot DNS (knotd and knotc, Debian's
# `knot`), the authoritative server the test starts on loopback and updates by RFC 2136.
# Idempotent: does nothing when knotd is already on PATH (or in /usr/sbin).
set -eu
if command -v knotd >/dev/null 2>&1 || [ -x /usr/sbin/knotd ]; then
  exit 0
fi
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo -n"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# The package's postinst starts no server in a container without systemd; the test starts its own.
$SUDO apt-get install -y -qq --no-install-recommends knot
