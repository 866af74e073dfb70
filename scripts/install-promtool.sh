#!/bin/sh
# Installs what the Prometheus endpoint's format test needs: promtool (Debian's `prometheus`
# package), which checks the scraped text with `promtool check metrics`. The package's postinst
# starts no server in a container without systemd; the test runs promtool alone.
# Idempotent: does nothing when promtool is already on PATH.
set -eu
if command -v promtool >/dev/null 2>&1; then
  exit 0
fi
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo -n"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends prometheus
