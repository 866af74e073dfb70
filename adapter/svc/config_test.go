package svc

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/standard"
	"github.com/libdns/libdns"
)

// testDNSProvider is a DNS provider module compiled into the test binary
// only, to check field conversion and selection without a real provider.
type testDNSProvider struct {
	APIToken  string         `json:"api_token,omitempty"`
	TTL       int            `json:"ttl,omitempty"`
	Proxied   bool           `json:"proxied,omitempty"`
	Resolvers []string       `json:"resolvers,omitempty"`
	Wait      caddy.Duration `json:"wait,omitempty"`
	Backoff   time.Duration  `json:"backoff,omitempty"`
	testDNSRegion
}

type testDNSRegion struct {
	Region string `json:"region,omitempty"`
}

func (testDNSProvider) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "dns.providers.svctest", New: func() caddy.Module { return new(testDNSProvider) }}
}

func init() { caddy.RegisterModule(testDNSProvider{}) }

// AppendRecords makes the test provider a certmagic.DNSProvider; it is never
// asked to solve anything in tests.
func (testDNSProvider) AppendRecords(context.Context, string, []libdns.Record) ([]libdns.Record, error) {
	return nil, errors.New("test provider")
}

// DeleteRecords makes the test provider a certmagic.DNSProvider.
func (testDNSProvider) DeleteRecords(context.Context, string, []libdns.Record) ([]libdns.Record, error) {
	return nil, errors.New("test provider")
}

// resolveEnv resolves an app with no configured fleet against an environment.
func resolveEnv(t *testing.T, a *App, env ...string) error {
	t.Helper()
	a.environ = env
	return a.resolve()
}

func mustRefuse(t *testing.T, err error, mentions ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want a refusal mentioning %v", mentions)
	}
	for _, m := range mentions {
		if !strings.Contains(err.Error(), m) {
			t.Errorf("refusal %q does not mention %q", err, m)
		}
	}
}

func TestEnvSingleFleet(t *testing.T) {
	a := &App{}
	if err := resolveEnv(t, a, "SVC_FLEET_ENDPOINT=http://127.0.0.1:7070/", "SVC_FLEET_TOKEN= secret \n", "PATH=/bin"); err != nil {
		t.Fatal(err)
	}
	want := fleetSpec{Name: "default", Endpoint: "http://127.0.0.1:7070", Token: "secret", Prefer: "self",
		PollInterval: 5 * time.Second, Timeout: 10 * time.Second, StorageTimeout: 30 * time.Second, HTTPRedirect: true}
	if len(a.specs) != 1 || a.specs[0] != want {
		t.Fatalf("got %+v, want %+v", a.specs, want)
	}
}

func TestEnvNamedFleetsAlphabetical(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("  from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := &App{}
	err := resolveEnv(t, a,
		"SVC_FLEET_ZED_ENDPOINT=https://zed.internal/api", "SVC_FLEET_ZED_TOKEN_FILE="+tokenFile,
		"SVC_FLEET_EU_WEST_ENDPOINT=http://10.0.0.1:7070", "SVC_FLEET_EU_WEST_TOKEN=t",
		"SVC_FLEET_EU_WEST_PREFER=none", "SVC_FLEET_EU_WEST_POLL_INTERVAL=1s", "SVC_FLEET_EU_WEST_TIMEOUT=2s",
		"SVC_FLEET_EU_WEST_STORAGE_TIMEOUT=3s", "SVC_FLEET_EU_WEST_HTTP_REDIRECT=no")
	if err != nil {
		t.Fatal(err)
	}
	if len(a.specs) != 2 || a.specs[0].Name != "eu-west" || a.specs[1].Name != "zed" {
		t.Fatalf("fleets %+v, want eu-west then zed", a.specs)
	}
	eu, zed := a.specs[0], a.specs[1]
	if eu.Prefer != "" || eu.PollInterval != time.Second || eu.Timeout != 2*time.Second || eu.StorageTimeout != 3*time.Second || eu.HTTPRedirect {
		t.Errorf("eu-west %+v", eu)
	}
	if zed.Token != "from-file" || zed.Endpoint != "https://zed.internal/api" {
		t.Errorf("zed %+v", zed)
	}
}

func TestEnvRefusals(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ep := "SVC_FLEET_ENDPOINT=http://127.0.0.1:7070"
	cases := []struct {
		name     string
		env      []string
		mentions []string
	}{
		{"both token forms", []string{ep, "SVC_FLEET_TOKEN=t", "SVC_FLEET_TOKEN_FILE=/x"}, []string{"SVC_FLEET_TOKEN and SVC_FLEET_TOKEN_FILE"}},
		{"neither token form", []string{ep}, []string{"SVC_FLEET_TOKEN", "SVC_FLEET_TOKEN_FILE"}},
		{"named neither", []string{"SVC_FLEET_A_ENDPOINT=http://x"}, []string{"SVC_FLEET_A_TOKEN", "SVC_FLEET_A_TOKEN_FILE"}},
		{"empty token file", []string{ep, "SVC_FLEET_TOKEN_FILE=" + empty}, []string{"SVC_FLEET_TOKEN_FILE", "empty"}},
		{"missing token file", []string{ep, "SVC_FLEET_TOKEN_FILE=" + filepath.Join(dir, "nope")}, []string{"SVC_FLEET_TOKEN_FILE", "cannot read"}},
		{"empty token", []string{ep, "SVC_FLEET_TOKEN="}, []string{"SVC_FLEET_TOKEN is empty"}},
		{"unknown variable", []string{ep, "SVC_FLEET_TOKEN=t", "SVC_FLEET_TOKN=t"}, []string{"SVC_FLEET_TOKN", "SVC_FLEET_ENDPOINT", "SVC_FLEET_TOKEN_FILE", "SVC_FLEET_<NAME>_POLL_INTERVAL"}},
		{"single and named mixed", []string{ep, "SVC_FLEET_TOKEN=t", "SVC_FLEET_A_TOKEN=t"}, []string{"SVC_FLEET_A_TOKEN", "SVC_FLEET_"}},
		{"zero poll interval", []string{ep, "SVC_FLEET_TOKEN=t", "SVC_FLEET_POLL_INTERVAL=0s"}, []string{"SVC_FLEET_POLL_INTERVAL", "not positive"}},
		{"zero timeout", []string{ep, "SVC_FLEET_TOKEN=t", "SVC_FLEET_TIMEOUT=0s"}, []string{"SVC_FLEET_TIMEOUT", "not positive"}},
		{"zero storage timeout", []string{ep, "SVC_FLEET_TOKEN=t", "SVC_FLEET_STORAGE_TIMEOUT=0"}, []string{"SVC_FLEET_STORAGE_TIMEOUT"}},
		{"negative timeout", []string{ep, "SVC_FLEET_TOKEN=t", "SVC_FLEET_TIMEOUT=-1s"}, []string{"SVC_FLEET_TIMEOUT"}},
		{"bad duration", []string{ep, "SVC_FLEET_TOKEN=t", "SVC_FLEET_TIMEOUT=soon"}, []string{"SVC_FLEET_TIMEOUT", "not a duration"}},
		{"bad redirect", []string{ep, "SVC_FLEET_TOKEN=t", "SVC_FLEET_HTTP_REDIRECT=maybe"}, []string{"SVC_FLEET_HTTP_REDIRECT"}},
		{"token without endpoint", []string{"SVC_FLEET_TOKEN=t"}, []string{"SVC_FLEET_ENDPOINT"}},
		{"bad scheme", []string{"SVC_FLEET_ENDPOINT=ftp://x", "SVC_FLEET_TOKEN=t"}, []string{"SVC_FLEET_ENDPOINT", "http or https"}},
		{"no fleet at all", []string{"PATH=/bin"}, []string{"no fleet", "global svc block", "SVC_FLEET_"}},
		{"bad fleet name", []string{"SVC_FLEET_A__B_ENDPOINT=http://x", "SVC_FLEET_A__B_TOKEN=t"}, []string{"a--b", "slug"}},
		{"dns without provider", []string{ep, "SVC_FLEET_TOKEN=t", "SVC_DNS_API_TOKEN=x", "SVC_DNS_ZONES=a.example"}, []string{"SVC_DNS_API_TOKEN", "SVC_DNS_ZONES", "SVC_DNS_PROVIDER"}},
		{"dns zones reserved", []string{ep, "SVC_FLEET_TOKEN=t", "SVC_DNS_ZONES_PROVIDER=svctest"}, []string{"ZONES is reserved"}},
		{"dns provider not compiled in", []string{ep, "SVC_FLEET_TOKEN=t", "SVC_DNS_PROVIDER=nosuch"}, []string{"nosuch", "not compiled", "svctest"}},
		{"dns named provider without zones", []string{ep, "SVC_FLEET_TOKEN=t", "SVC_DNS_CORP_PROVIDER=svctest"}, []string{"SVC_DNS_CORP_PROVIDER", "zones"}},
		{"dns unknown field", []string{ep, "SVC_DNS_PROVIDER=svctest", "SVC_FLEET_TOKEN=t", "SVC_DNS_API_TOKN=x"}, []string{"api_tokn", "api_token"}},
		{"dns bad field value", []string{ep, "SVC_DNS_PROVIDER=svctest", "SVC_FLEET_TOKEN=t", "SVC_DNS_TTL=soon"}, []string{"ttl", "integer"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mustRefuse(t, resolveEnv(t, &App{}, c.env...), c.mentions...)
		})
	}
}

func TestEnvRedirectSpellings(t *testing.T) {
	for value, want := range map[string]bool{"on": true, "true": true, "yes": true, "1": true, "off": false, "false": false, "no": false, "0": false, "OFF": false} {
		a := &App{}
		if err := resolveEnv(t, a, "SVC_FLEET_ENDPOINT=http://x", "SVC_FLEET_TOKEN=t", "SVC_FLEET_HTTP_REDIRECT="+value); err != nil {
			t.Fatalf("%s: %v", value, err)
		}
		if a.specs[0].HTTPRedirect != want {
			t.Errorf("%s: %v", value, a.specs[0].HTTPRedirect)
		}
	}
}

func TestEnvDNSProviders(t *testing.T) {
	a := &App{}
	err := resolveEnv(t, a, "SVC_FLEET_ENDPOINT=http://x", "SVC_FLEET_TOKEN=t",
		"SVC_DNS_PROVIDER=svctest", "SVC_DNS_API_TOKEN=default-token", "SVC_DNS_TTL=120", "SVC_DNS_PROXIED=true",
		"SVC_DNS_RESOLVERS=1.1.1.1,8.8.8.8", "SVC_DNS_WAIT=2m", "SVC_DNS_BACKOFF=3s", "SVC_DNS_REGION=eu",
		"SVC_DNS_CORP_PROVIDER=svctest", "SVC_DNS_CORP_ZONES=corp.example, Other.Example.", "SVC_DNS_CORP_API_TOKEN=corp-token",
		"SVC_ACME_DELEGATION=_acme.delegate.example.", "SVC_ACME_EMAIL=ops@example.com", "SVC_ACME_CA_ROOT=/etc/ssl/private-ca.pem")
	if err != nil {
		t.Fatal(err)
	}
	if len(a.providers) != 2 {
		t.Fatalf("providers %+v", a.providers)
	}
	def, corp := a.providers[0], a.providers[1]
	var fields map[string]any
	_ = json.Unmarshal(def.raw, &fields)
	want := map[string]any{"api_token": "default-token", "ttl": 120.0, "proxied": true, "resolvers": []any{"1.1.1.1", "8.8.8.8"},
		"wait": "2m", "backoff": float64(3 * time.Second), "region": "eu"}
	if def.name != "" || def.module != "svctest" || !reflect.DeepEqual(fields, want) {
		t.Errorf("default provider %s %s %v, want %v", def.name, def.module, fields, want)
	}
	var typed testDNSProvider
	if err := caddy.StrictUnmarshalJSON(def.raw, &typed); err != nil {
		t.Errorf("the provider JSON does not load strictly: %v", err)
	}
	if corp.name != "corp" || strings.Join(corp.zones, ",") != "corp.example,other.example" || !strings.Contains(string(corp.raw), "corp-token") {
		t.Errorf("corp provider %+v %s", corp, corp.raw)
	}
	if a.acme.Delegation != "_acme.delegate.example" || a.acme.Email != "ops@example.com" || a.acme.CA != "" || a.acme.CARoot != "/etc/ssl/private-ca.pem" {
		t.Errorf("acme %+v", a.acme)
	}
}

func TestConfigNeverMergedWithEnvironment(t *testing.T) {
	t.Setenv("SVC_TEST_TOKEN", "tok-from-env")
	a := &App{
		Fleets:    []FleetConfig{{Name: "cfg", Endpoint: "http://127.0.0.1:7070", Token: "{env.SVC_TEST_TOKEN}"}},
		ACMEEmail: "config@example.com",
	}
	// Environment fleets (even a malformed one) and DNS variables are not read
	// when the configuration declares fleets (DNS: when it declares providers).
	a.DNS = []DNSConfig{{ProviderRaw: json.RawMessage(`{"name":"svctest","api_token":"{env.SVC_TEST_TOKEN}"}`)}}
	err := resolveEnv(t, a, "SVC_FLEET_ENDPOINT=http://env", "SVC_FLEET_NONSENSE=1", "SVC_DNS_PROVIDER=nosuch",
		"SVC_ACME_EMAIL=env@example.com", "SVC_ACME_CA=https://ca.example/dir")
	if err != nil {
		t.Fatal(err)
	}
	if len(a.specs) != 1 || a.specs[0].Name != "cfg" || a.specs[0].Token != "tok-from-env" {
		t.Fatalf("specs %+v", a.specs)
	}
	if a.Fleets[0].Token != "{env.SVC_TEST_TOKEN}" || !strings.Contains(string(a.DNS[0].ProviderRaw), "{env.SVC_TEST_TOKEN}") {
		t.Fatal("a resolved placeholder was written back into the configuration")
	}
	if !strings.Contains(string(a.providers[0].raw), "tok-from-env") {
		t.Errorf("provider placeholder not resolved: %s", a.providers[0].raw)
	}
	if a.acme.Email != "config@example.com" || a.acme.CA != "https://ca.example/dir" {
		t.Errorf("acme %+v: the configuration wins, the environment fills gaps", a.acme)
	}
}

func TestConfigRefusals(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	_ = os.WriteFile(empty, nil, 0o600)
	base := FleetConfig{Name: "a", Endpoint: "http://127.0.0.1:7070", Token: "t"}
	with := func(f func(*FleetConfig)) []FleetConfig { c := base; f(&c); return []FleetConfig{c} }
	cases := []struct {
		name     string
		fleets   []FleetConfig
		mentions []string
	}{
		{"both", with(func(c *FleetConfig) { c.TokenFile = "/x" }), []string{`fleet "a": token and fleet "a": token_file`}},
		{"neither", with(func(c *FleetConfig) { c.Token = "" }), []string{"token", "token_file", "exactly one"}},
		{"empty placeholder token", with(func(c *FleetConfig) { c.Token = "{env.SVC_TEST_UNSET_VARIABLE}" }), []string{"token is empty"}},
		{"empty token file", with(func(c *FleetConfig) { c.Token = ""; c.TokenFile = empty }), []string{"token_file", "empty"}},
		{"zero duration", with(func(c *FleetConfig) { c.PollInterval = "0s" }), []string{"poll_interval", "not positive"}},
		{"bad endpoint", with(func(c *FleetConfig) { c.Endpoint = "127.0.0.1:7070" }), []string{"endpoint"}},
		{"endpoint with query", with(func(c *FleetConfig) { c.Endpoint = "http://x/?a=b" }), []string{"endpoint", "query"}},
		{"bad name", with(func(c *FleetConfig) { c.Name = "Bad_Name" }), []string{"slug"}},
		{"twice", []FleetConfig{base, base}, []string{"twice"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mustRefuse(t, resolveEnv(t, &App{Fleets: c.fleets}), c.mentions...)
		})
	}
}

func TestCaddyfileGlobalBlock(t *testing.T) {
	input := `svc {
		fleet main {
			endpoint http://127.0.0.1:7070
			token {env.SVC_TOKEN}
			prefer n2
			poll_interval 2s
			timeout 3s
			storage_timeout 4s
			http_redirect off
		}
		fleet backup {
			endpoint https://backup.internal/node
			token_file /run/secrets/token
		}
		dns svctest {
			api_token {env.DNS_TOKEN}
		}
		dns corp svctest {
			zones corp.example other.example
			ttl 60
		}
		acme_delegation _acme.delegate.example
		acme_email ops@example.com
		acme_ca https://acme.example/directory
		acme_ca_root /etc/ssl/private-ca.pem
	}`
	a := new(App)
	if err := a.UnmarshalCaddyfile(caddyfile.NewTestDispenser(input)); err != nil {
		t.Fatal(err)
	}
	want := &App{
		Fleets: []FleetConfig{
			{Name: "main", Endpoint: "http://127.0.0.1:7070", Token: "{env.SVC_TOKEN}", Prefer: "n2", PollInterval: "2s", Timeout: "3s", StorageTimeout: "4s", HTTPRedirect: "off"},
			{Name: "backup", Endpoint: "https://backup.internal/node", TokenFile: "/run/secrets/token"},
		},
		ACMEDelegation: "_acme.delegate.example", ACMEEmail: "ops@example.com", ACMECA: "https://acme.example/directory",
	}
	if !reflect.DeepEqual(a.Fleets, want.Fleets) || a.ACMEDelegation != want.ACMEDelegation || a.ACMEEmail != want.ACMEEmail || a.ACMECA != want.ACMECA || a.ACMECARoot != "/etc/ssl/private-ca.pem" {
		t.Fatalf("got %+v", a)
	}
	if len(a.DNS) != 2 || a.DNS[0].Name != "" || a.DNS[1].Name != "corp" || strings.Join(a.DNS[1].Zones, " ") != "corp.example other.example" {
		t.Fatalf("dns %+v", a.DNS)
	}
	var p0 map[string]any
	_ = json.Unmarshal(a.DNS[0].ProviderRaw, &p0)
	if p0["name"] != "svctest" || p0["api_token"] != "{env.DNS_TOKEN}" {
		t.Fatalf("default provider %s", a.DNS[0].ProviderRaw)
	}
	// An empty block reads the environment.
	empty := new(App)
	if err := empty.UnmarshalCaddyfile(caddyfile.NewTestDispenser("svc")); err != nil || len(empty.Fleets) != 0 {
		t.Fatalf("empty block: %v %+v", err, empty)
	}
}

func TestCaddyfileRefusals(t *testing.T) {
	cases := map[string]string{
		"svc {\n fleet {\n endpoint x\n }\n}":                   "needs a name",
		"svc {\n fleet Main {\n endpoint x\n }\n}":              "slug",
		"svc {\n fleet a {\n endpoint\n }\n}":                   "exactly one value",
		"svc {\n fleet a {\n endpoint x y\n }\n}":               "exactly one value",
		"svc {\n fleet a {\n endpoint x\n endpoint y\n }\n}":    "given twice",
		"svc {\n fleet a {\n endpoint x\n tokn y\n }\n}":        "unknown option",
		"svc {\n fleet a {\n endpoint x\n }\n fleet a {\n }\n}": "declared twice",
		"svc {\n fleets a\n}":                                   "unknown svc option",
		"svc {\n dns a b c\n}":                                  "dns takes",
		"svc {\n acme_email\n}":                                 "exactly one value",
		"svc extra":                                             "",
		"svc {\n dns svctest {\n name x\n }\n}":                 "module key",
	}
	for input, mention := range cases {
		err := new(App).UnmarshalCaddyfile(caddyfile.NewTestDispenser(input))
		if err == nil || !strings.Contains(err.Error(), mention) {
			t.Errorf("%q: %v, want a refusal mentioning %q", input, err, mention)
		}
	}
}

// adapt runs the Caddyfile adapter over a whole configuration.
func adapt(t *testing.T, body []byte) map[string]any {
	t.Helper()
	adapter := caddyconfig.GetAdapter("caddyfile")
	out, _, err := adapter.Adapt(body, map[string]any{"filename": "Caddyfile"})
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(out, &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestDefaultCaddyfileAdapts(t *testing.T) {
	for _, file := range []string{"Caddyfile", "demo.Caddyfile"} {
		body, err := os.ReadFile(filepath.Join("..", file))
		if err != nil {
			t.Fatal(err)
		}
		cfg := adapt(t, body)
		text, _ := json.Marshal(cfg)
		s := string(text)
		for _, want := range []string{`"svc":{}`, `"storage":{"module":"svc"}`, `"dynamic_upstreams":{"source":"svc"}`,
			`"policy":"first"`, `"max_fails":1`, `{http.vars.svc.route} in [\"unknown\", \"denied\"]`, `"status_code":404`} {
			if !strings.Contains(s, want) {
				t.Errorf("%s: the adapted configuration lacks %s", file, want)
			}
		}
		// The production file redirects plain HTTP for served hosts; the demo runs no HTTPS
		// and proxies every host, so an unserved one gets the 404 page, never a redirect.
		for _, redirect := range []string{`"svc_plain_http":{}`, `"status_code":308`} {
			if has := strings.Contains(s, redirect); has != (file == "Caddyfile") {
				t.Errorf("%s: %s present: %v", file, redirect, has)
			}
		}
		if file == "Caddyfile" && !strings.Contains(s, `"on_demand":{"permission":{"module":"svc"}}`) {
			t.Errorf("%s: no on-demand permission svc", file)
		}
	}
}

func TestGlobalOptionGivenTwice(t *testing.T) {
	adapter := caddyconfig.GetAdapter("caddyfile")
	_, _, err := adapter.Adapt([]byte("{\n svc\n svc\n}\n:80 {\n respond ok\n}\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("%v", err)
	}
}

func TestChooseSolver(t *testing.T) {
	def := dnsProvider{name: "", module: "svctest"}
	corp := dnsProvider{name: "corp", zones: []string{"corp.example"}}
	deep := dnsProvider{name: "deep", zones: []string{"eu.corp.example"}}
	dele := dnsProvider{name: "dele", zones: []string{"delegate.example"}}
	cases := []struct {
		base       string
		providers  []dnsProvider
		delegation string
		want       string // provider name, "(default)", "none", or name+"@"+override
	}{
		{"shop.corp.example", []dnsProvider{def, corp, deep}, "", "corp"},
		{"x.eu.corp.example", []dnsProvider{def, corp, deep}, "", "deep"},
		{"corp.example", []dnsProvider{def, corp, deep}, "", "corp"},
		{"notcorp.example", []dnsProvider{def, corp}, "", "(default)"},
		{"xcorp.example", []dnsProvider{corp}, "", "none"}, // label boundary
		{"shop.example", []dnsProvider{corp, dele}, "_acme.delegate.example", "dele@_acme.delegate.example"},
		{"shop.example", []dnsProvider{corp}, "", "none"},
		{"shop.example", []dnsProvider{def}, "", "(default)"}, // no zone anywhere: the default takes everything
	}
	for _, c := range cases {
		s, ok := chooseSolver(c.base, c.providers, c.delegation)
		got := "none"
		if ok {
			got = s.provider.name
			if got == "" {
				got = "(default)"
			}
			if s.overrideDomain != "" {
				got += "@" + s.overrideDomain
			}
		}
		if got != c.want {
			t.Errorf("%s: %s, want %s", c.base, got, c.want)
		}
	}
}

func TestValidateACME(t *testing.T) {
	dir := t.TempDir()
	ca := httptest.NewTLSServer(http.NotFoundHandler())
	ca.Close()
	rootPEM, notPEM := filepath.Join(dir, "root.pem"), filepath.Join(dir, "root.txt")
	_ = os.WriteFile(rootPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Certificate().Raw}), 0o644)
	_ = os.WriteFile(notPEM, []byte("not a certificate"), 0o644)
	for _, c := range []struct {
		acme acmeSettings
		ok   bool
	}{
		{acmeSettings{Email: "ops@example.com", CA: "https://acme.example/dir", Delegation: "_acme.delegate.example"}, true},
		{acmeSettings{}, true},
		{acmeSettings{Email: "ops"}, false},
		{acmeSettings{CA: "acme.example"}, false},
		{acmeSettings{Delegation: "*.example"}, false},
		{acmeSettings{CARoot: rootPEM}, true},
		{acmeSettings{CARoot: notPEM}, false},
		{acmeSettings{CARoot: filepath.Join(dir, "missing.pem")}, false},
	} {
		a := &App{acme: c.acme}
		if err := a.Validate(); (err == nil) != c.ok {
			t.Errorf("%+v: %v", c.acme, err)
		}
	}
}

func TestWildcardPolicies(t *testing.T) {
	raw := func(token string) json.RawMessage { return json.RawMessage(`{"api_token":"` + token + `"}`) }
	providers := []dnsProvider{
		{name: "", module: "svctest", raw: raw("default")},
		{name: "corp", module: "svctest", zones: []string{"corp.example"}, raw: raw("corp")},
	}
	acme := acmeSettings{Email: "ops@example.com", CA: "https://acme.example/dir", CARoot: "/etc/ssl/private-ca.pem"}
	policies, unsolved, err := wildcardPolicies([]string{"a.corp.example", "b.corp.example", "shop.example"}, providers, acme, nil)
	if err != nil || len(unsolved) != 0 || len(policies) != 2 {
		t.Fatalf("%+v %v %v", policies, unsolved, err)
	}
	if strings.Join(policies[0].subjects, " ") != "*.a.corp.example *.b.corp.example" || !strings.Contains(string(policies[0].issuer), `"api_token":"corp"`) {
		t.Errorf("corp policy %v %s", policies[0].subjects, policies[0].issuer)
	}
	var issuer map[string]any
	_ = json.Unmarshal(policies[1].issuer, &issuer)
	want := map[string]any{"module": "acme", "ca": "https://acme.example/dir", "email": "ops@example.com", "trusted_roots_pem_files": []any{"/etc/ssl/private-ca.pem"}, "challenges": map[string]any{
		"dns":      map[string]any{"provider": map[string]any{"name": "svctest", "api_token": "default"}},
		"http":     map[string]any{"disabled": true},
		"tls-alpn": map[string]any{"disabled": true},
	}}
	if !reflect.DeepEqual(issuer, want) || policies[1].subjects[0] != "*.shop.example" {
		t.Errorf("default policy %v %v", policies[1].subjects, issuer)
	}
	// Zones declared, no default: the delegation solves the rest, its record
	// written by the provider of the delegation name's zone.
	deleg := acmeSettings{Delegation: "_acme.corp.example"}
	policies, unsolved, _ = wildcardPolicies([]string{"shop.example"}, providers[1:], deleg, []string{"127.0.0.1:5353"})
	if len(unsolved) != 0 || len(policies) != 1 || !strings.Contains(string(policies[0].issuer), `"override_domain":"_acme.corp.example"`) {
		t.Errorf("delegation: %+v %v", policies, unsolved)
	}
	// The TLS app's resolvers (tls_resolvers) are the DNS challenge's (without
	// them none is set: the default policy above).
	if !strings.Contains(string(policies[0].issuer), `"resolvers":["127.0.0.1:5353"]`) {
		t.Errorf("resolvers: %s", policies[0].issuer)
	}
	_, unsolved, _ = wildcardPolicies([]string{"shop.example"}, providers[1:], acmeSettings{}, nil)
	if strings.Join(unsolved, ",") != "shop.example" {
		t.Errorf("unsolved %v", unsolved)
	}
}
