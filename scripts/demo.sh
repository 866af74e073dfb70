#!/usr/bin/env bash
# `make demo`: a one-node fleet on the embedded local-directory bucket, the Caddy ingress
# (lean svc-caddy build) in front of it, and the example application served through it.
# Everything lives under .state/demo; Ctrl-C stops it all.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
state="$root/.state/demo"
bucket="file://$state/bucket"
api="127.0.0.1:${DEMO_API_PORT:-7311}"
http_port="${DEMO_HTTP_PORT:-8080}"
domain="svc.localhost"
mkdir -p "$state"

pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

wait_for() { # wait_for <what> <command...>: poll with a deadline, never a blind sleep
  local what="$1" deadline=$((SECONDS + 60))
  shift
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS > deadline)); then echo "demo: timed out waiting for $what" >&2; exit 1; fi
    sleep 0.2
  done
}

echo "demo: starting the node on $api (bucket $bucket)" >&2
bin/svc sail --endpoint "$bucket" --state-dir "$state/node" --listen "$api" \
  --platform-domains "$domain" --ingress-token "demo-ingress-token" >"$state/node.out" 2>"$state/node.log" &
pids+=($!)
wait_for "the node" bin/svc health --listen "$api"
cat "$state/node.out"

if [ ! -f "$state/operator.json" ]; then
  bin/svc operator keygen --endpoint "$bucket" --out "$state/operator.json" --register --role admin
fi

echo "demo: starting Caddy on http://127.0.0.1:$http_port" >&2
SVC_FLEET_ENDPOINT="http://$api" SVC_FLEET_TOKEN="demo-ingress-token" SVC_FLEET_HTTP_REDIRECT=off \
  SVC_FLEET_POLL_INTERVAL=1s SVC_ACCESS_LOG="$state/access.log" DEMO_HTTP_PORT="$http_port" \
  .tools/bin/svc-caddy run --config adapter/demo.Caddyfile --adapter caddyfile >"$state/caddy.log" 2>&1 &
pids+=($!)

echo "demo: deploying examples/hello" >&2
bin/svc deploy examples/hello --node "http://$api" --key "$state/operator.json"

url="http://hello.$domain:$http_port/"
# The body, not just a success status: a host Caddy does not route yet answers the 404 page.
serves_hello() { curl -fsS --resolve "hello.$domain:$http_port:127.0.0.1" "$url" | grep -q '^Hello from svc'; }
started=$SECONDS
wait_for "the example through Caddy" serves_hello
echo "demo: first answer through Caddy $((SECONDS - started)) s after the deploy finished" >&2
echo "demo: $url answers through Caddy:" >&2
curl -sS --resolve "hello.$domain:$http_port:127.0.0.1" "$url"
echo
echo "demo: running; try: curl --resolve hello.$domain:$http_port:127.0.0.1 $url   (Ctrl-C stops)" >&2
wait
