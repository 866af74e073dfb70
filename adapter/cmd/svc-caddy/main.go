// Command svc-caddy is Caddy with its standard modules and the svc adapter
// modules (the lean flavour: no DNS provider is compiled in).
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/svc-dev/svc/adapter/svc"
)

func main() {
	caddycmd.Main()
}
