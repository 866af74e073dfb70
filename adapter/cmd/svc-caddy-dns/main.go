// Command svc-caddy-dns is svc-caddy with DNS provider modules compiled in,
// for managed wildcard certificates solved by DNS challenge. The providers
// and the reasons some are left out: docs/adapter.md "DNS providers".
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddy-dns/acmedns"
	_ "github.com/caddy-dns/cloudflare"
	_ "github.com/caddy-dns/desec"
	_ "github.com/caddy-dns/digitalocean"
	_ "github.com/caddy-dns/duckdns"
	_ "github.com/caddy-dns/hetzner"
	_ "github.com/caddy-dns/porkbun"
	_ "github.com/caddy-dns/rfc2136"
	_ "github.com/caddy-dns/route53"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/svc-dev/svc/adapter/svc"
)

func main() {
	caddycmd.Main()
}
