package svc

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddytls"
	"go.uber.org/zap"
)

// Managed wildcard certificates (docs/adapter.md "Managed wildcard certificates"): a
// `*.<base>` key can only be served over TLS with a wildcard certificate,
// which needs a DNS challenge, and the on-demand permission refuses names
// covered only by a wildcard. So the app asks Caddy's TLS app to manage
// `*.<base>` for every base of the documents it starts with, through one
// automation policy per solver (a DNS provider, possibly writing at the
// delegation name). A base that appears later needs a reload; it is logged.

// wildcardPolicy is one automation policy: the wildcard names one solver
// answers for, and the ACME issuer that solves them.
type wildcardPolicy struct {
	subjects []string
	issuer   json.RawMessage
}

// wildcardPolicies groups wildcard bases by solver. unsolved lists the bases
// nothing can solve. resolvers (the TLS app's, Caddy's global tls_resolvers)
// become the DNS challenge's resolvers, as they do for the issuers Caddy's
// Caddyfile adapter makes: a zone only a split-horizon server knows is then
// found and checked there.
func wildcardPolicies(bases []string, providers []dnsProvider, acme acmeSettings, resolvers []string) (policies []wildcardPolicy, unsolved []string, err error) {
	type group struct {
		s     solver
		names []string
	}
	groups := map[string]*group{}
	var order []string
	for _, base := range bases {
		s, ok := chooseSolver(base, providers, acme.Delegation)
		if !ok {
			unsolved = append(unsolved, base)
			continue
		}
		key := s.provider.name + "\x00" + s.provider.module + "\x00" + s.overrideDomain
		if groups[key] == nil {
			groups[key] = &group{s: s}
			order = append(order, key)
		}
		groups[key].names = append(groups[key].names, "*."+base)
	}
	for _, key := range order {
		g := groups[key]
		var fields map[string]any
		if err := json.Unmarshal(g.s.provider.raw, &fields); err != nil {
			return nil, nil, err
		}
		if fields == nil {
			fields = map[string]any{}
		}
		fields["name"] = g.s.provider.module
		dns := map[string]any{"provider": fields}
		if g.s.overrideDomain != "" {
			dns["override_domain"] = g.s.overrideDomain
		}
		if len(resolvers) > 0 {
			dns["resolvers"] = resolvers
		}
		issuer := map[string]any{
			"module": "acme",
			"challenges": map[string]any{
				"dns":      dns,
				"http":     map[string]any{"disabled": true},
				"tls-alpn": map[string]any{"disabled": true},
			},
		}
		if acme.CA != "" {
			issuer["ca"] = acme.CA
		}
		if acme.Email != "" {
			issuer["email"] = acme.Email
		}
		if acme.CARoot != "" {
			issuer["trusted_roots_pem_files"] = []string{acme.CARoot}
		}
		raw, err := json.Marshal(issuer)
		if err != nil {
			return nil, nil, err
		}
		sort.Strings(g.names)
		policies = append(policies, wildcardPolicy{subjects: g.names, issuer: raw})
	}
	return policies, unsolved, nil
}

// addWildcardPolicies registers the policies for the current documents with
// the TLS app. Called while provisioning (never from inside the TLS app's own
// provisioning: the modules the TLS app loads find this app lazily).
func (a *App) addWildcardPolicies(ctx caddy.Context) error {
	a.live.mu.Lock()
	bases := a.Table().WildcardBases()
	a.wildcardBases = map[string]bool{}
	for _, b := range bases {
		a.wildcardBases[b] = true
	}
	a.live.mu.Unlock()
	if len(bases) == 0 {
		return nil
	}
	v, err := ctx.App("tls")
	if err != nil {
		return err
	}
	tlsApp := v.(*caddytls.TLS)
	policies, unsolved, err := wildcardPolicies(bases, a.providers, a.acme, tlsApp.Resolvers)
	if err != nil {
		return err
	}
	if len(unsolved) > 0 {
		a.logger.Warn("no DNS provider solves these wildcard bases; their other names are served over plain HTTP only, and over TLS only with a certificate of their own",
			zap.Strings("bases", unsolved), zap.String("compiled_in", compiledProviders()))
	}
	if len(policies) == 0 {
		return nil
	}
	for _, p := range policies {
		ap := &caddytls.AutomationPolicy{SubjectsRaw: p.subjects, IssuersRaw: []json.RawMessage{p.issuer}}
		if err := tlsApp.AddAutomationPolicy(ap); err != nil {
			return fmt.Errorf("wildcard certificates for %s: %v", strings.Join(p.subjects, ", "), err)
		}
		a.wildcardNames = append(a.wildcardNames, p.subjects...)
	}
	a.tls = tlsApp
	return nil
}

// manageWildcards asks the TLS app to obtain and renew the wildcard
// certificates (in the background).
func (a *App) manageWildcards() error {
	if a.tls == nil || len(a.wildcardNames) == 0 {
		return nil
	}
	names := map[string]struct{}{}
	for _, n := range a.wildcardNames {
		names[n] = struct{}{}
	}
	a.logger.Info("managing wildcard certificates", zap.Strings("names", a.wildcardNames))
	return a.tls.Manage(names)
}

// noteNewWildcards logs, once each, wildcard bases that appeared after
// provisioning: their certificates need a configuration reload. Called with
// live.mu held.
func (a *App) noteNewWildcards() {
	if a.wildcardBases == nil || a.logger == nil {
		return
	}
	for _, b := range a.Table().WildcardBases() {
		if !a.wildcardBases[b] {
			a.wildcardBases[b] = true
			a.logger.Warn("a new wildcard base appeared; reload the configuration to obtain its certificate", zap.String("base", b))
		}
	}
}
