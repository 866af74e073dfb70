#!/usr/bin/env bash
# `make image-test`: runs the images `make images` built, for real, with podman.
#  amd64: a node from svc:edge on a local-directory bucket answers `svc health` and passes the
#  image's own health check (`podman healthcheck run`); svc-caddy:edge and svc-caddy:edge-dns,
#  each with the default configuration and only SVC_FLEET_* set (the fleet's plain-HTTP redirect
#  off), proxy a host the fleet routes to that node and redirect a host it does not to HTTPS.
#  (The HTTPS site and the error page need certificates; test/caddy-e2e.test.ts covers them with
#  the same Caddyfile and Caddy's internal issuer.) Everything listens on
#  loopback only (published ports of the node's network namespace, which Caddy joins).
#  arm64: every ELF binary the images carry is an aarch64 one, the amd64 ones x86-64; the svc
#  images carry cell-front beside runtime/bin/cell (`cell serve` execs it), static.
# Each failed check prints FAIL and the script exits 1; every container it started is removed.
set -euo pipefail
tag="${1:-edge}"
run="svc-imgtest-$$"
failures=0
dir="$(mktemp -d)"
cleanup() {
  # The Caddys share the node's network namespace: they go first, or the node is refused.
  podman rm --ignore -f -t 0 "$run-caddy" "$run-caddy-dns" >/dev/null 2>&1 || true
  podman rm --ignore -f -t 0 "$run-node" >/dev/null 2>&1 || true
  if podman ps -a --format '{{.Names}}' | grep -q "^$run-"; then echo "FAIL containers left behind: $run-*"; fi
  rm -rf "$dir"
}
trap cleanup EXIT
pass() { echo "ok   $*"; }
fail() {
  echo "FAIL $*"
  failures=$((failures + 1))
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# wait_for <seconds> <command...>: polls the command until it succeeds or the deadline passes.
wait_for() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.5
  done
}

token="image-test-$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')"
api_port="$(free_port)"
http_port="$(free_port)"
http_port_dns="$(free_port)"
mkdir "$dir/bucket"
chown 10001:10001 "$dir/bucket"

echo "# node: svc:$tag"
podman run -d --name "$run-node" -p "127.0.0.1:$api_port:7311" -p "127.0.0.1:$http_port:80" \
  -p "127.0.0.1:$http_port_dns:8080" -v "$dir/bucket:/bucket" -e SVC_S3_ENDPOINT=file:///bucket \
  -e SVC_NODE_ID=image-test -e SVC_ADVERTISE=127.0.0.1:7311 -e "SVC_INGRESS_TOKEN=$token" \
  -e SVC_PLATFORM_DOMAINS=fleet.test "svc:$tag" >/dev/null
if wait_for 60 podman exec "$run-node" svc health; then
  health="$(podman exec "$run-node" svc health)"
  [[ "$health" == *'"ok":true'* && "$health" == *'"node":"image-test"'* ]] &&
    pass "svc health in the container: $health" || fail "svc health answered $health"
else
  fail "svc health never passed: $(podman logs "$run-node" 2>&1 | tail -5)"
fi
from_host="$(curl -fsS "http://127.0.0.1:$api_port/.well-known/svc/health" || true)"
[[ "$from_host" == *'"ok":true'* ]] && pass "health on the published port" || fail "health from the host: $from_host"
# `podman healthcheck run` runs the image's HEALTHCHECK (svc health): exit 0 and state healthy.
if podman healthcheck run "$run-node" 2>/dev/null; then
  state="$(podman inspect "$run-node" --format '{{.State.Health.Status}}')"
  [ "$state" = healthy ] && pass "podman healthcheck run: $state" || fail "health state after the check: $state"
else
  fail "podman healthcheck run failed"
fi
configured="$(podman image inspect "svc:$tag" --format '{{.HealthCheck.Test}} {{.Config.User}} {{.Config.Volumes}}')"
[[ "$configured" == *"svc health"* && "$configured" == *10001* && "$configured" == */var/lib/svc* ]] &&
  pass "image config: $configured" || fail "image config: $configured"
[ "$(podman exec "$run-node" /bin/busybox id -u)" = 10001 ] &&
  pass "runs as uid 10001" || fail "not running as uid 10001"

# One Caddy per flavour in the node's network namespace: the lean one on :80 (the default
# configuration as it is), the -dns one on :8080 (the same file with only its HTTP port moved).
podman run -d --name "$run-caddy" --network "container:$run-node" -e SVC_FLEET_ENDPOINT=http://127.0.0.1:7311 \
  -e "SVC_FLEET_TOKEN=$token" -e SVC_FLEET_HTTP_REDIRECT=off -e SVC_FLEET_POLL_INTERVAL=1s "svc-caddy:$tag" >/dev/null
# The -dns image: its own Caddyfile moved to :8080, fed through a bind mount of the same file.
podman run --rm --entrypoint /bin/sh "svc-caddy:$tag-dns" -c 'cat /etc/caddy/Caddyfile' >"$dir/Caddyfile"
sed -i '0,/^{/s//{\n\thttp_port 8080\n\thttps_port 8443\n\tadmin off/' "$dir/Caddyfile"
chmod 644 "$dir/Caddyfile"
podman run -d --name "$run-caddy-dns" --network "container:$run-node" -v "$dir/Caddyfile:/etc/caddy/Caddyfile:ro" \
  -e SVC_FLEET_ENDPOINT=http://127.0.0.1:7311 -e "SVC_FLEET_TOKEN=$token" -e SVC_FLEET_HTTP_REDIRECT=off \
  -e SVC_FLEET_POLL_INTERVAL=1s "svc-caddy:$tag-dns" >/dev/null

check_proxy() { # check_proxy <label> <port>
  local label="$1" port="$2" body status
  proxied() { curl -fsS -H 'Host: fleet.test' "http://127.0.0.1:$port/.well-known/svc/health" | grep -q '"node":"image-test"'; }
  if wait_for 60 proxied; then
    pass "$label proxies fleet.test to the node: $(curl -sS -H 'Host: fleet.test' "http://127.0.0.1:$port/.well-known/svc/health")"
  else
    fail "$label never proxied fleet.test: $(curl -sS -i -H 'Host: fleet.test' "http://127.0.0.1:$port/.well-known/svc/health" 2>&1 | head -3) $(podman logs "$3" 2>&1 | tail -5)"
  fi
  # A host the fleet does not serve over plain HTTP is redirected to HTTPS (308), path kept.
  local answer
  answer="$(curl -sS -o /dev/null -w '%{http_code} %{redirect_url}' -H 'Host: nobody.example' "http://127.0.0.1:$port/x?y=1")"
  [ "$answer" = "308 https://nobody.example/x?y=1" ] && pass "$label redirects a host it does not serve: $answer" ||
    fail "$label answered a host it does not serve with: $answer"
  logged() { [[ "$(podman logs "$1" 2>&1)" == *'"logger":"http.log.access'* ]]; }
  wait_for 10 logged "$3" && pass "$label writes the JSON access log to stdout" ||
    fail "$label wrote no access log line"
}
check_proxy "svc-caddy:$tag (default configuration)" "$http_port" "$run-caddy"
check_proxy "svc-caddy:$tag-dns" "$http_port_dns" "$run-caddy-dns"
[ "$(podman inspect "$run-caddy" --format '{{.Config.User}}')" = 10001:10001 ] && pass "svc-caddy runs as 10001" ||
  fail "svc-caddy user: $(podman inspect "$run-caddy" --format '{{.Config.User}}')"

echo "# architectures"
# unpack <image> <dir>: the image's filesystem, every layer of its docker archive into one tree.
unpack() {
  mkdir -p "$2/archive" "$2/root"
  podman image save --format docker-archive "$1" 2>/dev/null | tar -x -C "$2/archive"
  find "$2/archive" -name layer.tar -exec tar -x -C "$2/root" -f {} \; 2>/dev/null
}
# loadable <root> <binary>: a dynamic binary's interpreter and every library it names are in the tree.
loadable() {
  local fs="$1" bin="$2" interp lib missing=""
  interp="$(readelf -l "$bin" 2>/dev/null | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')"
  [ -z "$interp" ] && return 0 # static
  [ -e "$fs$interp" ] || missing="$missing $interp"
  for lib in $(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    [ -n "$(find "$fs/lib" "$fs/usr/lib" "$fs/lib64" -name "$lib" 2>/dev/null | head -1)" ] || missing="$missing $lib"
  done
  [ -z "$missing" ] || { echo "${bin#"$fs"} misses$missing"; return 1; }
}
check_arch() { # check_arch <image> <expected machine> <other machine> <image architecture>
  if ! podman image exists "$1"; then
    fail "$1 is not built"
    return
  fi
  local out="$dir/fs-${1//[:\/]/-}" machines binaries bin problems=""
  unpack "$1" "$out"
  binaries="$(find "$out/root" -type f \( -name node -o -name workerd -o -name esbuild -o -name svc-caddy \
    -o -name busybox -o -name cell-front \))"
  machines="$(for bin in $binaries; do file -b "$bin"; done | sed 's/, \(Go \)\?BuildID.*//' | sort | uniq -c)"
  if grep -q "$2" <<<"$machines" && ! grep -q "$3" <<<"$machines"; then
    pass "$1: its $(wc -w <<<"$binaries") executables are $2"
  else
    fail "$1: expected only $2 executables:
$machines"
  fi
  if [[ "$1" == svc:* ]]; then
    local front="$out/root/opt/svc/runtime/bin/cell-front"
    [ -x "$front" ] && [[ "$(file -b "$front")" == *"statically linked"* ]] &&
      pass "$1: cell-front beside runtime/bin/cell, static, $(file -b "$front" | cut -d, -f2 | xargs)" ||
      fail "$1: no static executable at /opt/svc/runtime/bin/cell-front: $(file -b "$front" 2>&1)"
  fi
  for bin in $binaries; do problems="$problems$(loadable "$out/root" "$bin")"; done
  [ -z "$problems" ] && pass "$1: every dynamic executable finds its loader and libraries in the image" ||
    fail "$1: $problems"
  [ "$(podman image inspect "$1" --format '{{.Architecture}}')" = "$4" ] && pass "$1: image architecture $4" ||
    fail "$1: image architecture $(podman image inspect "$1" --format '{{.Architecture}}')"
  rm -rf "$out"
}
check_arch "svc:$tag" x86-64 aarch64 amd64
check_arch "svc-caddy:$tag" x86-64 aarch64 amd64
check_arch "svc:$tag-arm64" aarch64 x86-64 arm64
check_arch "svc-caddy:$tag-arm64" aarch64 x86-64 arm64
check_arch "svc-caddy:$tag-dns-arm64" aarch64 x86-64 arm64

if [ "$failures" -gt 0 ]; then
  echo "image-test: $failures check(s) failed"
  exit 1
fi
echo "image-test: all checks passed"
