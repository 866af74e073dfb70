package svc

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"github.com/caddyserver/caddy/v2/modules/caddytls"

	"github.com/svc-dev/svc/adapter/routing"
)

func init() {
	caddy.RegisterModule(Upstreams{})
	caddy.RegisterModule(Permission{})
	caddy.RegisterModule(PlainHTTP{})
}

// Request variables the upstreams module sets (docs/adapter.md "Request variables").
const (
	VarRoute   = "svc.route"
	VarHost    = "svc.host"
	VarMatched = "svc.matched"
	VarFleet   = "svc.fleet"
)

// The headers of misdirected requests (docs/ingress.md "Misdirected requests"): the proxied
// request names the application it was routed to, and a front serving another application
// refuses it with 421 and the marker, naming itself.
const (
	ApplicationHeader = "Svc-Application"
	MisdirectedHeader = "Svc-Misdirected"
	// varMisdirected holds the dials that refused this request as misdirected.
	varMisdirected = "svc.misdirected"
	// The reverse proxy's placeholders for the last attempt's answer and upstream.
	misdirectedPlaceholder = "http.reverse_proxy.header." + MisdirectedHeader
	lastDialPlaceholder    = "http.reverse_proxy.upstream.hostport"
)

// appOf finds the svc app of a configuration, instantiating it from the
// environment when the configuration has no svc block.
func appOf(ctx caddy.Context) (*App, error) {
	v, err := ctx.App("svc")
	if err != nil {
		return nil, err
	}
	return v.(*App), nil
}

// Upstreams is the dynamic upstream source http.reverse_proxy.upstreams.svc.
// It resolves the request host across every fleet's cached document (a map
// lookup, no I/O), sets svc.route, svc.host, svc.matched and svc.fleet, and
// returns the answering route's upstreams in document order, less those that
// refused this request as misdirected on an earlier try. It names the route's
// application in the Svc-Application header of the proxied request (and
// removes a client's on every other answer). A denied path on
// an API host, an unknown host and the time before any document all return no
// upstream, so the proxy answers 503 and an error route can branch on
// svc.route. It takes no options.
type Upstreams struct {
	app *App
}

// CaddyModule returns the Caddy module information.
func (Upstreams) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.reverse_proxy.upstreams.svc",
		New: func() caddy.Module { return new(Upstreams) },
	}
}

// Provision finds the svc app.
func (u *Upstreams) Provision(ctx caddy.Context) (err error) {
	u.app, err = appOf(ctx)
	return err
}

// GetUpstreams resolves one request (every attempt and retry calls it).
func (u *Upstreams) GetUpstreams(r *http.Request) ([]*reverseproxy.Upstream, error) {
	host := routing.RequestHost(r.Host)
	route, answer := u.app.Table().Outcome(host, r.URL.Path)
	ctx := r.Context()
	if answer != nil && route == routing.RouteOK && !answer.API {
		r.Header.Set(ApplicationHeader, answer.Application)
	} else {
		r.Header.Del(ApplicationHeader)
	}
	caddyhttp.SetVar(ctx, VarRoute, routeValue(route))
	caddyhttp.SetVar(ctx, VarHost, host)
	if answer == nil {
		caddyhttp.SetVar(ctx, VarMatched, "")
		caddyhttp.SetVar(ctx, VarFleet, "")
		return nil, nil
	}
	caddyhttp.SetVar(ctx, VarMatched, answer.MatchedValue)
	caddyhttp.SetVar(ctx, VarFleet, answer.FleetValue)
	if route != routing.RouteOK {
		return nil, nil // denied: never proxied, whatever the error route says
	}
	refused := misdirectedDials(r)
	// Fresh upstreams each call: the proxy writes into them (host state,
	// health policy), so sharing them between requests would race.
	backing := make([]reverseproxy.Upstream, len(answer.Dials))
	out := make([]*reverseproxy.Upstream, 0, len(answer.Dials))
	for i, dial := range answer.Dials {
		if slices.Contains(refused, dial) {
			continue
		}
		backing[i].Dial = dial
		out = append(out, &backing[i])
	}
	return out, nil
}

// misdirectedDials are the upstreams that refused this request as meant for
// another application: a port that changed hands on a restarted node, which
// an older document still names. The proxy asks for upstreams again before
// each retry; when the try before answered with the marker, its upstream is
// left out of every later try of this request (the policy would otherwise pick
// it again, as a refusal is not a failed dial).
func misdirectedDials(r *http.Request) []string {
	ctx := r.Context()
	refused, _ := caddyhttp.GetVar(ctx, varMisdirected).([]string)
	repl, _ := ctx.Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if repl == nil {
		return refused
	}
	if _, marked := repl.Get(misdirectedPlaceholder); !marked {
		return refused
	}
	// Consumed: a later try that fails otherwise must not leave out its upstream.
	repl.Delete(misdirectedPlaceholder)
	if dial, _ := repl.GetString(lastDialPlaceholder); dial != "" {
		refused = append(refused, dial)
		caddyhttp.SetVar(ctx, varMisdirected, refused)
	}
	return refused
}

// routeValue returns the svc.route value as an interface value that needs no
// allocation (the constants are static).
func routeValue(route string) any {
	switch route {
	case routing.RouteOK:
		return routing.RouteOK
	case routing.RouteDenied:
		return routing.RouteDenied
	case routing.RouteUnknown:
		return routing.RouteUnknown
	default:
		return routing.RouteUnavailable
	}
}

// UnmarshalCaddyfile refuses any option: `dynamic svc`.
func (u *Upstreams) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return noOptions(d, "dynamic svc")
}

// UnmarshalJSON refuses any field.
func (u *Upstreams) UnmarshalJSON(b []byte) error {
	return noJSONOptions(b, "http.reverse_proxy.upstreams.svc")
}

// Permission is the on-demand TLS permission module tls.permission.svc: a
// name is approved only when some fleet's current document names it as an
// exact route host or an API host, answered from memory. A name covered only
// by a `*.` key, a name in no document, and every name before any document
// are refused. It takes no options.
//
// The TLS app loads this module while it provisions, and the svc app may add
// automation policies to the TLS app while it provisions; so this module finds
// the svc app lazily, at the first handshake, by which time every configured
// app is provisioned. The configuration must hold the svc app: a global svc
// block (possibly empty), or `dynamic svc` / `svc_plain_http` in a site.
type Permission struct {
	app    *App
	lookup *lazyApp
}

// lazyApp finds the svc app once, at first use.
type lazyApp struct {
	ctx  caddy.Context
	once sync.Once
	app  *App
	err  error
}

// CaddyModule returns the Caddy module information.
func (Permission) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "tls.permission.svc",
		New: func() caddy.Module { return new(Permission) },
	}
}

// Provision keeps the context to find the svc app at the first handshake.
func (p *Permission) Provision(ctx caddy.Context) error {
	p.lookup = &lazyApp{ctx: ctx}
	return nil
}

func (p *Permission) findApp() (*App, error) {
	if p.app != nil {
		return p.app, nil
	}
	l := p.lookup
	l.once.Do(func() {
		v, err := l.ctx.AppIfConfigured("svc")
		if err != nil {
			l.err = fmt.Errorf("permission svc: the svc app is not in the configuration; add a global svc block (it may be empty): %v", err)
			return
		}
		l.app = v.(*App)
	})
	return l.app, l.err
}

// CertificateAllowed approves or refuses a name, with no HTTP call.
func (p *Permission) CertificateAllowed(_ context.Context, name string) error {
	app, err := p.findApp()
	if err != nil {
		return err
	}
	if app.Table().Approved(name) {
		return nil
	}
	return fmt.Errorf("%s: %w", name, errNotServed)
}

var errNotServed = fmt.Errorf("not a route host or API host of any fleet's routing document")

// UnmarshalCaddyfile refuses any option: `permission svc`.
func (p *Permission) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return noOptions(d, "permission svc")
}

// UnmarshalJSON refuses any field.
func (p *Permission) UnmarshalJSON(b []byte) error {
	return noJSONOptions(b, "tls.permission.svc")
}

// PlainHTTP is the request matcher http.matchers.svc_plain_http: it matches
// a request whose host resolves to a fleet with `http_redirect off`. A host no
// fleet serves does not match. It takes no options.
type PlainHTTP struct {
	app *App
}

// CaddyModule returns the Caddy module information.
func (PlainHTTP) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.matchers.svc_plain_http",
		New: func() caddy.Module { return new(PlainHTTP) },
	}
}

// Provision finds the svc app.
func (m *PlainHTTP) Provision(ctx caddy.Context) (err error) {
	m.app, err = appOf(ctx)
	return err
}

// MatchWithError matches hosts of fleets serving plain HTTP.
func (m *PlainHTTP) MatchWithError(r *http.Request) (bool, error) {
	return m.Match(r), nil
}

// Match matches hosts of fleets serving plain HTTP.
func (m *PlainHTTP) Match(r *http.Request) bool {
	a := m.app.Table().Resolve(routing.RequestHost(r.Host))
	return a != nil && !a.HTTPRedirect
}

// UnmarshalCaddyfile refuses any option: `@name svc_plain_http`.
func (m *PlainHTTP) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return noOptions(d, "svc_plain_http")
}

// UnmarshalJSON refuses any field.
func (m *PlainHTTP) UnmarshalJSON(b []byte) error {
	return noJSONOptions(b, "http.matchers.svc_plain_http")
}

// Interface guards
var (
	_ caddy.Provisioner                 = (*Upstreams)(nil)
	_ reverseproxy.UpstreamSource       = (*Upstreams)(nil)
	_ caddyfile.Unmarshaler             = (*Upstreams)(nil)
	_ json.Unmarshaler                  = (*Upstreams)(nil)
	_ caddy.Provisioner                 = (*Permission)(nil)
	_ caddytls.OnDemandPermission       = (*Permission)(nil)
	_ caddyfile.Unmarshaler             = (*Permission)(nil)
	_ json.Unmarshaler                  = (*Permission)(nil)
	_ caddy.Provisioner                 = (*PlainHTTP)(nil)
	_ caddyhttp.RequestMatcherWithError = (*PlainHTTP)(nil)
	_ caddyfile.Unmarshaler             = (*PlainHTTP)(nil)
	_ json.Unmarshaler                  = (*PlainHTTP)(nil)
)
