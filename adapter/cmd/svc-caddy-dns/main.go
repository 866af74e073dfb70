// Command svc-caddy-dns is svc-caddy with DNS provider modules compiled in,
// for managed wildcard certificates solved by DNS challenge.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddy-dns/cloudflare"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/svc-dev/svc/adapter/svc"
)

func main() {
	caddycmd.Main()
}
