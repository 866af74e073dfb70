package svc

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// The environment form of the svc app (docs/adapter.md "Environment"),
// read only when the configuration declares no fleet (and, separately, no
// DNS provider). Parsing takes the environment as a list of KEY=VALUE
// strings so that it is tested without touching the process environment.

// fleetEnvFields maps each SVC_FLEET_ suffix to its fleet option, longest
// suffixes first so that _STORAGE_TIMEOUT is never read as _TIMEOUT.
var fleetEnvFields = []struct{ suffix, option string }{
	{"STORAGE_TIMEOUT", "storage_timeout"},
	{"POLL_INTERVAL", "poll_interval"},
	{"HTTP_REDIRECT", "http_redirect"},
	{"TOKEN_FILE", "token_file"},
	{"ENDPOINT", "endpoint"},
	{"TIMEOUT", "timeout"},
	{"PREFER", "prefer"},
	{"TOKEN", "token"},
}

const (
	fleetEnvPrefix = "SVC_FLEET_"
	dnsEnvPrefix   = "SVC_DNS_"
	acmeEnvPrefix  = "SVC_ACME_"
	defaultFleet   = "default"
)

// environ is a parsed environment: variables by name.
type environ map[string]string

func parseEnviron(kv []string) environ {
	env := environ{}
	for _, e := range kv {
		if k, v, ok := strings.Cut(e, "="); ok {
			env[k] = v
		}
	}
	return env
}

// withPrefix lists the variable names starting with prefix, sorted.
func (env environ) withPrefix(prefix string) []string {
	var names []string
	for k := range env {
		if strings.HasPrefix(k, prefix) {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	return names
}

func knownFleetVariables() string {
	var single, named []string
	for _, f := range fleetEnvFields {
		single = append(single, fleetEnvPrefix+f.suffix)
		named = append(named, fleetEnvPrefix+"<NAME>_"+f.suffix)
	}
	sort.Strings(single)
	sort.Strings(named)
	return strings.Join(append(single, named...), ", ")
}

// envName turns <NAME> ([A-Z0-9_]+) into a fleet or provider name.
func envName(name string) string {
	return strings.ReplaceAll(strings.ToLower(name), "_", "-")
}

func setOption(fc *FleetConfig, option, value string) {
	switch option {
	case "endpoint":
		fc.Endpoint = value
	case "token":
		fc.Token = value
	case "token_file":
		fc.TokenFile = value
	case "prefer":
		fc.Prefer = value
	case "poll_interval":
		fc.PollInterval = value
	case "timeout":
		fc.Timeout = value
	case "storage_timeout":
		fc.StorageTimeout = value
	case "http_redirect":
		fc.HTTPRedirect = value
	}
}

// fleetsFromEnv reads SVC_FLEET_* into fleet specs: the single fleet
// `default`, or named fleets in alphabetical order of name. It returns no
// fleet and no error when no SVC_FLEET_* variable is set.
func fleetsFromEnv(env environ) ([]fleetSpec, error) {
	names := env.withPrefix(fleetEnvPrefix)
	type fleetVars struct {
		config FleetConfig
		prefix string // SVC_FLEET_ or SVC_FLEET_<NAME>_
	}
	fleets := map[string]*fleetVars{}
	var singleVar, namedVar string
	for _, v := range names {
		rest := strings.TrimPrefix(v, fleetEnvPrefix)
		var fleetName, envPrefix, option string
		for _, f := range fleetEnvFields {
			if rest == f.suffix {
				fleetName, envPrefix, option = defaultFleet, fleetEnvPrefix, f.option
				if singleVar == "" {
					singleVar = v
				}
				break
			}
			if n, ok := strings.CutSuffix(rest, "_"+f.suffix); ok && n != "" {
				if strings.Trim(n, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") != "" {
					return nil, fmt.Errorf("%s: the fleet name %q is not [A-Z0-9_]+", v, n)
				}
				fleetName, envPrefix, option = envName(n), fleetEnvPrefix+n+"_", f.option
				if namedVar == "" {
					namedVar = v
				}
				break
			}
		}
		if option == "" {
			return nil, fmt.Errorf("unknown environment variable %s; the known ones are %s", v, knownFleetVariables())
		}
		fv := fleets[fleetName]
		if fv == nil {
			fv = &fleetVars{config: FleetConfig{Name: fleetName}, prefix: envPrefix}
			fleets[fleetName] = fv
		}
		value := env[v]
		if value == "" && (option == "token" || option == "token_file") {
			value = " " // set but empty: refused as empty, not as missing
		}
		setOption(&fv.config, option, value)
	}
	if singleVar != "" && namedVar != "" {
		return nil, fmt.Errorf("%s and %s are both set: use either the single fleet form (SVC_FLEET_<OPTION>) or named fleets (SVC_FLEET_<NAME>_<OPTION>), not both", singleVar, namedVar)
	}
	order := make([]string, 0, len(fleets))
	for name := range fleets {
		order = append(order, name)
	}
	sort.Strings(order)
	var specs []fleetSpec
	for _, name := range order {
		fv := fleets[name]
		namer := func(option string) string {
			for _, f := range fleetEnvFields {
				if f.option == option {
					return fv.prefix + f.suffix
				}
			}
			return fv.prefix + strings.ToUpper(option)
		}
		if strings.TrimSpace(fv.config.Endpoint) == "" {
			return nil, fmt.Errorf("fleet %q has settings but no endpoint: set %s", name, namer("endpoint"))
		}
		spec, err := resolveFleet(fv.config, namer)
		if err != nil {
			return nil, err
		}
		specs = append(specs, spec)
	}
	return specs, nil
}

// dnsFromEnv reads SVC_DNS_* into provider declarations: the default provider
// (SVC_DNS_PROVIDER, SVC_DNS_ZONES, SVC_DNS_<FIELD>) and named providers
// (SVC_DNS_<NAME>_PROVIDER makes <NAME> a namespace for _ZONES and _<FIELD>).
// Values are literal strings; fields are lowercased.
func dnsFromEnv(env environ) ([]DNSConfig, error) {
	names := env.withPrefix(dnsEnvPrefix)
	if len(names) == 0 {
		return nil, nil
	}
	// Namespaces first: every SVC_DNS_<NAME>_PROVIDER.
	namespaces := map[string]bool{}
	for _, v := range names {
		rest := strings.TrimPrefix(v, dnsEnvPrefix)
		if n, ok := strings.CutSuffix(rest, "_PROVIDER"); ok && n != "" {
			if n == "ZONES" || strings.HasPrefix(n, "ZONES_") {
				return nil, fmt.Errorf("%s: ZONES is reserved (SVC_DNS_ZONES lists the default provider's zones) and cannot name a provider", v)
			}
			namespaces[n] = true
		}
	}
	_, hasDefault := env[dnsEnvPrefix+"PROVIDER"]
	if !hasDefault && len(namespaces) == 0 {
		return nil, fmt.Errorf("%s set but no DNS provider is declared: set SVC_DNS_PROVIDER or SVC_DNS_<NAME>_PROVIDER", strings.Join(names, ", "))
	}
	// Longest namespace first, so SVC_DNS_A_B_X goes to A_B before A.
	spaces := make([]string, 0, len(namespaces))
	for n := range namespaces {
		spaces = append(spaces, n)
	}
	sort.Slice(spaces, func(i, j int) bool {
		if len(spaces[i]) != len(spaces[j]) {
			return len(spaces[i]) > len(spaces[j])
		}
		return spaces[i] < spaces[j]
	})
	type provider struct {
		module string
		zones  []string
		fields map[string]string
		vars   []string
	}
	providers := map[string]*provider{} // "" is the default
	get := func(n string) *provider {
		if providers[n] == nil {
			providers[n] = &provider{fields: map[string]string{}}
		}
		return providers[n]
	}
	for _, v := range names {
		rest := strings.TrimPrefix(v, dnsEnvPrefix)
		space, field := "", rest
		for _, n := range spaces {
			if f, ok := strings.CutPrefix(rest, n+"_"); ok && f != "" {
				space, field = n, f
				break
			}
		}
		p := get(space)
		p.vars = append(p.vars, v)
		switch field {
		case "PROVIDER":
			p.module = strings.TrimSpace(env[v])
			if p.module == "" {
				return nil, fmt.Errorf("%s is empty; name a DNS provider module such as cloudflare", v)
			}
		case "ZONES":
			p.zones = splitList(env[v])
		default:
			if strings.Trim(field, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") != "" {
				return nil, fmt.Errorf("%s: %q is not [A-Z0-9_]+", v, field)
			}
			p.fields[strings.ToLower(field)] = env[v]
		}
	}
	if p := providers[""]; p != nil && p.module == "" {
		return nil, fmt.Errorf("%s set but SVC_DNS_PROVIDER is not: set it to the default provider's module name, or declare named providers with SVC_DNS_<NAME>_PROVIDER", strings.Join(p.vars, ", "))
	}
	order := make([]string, 0, len(providers))
	for n := range providers {
		order = append(order, n)
	}
	sort.Strings(order)
	var out []DNSConfig
	for _, n := range order {
		p := providers[n]
		varPrefix := dnsEnvPrefix
		if n != "" {
			varPrefix += n + "_"
		}
		fields := map[string]any{}
		for k, v := range p.fields {
			if k == "name" {
				return nil, fmt.Errorf("%sNAME: name is the provider's module key, not a field; use %sPROVIDER", varPrefix, varPrefix)
			}
			fields[k] = v
		}
		fields["name"] = p.module
		raw, err := json.Marshal(fields)
		if err != nil {
			return nil, err
		}
		out = append(out, DNSConfig{Name: envName(n), Zones: p.zones, ProviderRaw: raw, fromEnv: true})
	}
	return out, nil
}

// splitList splits a comma- or space-separated list, dropping empty items.
func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' })
}

// acmeFromEnv fills what the configuration left empty (docs/ingress.md: a value in the
// configuration wins; the environment fills only the gaps).
func acmeFromEnv(env environ, acme *acmeSettings) {
	fill := func(into *string, v string) {
		if strings.TrimSpace(*into) == "" {
			*into = strings.TrimSpace(env[v])
		}
	}
	fill(&acme.Delegation, acmeEnvPrefix+"DELEGATION")
	fill(&acme.Email, acmeEnvPrefix+"EMAIL")
	fill(&acme.CA, acmeEnvPrefix+"CA")
	fill(&acme.CARoot, acmeEnvPrefix+"CA_ROOT")
}
