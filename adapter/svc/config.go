package svc

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// Defaults of the fleet options (docs/adapter.md "Fleet options").
const (
	DefaultPrefer         = "self"
	DefaultPollInterval   = 5 * time.Second
	DefaultTimeout        = 10 * time.Second
	DefaultStorageTimeout = 30 * time.Second
)

// whereFleets is appended to refusals that concern fleet configuration.
const whereFleets = "fleets are configured once, in the global svc block (svc { fleet <name> { endpoint ... token ... } }) or with the SVC_FLEET_* environment variables"

// FleetConfig is one fleet as written in the configuration. Every value is a
// string so that it may hold a global placeholder such as {env.VAR}, resolved
// at provisioning and never written back.
type FleetConfig struct {
	// Name is a slug: lowercase alphanumerics separated by single hyphens.
	Name string `json:"name"`
	// Endpoint is the base URL of the fleet's node API (http or https); a
	// path prefix is kept.
	Endpoint string `json:"endpoint,omitempty"`
	// Token is the ingress bearer token, inline. Exactly one of Token and
	// TokenFile.
	Token string `json:"token,omitempty"`
	// TokenFile names a file holding the token, read once at provisioning.
	TokenFile string `json:"token_file,omitempty"`
	// Prefer is `self` (default), a node id sent verbatim, or `none`.
	Prefer string `json:"prefer,omitempty"`
	// PollInterval is the wait between routing fetches (default 5s).
	PollInterval string `json:"poll_interval,omitempty"`
	// Timeout bounds one routing fetch (default 10s).
	Timeout string `json:"timeout,omitempty"`
	// StorageTimeout bounds one storage request, not a lock acquisition
	// (default 30s).
	StorageTimeout string `json:"storage_timeout,omitempty"`
	// HTTPRedirect is `on` (default) or `off`; `off` serves this fleet's
	// hosts over plain HTTP too.
	HTTPRedirect string `json:"http_redirect,omitempty"`
}

// fleetSpec is a fleet's resolved, validated configuration.
type fleetSpec struct {
	Name           string
	Endpoint       string // without a trailing slash
	Token          string
	Prefer         string // "" sends no prefer
	PollInterval   time.Duration
	Timeout        time.Duration
	StorageTimeout time.Duration
	HTTPRedirect   bool
}

// pollKey identifies a poller: the fields that change what or how it polls.
// Changing http_redirect or storage_timeout keeps the poller and its document.
type pollKey struct {
	Name, Endpoint, Token, Prefer string
	PollInterval, Timeout         time.Duration
}

func (s fleetSpec) pollKey() pollKey {
	return pollKey{s.Name, s.Endpoint, s.Token, s.Prefer, s.PollInterval, s.Timeout}
}

var slugPattern = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// optionNamer names an option the way its source spells it, for refusals:
// `fleet "a": token` in the configuration, SVC_FLEET_A_TOKEN in the environment.
type optionNamer func(option string) string

// resolveFleet validates one fleet and reads its token. values holds the
// option values already placeholder-replaced (configuration) or literal
// (environment).
func resolveFleet(fc FleetConfig, name optionNamer) (fleetSpec, error) {
	spec := fleetSpec{Name: fc.Name}
	if !slugPattern.MatchString(fc.Name) {
		return spec, fmt.Errorf("fleet name %q is not a slug (lowercase letters and digits separated by single hyphens)", fc.Name)
	}
	endpoint, err := parseEndpoint(fc.Endpoint)
	if err != nil {
		return spec, fmt.Errorf("%s: %v", name("endpoint"), err)
	}
	spec.Endpoint = endpoint
	token, tokenFile := strings.TrimSpace(fc.Token), strings.TrimSpace(fc.TokenFile)
	switch {
	case fc.Token != "" && fc.TokenFile != "":
		return spec, fmt.Errorf("%s and %s are both set; set exactly one of them", name("token"), name("token_file"))
	case fc.Token == "" && fc.TokenFile == "":
		return spec, fmt.Errorf("neither %s nor %s is set; set exactly one of them", name("token"), name("token_file"))
	case fc.Token != "":
		if token == "" {
			return spec, fmt.Errorf("%s is empty", name("token"))
		}
	default:
		if tokenFile == "" {
			return spec, fmt.Errorf("%s is empty", name("token_file"))
		}
		data, err := os.ReadFile(tokenFile)
		if err != nil {
			return spec, fmt.Errorf("%s: cannot read the token: %v", name("token_file"), err)
		}
		token = strings.TrimSpace(string(data))
		if token == "" {
			return spec, fmt.Errorf("%s: the file %s holds no token (it is empty)", name("token_file"), tokenFile)
		}
	}
	if strings.ContainsFunc(token, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		option := "token_file"
		if fc.Token != "" {
			option = "token"
		}
		return spec, fmt.Errorf("%s: the token holds whitespace or control characters", name(option))
	}
	spec.Token = token
	switch p := strings.TrimSpace(fc.Prefer); p {
	case "":
		spec.Prefer = DefaultPrefer
	case "none":
		spec.Prefer = ""
	default:
		spec.Prefer = p
	}
	durations := []struct {
		option string
		value  string
		def    time.Duration
		into   *time.Duration
	}{
		{"poll_interval", fc.PollInterval, DefaultPollInterval, &spec.PollInterval},
		{"timeout", fc.Timeout, DefaultTimeout, &spec.Timeout},
		{"storage_timeout", fc.StorageTimeout, DefaultStorageTimeout, &spec.StorageTimeout},
	}
	for _, d := range durations {
		v := strings.TrimSpace(d.value)
		if v == "" {
			*d.into = d.def
			continue
		}
		parsed, err := caddy.ParseDuration(v)
		if err != nil {
			return spec, fmt.Errorf("%s: %q is not a duration (for example 5s, 500ms, 1m)", name(d.option), v)
		}
		if parsed <= 0 {
			return spec, fmt.Errorf("%s: %q is not positive; leave it unset for the default %s", name(d.option), v, d.def)
		}
		*d.into = parsed
	}
	redirect, err := parseOnOff(fc.HTTPRedirect, true)
	if err != nil {
		return spec, fmt.Errorf("%s: %v", name("http_redirect"), err)
	}
	spec.HTTPRedirect = redirect
	return spec, nil
}

func parseEndpoint(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return "", errors.New("is not set; give the base URL of the fleet's node API, for example http://127.0.0.1:7070")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("%q is not a URL: %v", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("%q: the scheme must be http or https", raw)
	}
	if u.Host == "" {
		return "", fmt.Errorf("%q has no host", raw)
	}
	if u.User != nil {
		return "", fmt.Errorf("%q carries credentials; give the token with token or token_file", raw)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("%q has a query or fragment; only a path prefix is allowed", raw)
	}
	return strings.TrimSuffix(u.String(), "/"), nil
}

// parseOnOff reads on/off, true/false, yes/no, 1/0; "" gives def.
func parseOnOff(v string, def bool) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "":
		return def, nil
	case "on", "true", "yes", "1":
		return true, nil
	case "off", "false", "no", "0":
		return false, nil
	}
	return false, fmt.Errorf("%q is not on or off", v)
}

// configNamer names options as the configuration spells them.
func configNamer(fleet string) optionNamer {
	return func(option string) string { return fmt.Sprintf("fleet %q: %s", fleet, option) }
}

// resolveConfigFleets resolves the fleets declared in the configuration, in
// declaration order, replacing global placeholders in every value.
func resolveConfigFleets(fleets []FleetConfig, repl *caddy.Replacer) ([]fleetSpec, error) {
	var specs []fleetSpec
	seen := map[string]bool{}
	for _, fc := range fleets {
		r := func(s string) string { return repl.ReplaceKnown(s, "") }
		resolved := FleetConfig{
			Name: fc.Name, Endpoint: r(fc.Endpoint), Token: r(fc.Token), TokenFile: r(fc.TokenFile),
			Prefer: r(fc.Prefer), PollInterval: r(fc.PollInterval), Timeout: r(fc.Timeout),
			StorageTimeout: r(fc.StorageTimeout), HTTPRedirect: r(fc.HTTPRedirect),
		}
		// A placeholder that resolved to nothing is still "set" for the
		// exactly-one rule: the operator wrote it, and an empty token must
		// be refused as empty, not as missing.
		if fc.Token != "" && resolved.Token == "" {
			resolved.Token = " "
		}
		if fc.TokenFile != "" && resolved.TokenFile == "" {
			resolved.TokenFile = " "
		}
		if seen[fc.Name] {
			return nil, fmt.Errorf("fleet %q is declared twice", fc.Name)
		}
		seen[fc.Name] = true
		spec, err := resolveFleet(resolved, configNamer(fc.Name))
		if err != nil {
			return nil, err
		}
		specs = append(specs, spec)
	}
	return specs, nil
}
