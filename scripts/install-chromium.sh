#!/bin/sh
# Installs what the console's browser tests and bench drive: Debian's `chromium` (headless, through
# playwright-core, which downloads no browser of its own). Idempotent: does nothing when chromium
# is already on PATH.
set -eu
if command -v chromium >/dev/null 2>&1; then
  exit 0
fi
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo -n"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends chromium
