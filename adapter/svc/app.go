// Package svc holds the Caddy modules of the svc ingress adapter (docs/adapter.md
// "Modules"): the `svc` app holding fleet
// configuration, TLS storage over the node's storage protocol
// (caddy.storage.svc), dynamic upstreams (http.reverse_proxy.upstreams.svc),
// on-demand TLS permission (tls.permission.svc) and a plain-HTTP matcher
// (http.matchers.svc_plain_http). The app is configured once; the other four
// take no options and read it.
package svc

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddytls"
	"go.uber.org/zap"

	"github.com/svc-dev/svc/adapter/routing"
)

func init() {
	caddy.RegisterModule(App{})
}

// App is the `svc` app: the fleets this ingress fronts, the DNS providers
// for managed wildcard certificates and the ACME settings. It is configured
// in exactly one of two ways: in the configuration, or, when the
// configuration declares no fleet, from the SVC_FLEET_* environment (the same
// holds for DNS providers on their own). The two are never merged.
type App struct {
	// Fleets are the fleets, in declaration order (which decides hosts two
	// fleets publish in the same refresh).
	Fleets []FleetConfig `json:"fleets,omitempty"`
	// DNS are the DNS providers: at most one default (no name) and any
	// number of named providers with zones.
	DNS []DNSConfig `json:"dns,omitempty"`
	// ACMEDelegation is the fixed name a delegated DNS challenge record is
	// written at.
	ACMEDelegation string `json:"acme_delegation,omitempty"`
	// ACMEEmail is the contact address registered with the ACME CA.
	ACMEEmail string `json:"acme_email,omitempty"`
	// ACMECA is the ACME directory URL; empty uses the proxy's default.
	ACMECA string `json:"acme_ca,omitempty"`
	// ACMECARoot is a PEM file of the root certificates to trust for the
	// ACME CA's own HTTPS (a private CA); empty trusts the system's roots.
	ACMECARoot string `json:"acme_ca_root,omitempty"`

	// environ is the environment to read; nil reads the process's.
	environ []string

	logger    *zap.Logger
	specs     []fleetSpec
	fleets    []*fleet
	byName    map[string]*fleet
	providers []dnsProvider
	acme      acmeSettings

	tls           *caddytls.TLS   // set when wildcard policies were registered
	wildcardNames []string        // `*.<base>` names managed through the TLS app
	wildcardBases map[string]bool // bases seen (guarded by live.mu after provisioning)

	live *live
}

// live is the state an app updates while it runs.
type live struct {
	mu        sync.Mutex // serializes rebuilds
	active    bool       // rebuilds on notification: after the first table, until Cleanup
	released  bool       // Cleanup ran
	table     atomic.Pointer[routing.Table]
	conflicts map[string]string // key -> "owner<-others", as last logged
}

// acmeSettings are the resolved ACME options.
type acmeSettings struct {
	Delegation, Email, CA, CARoot string
}

// fleet is one fleet of a provisioned app: its configuration, its shared
// poller and this app's subscription to it, and its storage client.
type fleet struct {
	spec    fleetSpec
	key     pollKey
	poller  *poller
	sub     *subscription
	storage *storageClient
}

// CaddyModule returns the Caddy module information.
func (App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "svc",
		New: func() caddy.Module { return new(App) },
	}
}

// pollerLogger is the logger of new pollers. Pollers outlive configurations,
// so they log through Caddy's default logger rather than a module's.
var pollerLogger = func() *zap.Logger { return caddy.Log().Named("svc.poller") }

// ownerMemory carries the last table's key owners across reloads, so that the
// first publisher of a host keeps it when the configuration is reloaded.
var ownerMemory atomic.Pointer[map[string]string]

// transport is shared by every poller and storage client: endpoints are
// loopback or private paths, so no proxy from the environment applies.
var transport = &http.Transport{
	Proxy:                 nil,
	DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
	ForceAttemptHTTP2:     true,
	MaxIdleConns:          64,
	MaxIdleConnsPerHost:   16,
	IdleConnTimeout:       90 * time.Second,
	TLSHandshakeTimeout:   10 * time.Second,
	ExpectContinueTimeout: time.Second,
}

// Provision resolves the configuration (or the environment), takes a
// reference to each fleet's poller (starting it if no configuration had it
// yet), waits for the first fetch of new pollers, and builds the first
// routing table. A failed first fetch does not fail provisioning: it is
// logged and the fleet's hosts are unavailable until a document arrives.
func (a *App) Provision(ctx caddy.Context) error {
	a.logger = ctx.Logger()
	if err := a.resolve(); err != nil {
		return err
	}
	if err := a.loadProviders(ctx); err != nil {
		return err
	}
	if err := a.startFleets(ctx, transport); err != nil {
		return err
	}
	return a.addWildcardPolicies(ctx)
}

// resolve reads the configuration or the environment into specs, providers
// and ACME settings. It loads no module and starts nothing.
func (a *App) resolve() error {
	envList := a.environ
	if envList == nil {
		envList = os.Environ()
	}
	env := parseEnviron(envList)
	repl := caddy.NewReplacer()
	var err error
	if len(a.Fleets) > 0 {
		a.specs, err = resolveConfigFleets(a.Fleets, repl)
		if err != nil {
			return err
		}
		if ignored := env.withPrefix(fleetEnvPrefix); len(ignored) > 0 && a.logger != nil {
			a.logger.Info("the configuration declares fleets; SVC_FLEET_* variables are not read", zap.Strings("ignored", ignored))
		}
	} else {
		a.specs, err = fleetsFromEnv(env)
		if err != nil {
			return err
		}
		if len(a.specs) == 0 {
			return errors.New("no fleet is configured; " + whereFleets)
		}
	}
	dns := a.DNS
	if len(dns) == 0 {
		dns, err = dnsFromEnv(env)
		if err != nil {
			return err
		}
		repl = nil // environment values are literal
	}
	a.providers, err = prepareDNS(dns, repl)
	if err != nil {
		return err
	}
	r := caddy.NewReplacer()
	a.acme = acmeSettings{
		Delegation: strings.TrimSuffix(strings.ToLower(strings.TrimSpace(r.ReplaceKnown(a.ACMEDelegation, ""))), "."),
		Email:      strings.TrimSpace(r.ReplaceKnown(a.ACMEEmail, "")),
		CA:         strings.TrimSpace(r.ReplaceKnown(a.ACMECA, "")),
		CARoot:     strings.TrimSpace(r.ReplaceKnown(a.ACMECARoot, "")),
	}
	acmeFromEnv(env, &a.acme)
	a.acme.Delegation = strings.TrimSuffix(strings.ToLower(a.acme.Delegation), ".")
	return nil
}

// loadProviders loads each DNS provider module.
func (a *App) loadProviders(ctx caddy.Context) error {
	for i := range a.providers {
		p := &a.providers[i]
		val, err := ctx.LoadModuleByID("dns.providers."+p.module, p.raw)
		if err != nil {
			return fmt.Errorf("loading the DNS provider %s: %v", p.module, err)
		}
		p.provider = val
	}
	return nil
}

// Validate checks the resolved ACME settings.
func (a *App) Validate() error {
	if e := a.acme.Email; e != "" && (!strings.Contains(e, "@") || strings.ContainsAny(e, " \t<>")) {
		return fmt.Errorf("acme_email %q is not an email address", e)
	}
	if ca := a.acme.CA; ca != "" {
		u, err := url.Parse(ca)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return fmt.Errorf("acme_ca %q is not an http(s) URL of an ACME directory", ca)
		}
	}
	if d := a.acme.Delegation; d != "" && (strings.ContainsAny(d, "*/: ") || !strings.Contains(d, ".")) {
		return fmt.Errorf("acme_delegation %q is not a fully qualified name", d)
	}
	if f := a.acme.CARoot; f != "" {
		pem, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("acme_ca_root: %v", err)
		}
		if !x509.NewCertPool().AppendCertsFromPEM(pem) {
			return fmt.Errorf("acme_ca_root %q holds no PEM certificate", f)
		}
	}
	return nil
}

// startFleets takes a poller reference per fleet, subscribes, waits for the
// first attempt of pollers that never ran (bounded by their timeout), and
// builds the first table.
func (a *App) startFleets(ctx context.Context, rt http.RoundTripper) error {
	logger := a.logger
	if logger == nil {
		logger = zap.NewNop()
	}
	a.byName = map[string]*fleet{}
	a.live = &live{}
	for _, spec := range a.specs {
		key := spec.pollKey()
		val, loaded, err := pollers.LoadOrNew(key, func() (caddy.Destructor, error) {
			p := newPoller(spec, rt, pollerLogger())
			p.start()
			return p, nil
		})
		if err != nil {
			return err
		}
		f := &fleet{spec: spec, key: key, poller: val.(*poller), storage: newStorageClient(spec, rt)}
		a.fleets = append(a.fleets, f)
		a.byName[spec.Name] = f
		if !loaded {
			logger.Info("polling fleet", zap.String("fleet", spec.Name), zap.String("endpoint", spec.Endpoint),
				zap.Duration("poll_interval", spec.PollInterval), zap.String("prefer", spec.Prefer))
		}
		f.sub = f.poller.subscribe(a.rebuild)
	}
	// Documents that arrive while provisioning count as one refresh: the
	// first table is built once every new poller had its first attempt, so
	// hosts two fleets publish go by declaration order, not by who answered
	// first.
	for _, f := range a.fleets {
		wait, cancel := context.WithTimeout(ctx, f.spec.Timeout+time.Second)
		f.poller.waitFirst(wait)
		cancel()
	}
	a.live.mu.Lock()
	a.live.active = true
	a.live.mu.Unlock()
	a.rebuild()
	return nil
}

// Cleanup releases this configuration's poller references; a poller no other
// configuration uses stops.
func (a *App) Cleanup() error {
	if a.live == nil {
		return nil
	}
	a.live.mu.Lock()
	released := a.live.released
	a.live.active, a.live.released = false, true
	a.live.mu.Unlock()
	if released {
		return nil // a second Cleanup must not release another configuration's reference
	}
	for _, f := range a.fleets {
		if f.sub != nil {
			f.poller.unsubscribe(f.sub)
		}
		if _, err := pollers.Delete(f.key); err != nil && a.logger != nil {
			a.logger.Error("releasing a poller", zap.String("fleet", f.spec.Name), zap.Error(err))
		}
	}
	return nil
}

// Start implements caddy.App. Polling already runs since provisioning; the
// wildcard certificates of the first documents are put under management.
func (a *App) Start() error { return a.manageWildcards() }

// Stop implements caddy.App. Pollers are released in Cleanup, after the
// configuration replacing this one took its own references.
func (a *App) Stop() error { return nil }

// rebuild makes a new routing table from every fleet's current document and
// swaps it in. Hosts keep the fleet that published them first.
func (a *App) rebuild() {
	a.live.mu.Lock()
	defer a.live.mu.Unlock()
	if !a.live.active {
		return
	}
	inputs := make([]routing.Fleet, len(a.fleets))
	for i, f := range a.fleets {
		inputs[i] = routing.Fleet{Name: f.spec.Name, HTTPRedirect: f.spec.HTTPRedirect, Document: f.poller.current()}
	}
	var previous map[string]string
	if t := a.live.table.Load(); t != nil {
		previous = t.Owners()
	} else if m := ownerMemory.Load(); m != nil {
		previous = *m
	}
	t := routing.Build(inputs, previous)
	a.live.table.Store(t)
	owners := t.Owners()
	ownerMemory.Store(&owners)
	a.logConflicts(t.Conflicts())
	a.noteNewWildcards()
}

// logConflicts logs each conflict once per change.
func (a *App) logConflicts(conflicts []routing.Conflict) {
	now := map[string]string{}
	for _, c := range conflicts {
		sig := c.Owner + "<-" + strings.Join(c.Others, ",")
		now[c.Key] = sig
		if a.live.conflicts[c.Key] != sig && a.logger != nil {
			a.logger.Warn("several fleets publish the same host; the first publisher keeps it",
				zap.String("host", c.Key), zap.String("answering", c.Owner), zap.Strings("ignored", c.Others))
		}
	}
	for key := range a.live.conflicts {
		if _, still := now[key]; !still && a.logger != nil {
			a.logger.Info("host conflict resolved", zap.String("host", key))
		}
	}
	a.live.conflicts = now
}

// Table is the current routing table across this configuration's fleets.
// It is nil before provisioning.
func (a *App) Table() *routing.Table {
	if a == nil || a.live == nil {
		return nil
	}
	return a.live.table.Load()
}

// fleetByName returns a fleet of this configuration.
func (a *App) fleetByName(name string) *fleet { return a.byName[name] }

// Interface guards
var (
	_ caddy.App          = (*App)(nil)
	_ caddy.Provisioner  = (*App)(nil)
	_ caddy.Validator    = (*App)(nil)
	_ caddy.CleanerUpper = (*App)(nil)
)
