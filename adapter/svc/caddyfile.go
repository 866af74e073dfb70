package svc

import (
	"encoding/json"
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
)

func init() {
	httpcaddyfile.RegisterGlobalOption("svc", parseGlobalOption)
}

// parseGlobalOption parses the global `svc` block into the svc app:
//
//	svc {
//	    fleet <name> {
//	        endpoint <url>
//	        token <token> | token_file <path>
//	        prefer self|<node>|none
//	        poll_interval <duration>
//	        timeout <duration>
//	        storage_timeout <duration>
//	        http_redirect on|off
//	    }
//	    dns <module> { <field> <value...> }
//	    dns <name> <module> { zones <zone...>; <field> <value...> }
//	    acme_delegation <fqdn>
//	    acme_email <email>
//	    acme_ca <url>
//	    acme_ca_root <pem_file>
//	}
//
// An empty block (or `svc` alone) reads everything from the environment.
func parseGlobalOption(d *caddyfile.Dispenser, existing any) (any, error) {
	if existing != nil {
		return nil, d.Err("the svc block is given twice; declare every fleet in one global svc block")
	}
	app := new(App)
	if err := app.UnmarshalCaddyfile(d); err != nil {
		return nil, err
	}
	return httpcaddyfile.App{Name: "svc", Value: caddyconfig.JSON(app, nil)}, nil
}

// UnmarshalCaddyfile reads the global svc block (see parseGlobalOption).
func (a *App) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // svc
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "fleet":
			fc, err := parseFleetBlock(d)
			if err != nil {
				return err
			}
			for _, existing := range a.Fleets {
				if existing.Name == fc.Name {
					return d.Errf("fleet %q is declared twice", fc.Name)
				}
			}
			a.Fleets = append(a.Fleets, fc)
		case "dns":
			dc, err := parseDNSBlock(d)
			if err != nil {
				return err
			}
			a.DNS = append(a.DNS, dc)
		case "acme_delegation", "acme_email", "acme_ca", "acme_ca_root":
			option := d.Val()
			var value string
			if !d.Args(&value) || d.NextArg() {
				return d.Errf("%s takes exactly one value", option)
			}
			switch option {
			case "acme_delegation":
				a.ACMEDelegation = value
			case "acme_email":
				a.ACMEEmail = value
			case "acme_ca_root":
				a.ACMECARoot = value
			default:
				a.ACMECA = value
			}
		default:
			return d.Errf("unknown svc option %q; the options are fleet, dns, acme_delegation, acme_email, acme_ca, acme_ca_root", d.Val())
		}
	}
	return nil
}

func parseFleetBlock(d *caddyfile.Dispenser) (FleetConfig, error) {
	var fc FleetConfig
	if !d.Args(&fc.Name) {
		return fc, d.Err("fleet needs a name: fleet <name> { endpoint <url> token <token> }")
	}
	if d.NextArg() {
		return fc, d.Errf("fleet %s: unexpected %q after the name; options go in the block", fc.Name, d.Val())
	}
	if !slugPattern.MatchString(fc.Name) {
		return fc, d.Errf("fleet name %q is not a slug (lowercase letters and digits separated by single hyphens)", fc.Name)
	}
	seen := map[string]bool{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		option := d.Val()
		var value string
		if !d.Args(&value) || d.NextArg() {
			return fc, d.Errf("fleet %s: %s takes exactly one value", fc.Name, option)
		}
		if seen[option] {
			return fc, d.Errf("fleet %s: %s is given twice", fc.Name, option)
		}
		seen[option] = true
		switch option {
		case "endpoint", "token", "token_file", "prefer", "poll_interval", "timeout", "storage_timeout", "http_redirect":
			setOption(&fc, option, value)
		default:
			return fc, d.Errf("fleet %s: unknown option %q; the options are endpoint, token, token_file, prefer, poll_interval, timeout, storage_timeout, http_redirect", fc.Name, option)
		}
	}
	return fc, nil
}

func parseDNSBlock(d *caddyfile.Dispenser) (DNSConfig, error) {
	args := d.RemainingArgs()
	var dc DNSConfig
	var module string
	switch len(args) {
	case 1:
		module = args[0]
	case 2:
		dc.Name, module = args[0], args[1]
	default:
		return dc, d.Err("dns takes a module (default provider) or a name and a module: dns <module> {...} or dns <name> <module> { zones <zone...> ... }")
	}
	fields := map[string]any{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		field := d.Val()
		values := d.RemainingArgs()
		for _, v := range values {
			if v == "{" {
				return dc, d.Errf("dns %s: %s: nested blocks are not supported; give the field's JSON in the JSON configuration", module, field)
			}
		}
		if len(values) == 0 {
			return dc, d.Errf("dns %s: %s needs a value", module, field)
		}
		if field == "zones" {
			dc.Zones = append(dc.Zones, values...)
			continue
		}
		if field == "name" {
			return dc, d.Errf("dns %s: name is the provider's module key, not a field", module)
		}
		if _, dup := fields[field]; dup {
			return dc, d.Errf("dns %s: %s is given twice", module, field)
		}
		if len(values) == 1 {
			fields[field] = values[0]
		} else {
			fields[field] = strings.Join(values, ",")
		}
	}
	fields["name"] = module
	raw, err := json.Marshal(fields)
	if err != nil {
		return dc, err
	}
	dc.ProviderRaw = raw
	return dc, nil
}

// Interface guard
var _ caddyfile.Unmarshaler = (*App)(nil)
