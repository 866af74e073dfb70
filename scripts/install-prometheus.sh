#!/bin/sh
# Installs what the Prometheus metrics tests need into .tools/bin: `prometheus` (the server
# test/metrics-prometheus-server.test.ts starts on loopback to scrape two nodes) and `promtool`
# (`promtool check metrics` on a scrape, `promtool check rules` on the documented alert rules),
# both from Debian's or Ubuntu's `prometheus` package. The package is downloaded and unpacked,
# not installed: installing it would enable and start a Prometheus service on a machine with
# systemd, and the tests start their own. Its binaries need only the C library.
# Idempotent: does nothing when both are already in .tools/bin.
set -eu
root="$(cd "$(dirname "$0")/.." && pwd)"
bin_dir="$root/.tools/bin"
say() { echo "install-prometheus: $*" >&2; }
if [ -x "$bin_dir/prometheus" ] && [ -x "$bin_dir/promtool" ]; then
  exit 0
fi
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo -n"
mkdir -p "$bin_dir"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# apt's download sandbox user must be able to write the folder it downloads into.
chmod 0755 "$work"
cd "$work"
# A fresh machine may have no package lists yet: update them once, then try again.
if ! apt-get download prometheus >/dev/null 2>&1; then
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get update -qq
  apt-get download prometheus
fi
dpkg-deb -x prometheus_*.deb unpacked
for tool in prometheus promtool; do
  install -m 0755 "unpacked/usr/bin/$tool" "$bin_dir/.$tool.new"
  mv -f "$bin_dir/.$tool.new" "$bin_dir/$tool"
done
say "$("$bin_dir/prometheus" --version 2>&1 | head -n 1) and promtool in $bin_dir"
