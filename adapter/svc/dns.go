package svc

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// DNSConfig is one DNS provider of the svc app, used to solve DNS challenges
// for managed wildcard certificates. The provider with no Name is the default
// one; a named provider lists the zones it solves.
type DNSConfig struct {
	// Name is empty for the default provider, else a slug distinct from the
	// provider's module name.
	Name string `json:"name,omitempty"`
	// Zones are the zones this provider solves, matched as the longest suffix
	// of a wildcard base at a label boundary.
	Zones []string `json:"zones,omitempty"`
	// ProviderRaw is the provider module (namespace dns.providers) with its
	// own JSON fields; string values may hold global placeholders.
	ProviderRaw json.RawMessage `json:"provider,omitempty" caddy:"namespace=dns.providers inline_key=name"`

	fromEnv bool
}

// dnsProvider is a resolved, loaded DNS provider.
type dnsProvider struct {
	name     string // "" for the default provider
	module   string
	zones    []string
	raw      json.RawMessage
	provider any // a libdns provider (certmagic.DNSProvider); nil until loaded
}

// compiledProviders lists the DNS provider modules compiled into this binary.
func compiledProviders() string {
	var names []string
	for _, info := range caddy.GetModules("dns.providers") {
		names = append(names, info.ID.Name())
	}
	if len(names) == 0 {
		return "none (this is the lean build; the -dns flavour compiles providers in)"
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// describe names a provider in refusals.
func (c DNSConfig) describe(module string) string {
	switch {
	case c.fromEnv && c.Name == "":
		return "SVC_DNS_PROVIDER " + module
	case c.fromEnv:
		return fmt.Sprintf("SVC_DNS_%s_PROVIDER %s", strings.ToUpper(strings.ReplaceAll(c.Name, "-", "_")), module)
	case c.Name == "":
		return "dns " + module
	default:
		return fmt.Sprintf("dns %s %s", c.Name, module)
	}
}

// prepareDNS validates provider declarations and produces each provider's
// module JSON (placeholders replaced in configuration values, string values
// converted to the field types of the provider module). It does not load the
// modules.
func prepareDNS(configs []DNSConfig, repl *caddy.Replacer) ([]dnsProvider, error) {
	var out []dnsProvider
	names := map[string]bool{}
	hasDefault := false
	for _, c := range configs {
		var fields map[string]any
		if err := json.Unmarshal(c.ProviderRaw, &fields); err != nil || fields == nil {
			return nil, fmt.Errorf("dns provider %q: the provider must be a JSON object with its module name in \"name\"", c.Name)
		}
		module, _ := fields["name"].(string)
		if module == "" {
			return nil, fmt.Errorf("dns provider %q names no module", c.Name)
		}
		where := c.describe(module)
		id := "dns.providers." + module
		if _, err := caddy.GetModule(id); err != nil {
			return nil, fmt.Errorf("%s: the DNS provider %q is not compiled into this binary; compiled in: %s", where, module, compiledProviders())
		}
		if _, ok := fields["zones"]; ok {
			return nil, fmt.Errorf("%s: zones is reserved for the provider's zones and cannot be a provider field", where)
		}
		if !c.fromEnv && repl != nil {
			replaceStrings(fields, repl)
		}
		if err := coerceFields(id, fields); err != nil {
			return nil, fmt.Errorf("%s: %v", where, err)
		}
		p := dnsProvider{name: c.Name, module: module}
		for _, z := range c.Zones {
			if !c.fromEnv && repl != nil {
				z = repl.ReplaceKnown(z, "")
			}
			for _, zz := range splitList(z) {
				zz = strings.ToLower(strings.TrimSuffix(zz, "."))
				if zz == "" || strings.Contains(zz, "*") {
					return nil, fmt.Errorf("%s: %q is not a zone", where, z)
				}
				p.zones = append(p.zones, zz)
			}
		}
		switch {
		case c.Name == "":
			if hasDefault {
				return nil, fmt.Errorf("%s: a default DNS provider is already declared; name this one (dns <name> <module> { zones ... })", where)
			}
			hasDefault = true
		case !slugPattern.MatchString(c.Name):
			return nil, fmt.Errorf("%s: the provider name %q is not a slug", where, c.Name)
		case c.Name == module:
			return nil, fmt.Errorf("%s: a named provider's name must differ from its module name", where)
		case c.Name == "zones":
			return nil, fmt.Errorf("%s: zones is reserved and cannot name a provider", where)
		case names[c.Name]:
			return nil, fmt.Errorf("%s: the provider name %q is declared twice", where, c.Name)
		case len(p.zones) == 0:
			return nil, fmt.Errorf("%s: a named provider needs zones (zones <zone...>)", where)
		}
		names[c.Name] = true
		delete(fields, "name") // the module key, not a field of the module
		raw, err := json.Marshal(fields)
		if err != nil {
			return nil, err
		}
		p.raw = raw
		out = append(out, p)
	}
	return out, nil
}

// replaceStrings replaces global placeholders in every string of a JSON value.
func replaceStrings(v map[string]any, repl *caddy.Replacer) {
	for k, x := range v {
		switch t := x.(type) {
		case string:
			if k != "name" {
				v[k] = repl.ReplaceKnown(t, "")
			}
		case map[string]any:
			replaceStrings(t, repl)
		case []any:
			for i, e := range t {
				if s, ok := e.(string); ok {
					t[i] = repl.ReplaceKnown(s, "")
				} else if m, ok := e.(map[string]any); ok {
					replaceStrings(m, repl)
				}
			}
		}
	}
}

// coerceFields checks every field against the provider module's JSON fields
// and converts string values (from the Caddyfile or the environment) to the
// field's type: booleans, numbers, durations, string lists.
func coerceFields(id string, fields map[string]any) error {
	info, err := caddy.GetModule(id)
	if err != nil {
		return err
	}
	t := reflect.TypeOf(info.New())
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	known := map[string]reflect.Type{}
	if t.Kind() == reflect.Struct {
		collectJSONFields(t, known)
	}
	for k, v := range fields {
		if k == "name" {
			continue
		}
		ft, ok := known[strings.ToLower(k)]
		if !ok {
			names := make([]string, 0, len(known))
			for n := range known {
				names = append(names, n)
			}
			sort.Strings(names)
			return fmt.Errorf("the provider has no field %q; its fields are %s", k, strings.Join(names, ", "))
		}
		s, isString := v.(string)
		if !isString {
			continue
		}
		converted, err := convertString(s, ft)
		if err != nil {
			return fmt.Errorf("field %s: %v", k, err)
		}
		fields[k] = converted
	}
	return nil
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	durationType    = reflect.TypeFor[time.Duration]()
)

func convertString(s string, t reflect.Type) (any, error) {
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) || t.Implements(jsonUnmarshaler) {
		return s, nil // the type reads its own string form (caddy.Duration, for one)
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == durationType {
		d, err := caddy.ParseDuration(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not a duration", s)
		}
		return int64(d), nil
	}
	switch t.Kind() {
	case reflect.Bool:
		b, err := parseOnOff(s, false)
		if err != nil || strings.TrimSpace(s) == "" {
			return nil, fmt.Errorf("%q is not a boolean", s)
		}
		return b, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not an integer", s)
		}
		return n, nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a non-negative integer", s)
		}
		return n, nil
	case reflect.Float32, reflect.Float64:
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", s)
		}
		return f, nil
	case reflect.Slice:
		if t.Elem().Kind() == reflect.String {
			items := splitList(s)
			out := make([]any, len(items))
			for i, it := range items {
				out[i] = it
			}
			return out, nil
		}
	}
	return s, nil
}

// collectJSONFields gathers the JSON keys (lowercased, as encoding/json
// matches them) of a struct, following embedded structs.
func collectJSONFields(t reflect.Type, into map[string]reflect.Type) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			et := f.Type
			for et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				collectJSONFields(et, into)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, exists := into[strings.ToLower(name)]; !exists {
			into[strings.ToLower(name)] = f.Type
		}
	}
}

// solver says how a wildcard base's DNS challenge is solved: by which
// provider, and at which name when the challenge is delegated.
type solver struct {
	provider *dnsProvider
	// overrideDomain is the delegation name the TXT record is written at;
	// empty when the record goes at the base itself.
	overrideDomain string
}

// chooseSolver picks the solver for a wildcard base (docs/adapter.md "Managed
// wildcard certificates"): the named provider whose zone is the longest suffix of the
// base at a label boundary; else the default provider; else, when zones are
// declared somewhere and a delegation name is set, the delegation (its record
// written by whichever provider the same rule picks for the delegation name).
// ok is false when nothing can solve the base.
func chooseSolver(base string, providers []dnsProvider, delegation string) (solver, bool) {
	if p := longestZone(base, providers); p != nil {
		return solver{provider: p}, true
	}
	var def *dnsProvider
	zonesDeclared := false
	for i := range providers {
		if providers[i].name == "" && def == nil {
			def = &providers[i]
		}
		if len(providers[i].zones) > 0 {
			zonesDeclared = true
		}
	}
	if def != nil {
		return solver{provider: def}, true
	}
	if zonesDeclared && delegation != "" {
		if p := longestZone(delegation, providers); p != nil {
			return solver{provider: p, overrideDomain: delegation}, true
		}
	}
	return solver{}, false
}

func longestZone(name string, providers []dnsProvider) *dnsProvider {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	var best *dnsProvider
	bestLen := -1
	for i := range providers {
		for _, z := range providers[i].zones {
			if (name == z || strings.HasSuffix(name, "."+z)) && len(z) > bestLen {
				best, bestLen = &providers[i], len(z)
			}
		}
	}
	return best
}
