package svc

// Certificates from a real ACME server, end to end (docs/adapter.md "Managed
// wildcard certificates" and "Storage"): Pebble, the ACME test server, runs in
// this process; Knot DNS, started on loopback, is the authoritative server for
// the test's zone, the resolver Pebble validates through and the server the
// rfc2136 provider updates. Everything listens on 127.0.0.1.

import (
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	_ "github.com/caddy-dns/rfc2136"
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/letsencrypt/pebble/v2/ca"
	"github.com/letsencrypt/pebble/v2/db"
	"github.com/letsencrypt/pebble/v2/va"
	"github.com/letsencrypt/pebble/v2/wfe"
	"github.com/miekg/dns"
)

// knotServer is a knotd the test started, serving one zone that accepts
// RFC 2136 updates signed with the TSIG key.
type knotServer struct {
	addr    string // 127.0.0.1:<port>, UDP and TCP
	keyName string
	key     string // base64
}

// startKnot starts knotd on a loopback port with the zone `origin` holding
// the given records (zone-file lines relative to the origin), and stops it
// when the test ends. scripts/install-knot.sh installs knotd (make go-test
// runs it).
func startKnot(t *testing.T, origin string, records []string) *knotServer {
	t.Helper()
	knotd, err := exec.LookPath("knotd")
	if err != nil {
		knotd = "/usr/sbin/knotd"
		if _, err := os.Stat(knotd); err != nil {
			t.Fatal("knotd is not installed: run scripts/install-knot.sh (make go-test does)")
		}
	}
	dir := t.TempDir()
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	k := &knotServer{addr: fmt.Sprintf("127.0.0.1:%d", freePort(t)), keyName: "svc-acme-test", key: base64.StdEncoding.EncodeToString(secret)}
	zone := fmt.Sprintf("$ORIGIN %s.\n$TTL 5\n@ SOA ns hostmaster 1 3600 600 86400 5\n@ NS ns\nns A 127.0.0.1\n%s\n", origin, strings.Join(records, "\n"))
	if err := os.WriteFile(filepath.Join(dir, origin+".zone"), []byte(zone), 0o644); err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(k.addr)
	conf := fmt.Sprintf(`server:
    rundir: "%[1]s"
    listen: %[2]s@%[3]s
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
database:
    storage: "%[1]s"
log:
  - target: stderr
    any: notice
key:
  - id: %[4]s
    algorithm: hmac-sha256
    secret: %[5]s
acl:
  - id: acme
    key: %[4]s
    action: [update, transfer]
template:
  - id: default
    storage: "%[1]s"
    zonefile-sync: -1
zone:
  - domain: %[6]s
    file: %[6]s.zone
    acl: acme
`, dir, host, port, k.keyName, k.key, origin)
	confPath := filepath.Join(dir, "knot.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuffer
	cmd := exec.Command(knotd, "-c", confPath)
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // gone with the test binary, even when it is killed
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("knotd:\n%s", stderr.String())
		}
	})
	waitFor(t, "knotd to answer", 10*time.Second, func() bool {
		select {
		case <-exited:
			t.Fatalf("knotd exited:\n%s", stderr.String())
		default:
		}
		m := new(dns.Msg)
		m.SetQuestion(origin+".", dns.TypeSOA)
		in, err := dns.Exchange(m, k.addr)
		return err == nil && in.Rcode == dns.RcodeSuccess && len(in.Answer) == 1
	})
	return k
}

// txt asks the server for name's TXT records (following a CNAME in its zone).
func (k *knotServer) txt(t *testing.T, name string) []string {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), dns.TypeTXT)
	in, err := dns.Exchange(m, k.addr)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, rr := range in.Answer {
		if r, ok := rr.(*dns.TXT); ok {
			out = append(out, strings.Join(r.Txt, ""))
		}
	}
	return out
}

// pebbleCA is Pebble running in this process over HTTPS on loopback (ACME
// needs HTTPS: Pebble refuses requests signed for an http:// URL), validating
// through the test's DNS server and reaching Caddy's HTTP port for HTTP-01.
// root is a PEM file of the root its HTTPS certificate chains to; orders
// counts the orders it created.
type pebbleCA struct {
	directory string
	root      string
	ca        *ca.CAImpl
	orders    atomic.Int64
}

func startPebble(t *testing.T, resolver string, httpPort, tlsPort int) *pebbleCA {
	t.Helper()
	t.Setenv("PEBBLE_VA_NOSLEEP", "1")      // no random wait before each validation
	t.Setenv("PEBBLE_WFE_NONCEREJECT", "0") // no nonces refused at random
	logger := log.New(io.Discard, "pebble ", 0)
	if testing.Verbose() {
		logger.SetOutput(os.Stderr)
	}
	store := db.NewMemoryStore()
	p := &pebbleCA{ca: ca.New(logger, store, "", "ecdsa", 0, 1, map[string]ca.Profile{"default": {Description: "default"}})}
	validator := va.New(logger, httpPort, tlsPort, false, resolver, store)
	front := wfe.New(logger, store, validator, p.ca, []string{"pebble.letsencrypt.org"}, false, false, 0, 0)
	handler := front.Handler()
	server := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w}
		handler.ServeHTTP(rec, r)
		if r.Method == http.MethodPost && r.URL.Path == "/order-plz" && rec.status == http.StatusCreated {
			p.orders.Add(1)
		}
	}))
	t.Cleanup(server.Close)
	p.directory = server.URL + wfe.DirectoryPath
	p.root = filepath.Join(t.TempDir(), "pebble-https-root.pem")
	if err := os.WriteFile(p.root, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: server.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// verify checks that a certificate chains to Pebble's root and names name.
func (p *pebbleCA) verify(t *testing.T, leaf *x509.Certificate, name string) {
	t.Helper()
	roots, inter := x509.NewCertPool(), x509.NewCertPool()
	roots.AddCert(p.ca.GetRootCert(0).Cert)
	inter.AddCert(p.ca.GetIntermediateCert(0).Cert)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, DNSName: name}); err != nil {
		t.Fatalf("the certificate served for %s is not Pebble's for that name: %v (names %v, issuer %s)", name, err, leaf.DNSNames, leaf.Issuer)
	}
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// serverCertificate completes a TLS handshake with Caddy's HTTPS port for
// name and returns the leaf certificate it served.
func serverCertificate(httpsPort int, name string) (*x509.Certificate, error) {
	d := &net.Dialer{Timeout: 30 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", fmt.Sprintf("127.0.0.1:%d", httpsPort), &tls.Config{ServerName: name, InsecureSkipVerify: true}) //nolint:gosec // verified against Pebble's root by the caller
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0], nil
}

// loadCaddy adapts and loads a Caddyfile into the in-process Caddy, with a
// data directory of its own (the ACME account, and everything else the svc
// storage keeps local): a Caddy started this way shares only the fleet's
// storage with one loaded before it. It is stopped when the test ends.
func loadCaddy(t *testing.T, caddyfile string) {
	t.Helper()
	// Certificate management goes on in the background for a moment after
	// Stop, so the data directory is removed best-effort, not by t.TempDir.
	data, err := os.MkdirTemp("", "svc-acme-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(data) })
	t.Setenv("XDG_DATA_HOME", data)
	t.Setenv("XDG_CONFIG_HOME", data)
	cfg, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), map[string]any{"filename": "Caddyfile"})
	if err != nil {
		t.Fatal(err)
	}
	if err := caddy.Load(cfg, true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = caddy.Stop() })
}

// storedKeys lists the fake node's storage keys ending in suffix.
func (n *fakeNode) storedKeys(suffix string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var keys []string
	for k := range n.objects {
		if strings.HasSuffix(k, suffix) {
			keys = append(keys, k)
		}
	}
	return keys
}

// TestOnDemandCertificateFromACME: a host the routing document names gets a
// certificate from Pebble by HTTP-01 on its first TLS handshake, stored
// through the fleet's storage protocol; a second Caddy with an empty data
// directory (a new ACME account) serves the same certificate from that
// storage, and Pebble sees no second order.
func TestOnDemandCertificateFromACME(t *testing.T) {
	httpPort, httpsPort := freePort(t), freePort(t)
	knot := startKnot(t, "svc.test", []string{"shop A 127.0.0.1", "stray A 127.0.0.1"})
	pebble := startPebble(t, knot.addr, httpPort, httpsPort)
	n := newFakeNode(t)
	n.setDocument(`{"v":1,"routes":[{"host":"shop.svc.test","application":"shop","upstreams":[{"node":"n1","address":"127.0.0.1:1"}]}]}`)
	caddyfile := fmt.Sprintf(`{
	admin off
	http_port %d
	https_port %d
	storage svc
	svc {
		fleet main {
			endpoint %s
			token %s
			poll_interval 50ms
		}
	}
	on_demand_tls {
		permission svc
	}
}
http:// {
	redir https://{host}{uri} 308
}
https:// {
	tls {
		on_demand
		issuer acme {
			dir %s
			trusted_roots %s
			email ops@svc.test
			disable_tlsalpn_challenge
		}
	}
	respond "served {host}"
}
`, httpPort, httpsPort, n.server.URL, n.token, pebble.directory, pebble.root)

	loadCaddy(t, caddyfile)
	leaf, err := serverCertificate(httpsPort, "shop.svc.test")
	if err != nil {
		t.Fatalf("first handshake for shop.svc.test: %v", err)
	}
	pebble.verify(t, leaf, "shop.svc.test")
	if got := pebble.orders.Load(); got != 1 {
		t.Fatalf("Pebble orders after the first certificate: %d, want 1", got)
	}
	if keys := n.storedKeys("/shop.svc.test/shop.svc.test.crt"); len(keys) != 1 || !strings.HasPrefix(keys[0], "certificates/") {
		t.Fatalf("the certificate was not stored through the fleet: %v", keys)
	}
	// A name the document does not route gets no certificate, though its DNS
	// points here and Pebble would validate it.
	if _, err := serverCertificate(httpsPort, "stray.svc.test"); err == nil {
		t.Fatal("stray.svc.test, which no fleet routes, got a certificate")
	}
	if got := pebble.orders.Load(); got != 1 {
		t.Fatalf("Pebble orders after refusing stray.svc.test: %d, want 1", got)
	}
	if err := caddy.Stop(); err != nil {
		t.Fatal(err)
	}

	loadCaddy(t, caddyfile)
	again, err := serverCertificate(httpsPort, "shop.svc.test")
	if err != nil {
		t.Fatalf("second Caddy's handshake for shop.svc.test: %v", err)
	}
	if !again.Equal(leaf) {
		t.Fatalf("the second Caddy served another certificate (serial %s, first %s)", again.SerialNumber, leaf.SerialNumber)
	}
	if got := pebble.orders.Load(); got != 1 {
		t.Fatalf("Pebble orders after the second Caddy: %d, want 1 (the stored certificate was not reused)", got)
	}
}

// TestWildcardCertificatesFromACME: `*.<base>` keys of the first documents get
// certificates from Pebble by DNS-01, the TXT records written into Knot by the
// rfc2136 provider: one base inside the provider's zones (the record at
// _acme-challenge.<base>), one outside them solved through acme_delegation
// (the record at the delegation name, which _acme-challenge.<base> is a CNAME
// to). Caddy's tls_resolvers points the challenge's SOA and propagation
// lookups at Knot.
func TestWildcardCertificatesFromACME(t *testing.T) {
	httpPort, httpsPort := freePort(t), freePort(t)
	knot := startKnot(t, "svc.test", []string{"_acme-challenge.customer CNAME delegated.acme"})
	pebble := startPebble(t, knot.addr, httpPort, httpsPort)
	n := newFakeNode(t)
	n.setDocument(`{"v":1,"routes":[
		{"host":"*.apps.acme.svc.test","application":"apps","upstreams":[{"node":"n1","address":"127.0.0.1:1"}]},
		{"host":"*.customer.svc.test","application":"customer","upstreams":[{"node":"n1","address":"127.0.0.1:1"}]}]}`)
	loadCaddy(t, fmt.Sprintf(`{
	admin off
	http_port %d
	https_port %d
	storage svc
	tls_resolvers %s
	svc {
		fleet main {
			endpoint %s
			token %s
		}
		dns knot rfc2136 {
			zones acme.svc.test
			key_name %s
			key_alg hmac-sha256
			key %s
			server %s
		}
		acme_delegation delegated.acme.svc.test
		acme_ca %s
		acme_ca_root %s
		acme_email ops@svc.test
	}
	on_demand_tls {
		permission svc
	}
}
https:// {
	tls {
		on_demand
	}
	respond "served {host}"
}
`, httpPort, httpsPort, knot.addr, n.server.URL, n.token, knot.keyName, knot.key, knot.addr, pebble.directory, pebble.root))

	for _, base := range []string{"apps.acme.svc.test", "customer.svc.test"} {
		waitFor(t, "the certificate for *."+base+" in the fleet's storage", 90*time.Second, func() bool {
			return len(n.storedKeys("/wildcard_."+base+"/wildcard_."+base+".crt")) == 1
		})
		var leaf *x509.Certificate
		waitFor(t, "a handshake for a name under "+base, 10*time.Second, func() bool {
			var err error
			leaf, err = serverCertificate(httpsPort, "any."+base)
			return err == nil
		})
		pebble.verify(t, leaf, "any."+base)
		if len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != "*."+base {
			t.Fatalf("names of the certificate served under %s: %v", base, leaf.DNSNames)
		}
	}
	if got := pebble.orders.Load(); got != 2 {
		t.Fatalf("Pebble orders: %d, want 2", got)
	}
	// The challenge records are removed once validated.
	waitFor(t, "the challenge records to be removed from Knot", 10*time.Second, func() bool {
		return len(knot.txt(t, "_acme-challenge.apps.acme.svc.test")) == 0 && len(knot.txt(t, "delegated.acme.svc.test")) == 0
	})
}
