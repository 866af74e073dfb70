#!/bin/sh
# Installs what the WireGuard end-to-end test needs: wg and wg-quick (wireguard-tools), the
# userspace implementation wireguard-go (no kernel module is needed), and ip (iproute2).
# Idempotent: does nothing when all three are already on PATH.
set -eu
need=""
command -v wg >/dev/null 2>&1 && command -v wg-quick >/dev/null 2>&1 || need="$need wireguard-tools"
command -v wireguard-go >/dev/null 2>&1 || need="$need wireguard-go"
command -v ip >/dev/null 2>&1 || need="$need iproute2"
[ -z "$need" ] && exit 0
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo -n"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $need
