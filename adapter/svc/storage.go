package svc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"
)

func init() {
	caddy.RegisterModule(Storage{})
}

// Lock timing (docs/adapter.md "Storage": locks). Variables so tests run fast.
var (
	lockRetryInterval   = time.Second     // wait after a 409 before asking again
	lockRestampInterval = 5 * time.Second // holder restamp
)

// Storage is the TLS storage module caddy.storage.svc: one keyspace in which
// a key naming a domain (certificates, OCSP staples, challenge tokens, the
// issue_cert_<domain> lock) goes to the fleet owning that domain, through its
// node and token, and everything else (the ACME account, cleaning markers,
// other locks) stays on the ingress's local disk. It takes no options.
//
// Caddy provisions storage before apps, so the svc app is found lazily, at
// the first storage operation.
type Storage struct {
	ctx     caddy.Context
	findApp func() (*App, error)
	local   certmagic.Storage
	logger  *zap.Logger

	state *storageState
}

type storageState struct {
	mu    sync.Mutex
	app   *App
	locks map[string]*heldLock
}

// heldLock is one acquisition of a fleet lock.
type heldLock struct {
	name   string
	token  string
	client *storageClient
	stop   chan struct{}
	done   chan struct{}
}

// CaddyModule returns the Caddy module information.
func (Storage) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "caddy.storage.svc",
		New: func() caddy.Module { return new(Storage) },
	}
}

// Provision keeps the context for finding the app later and opens the local
// disk storage in Caddy's data directory.
func (s *Storage) Provision(ctx caddy.Context) error {
	s.ctx = ctx
	s.logger = ctx.Logger()
	s.local = &certmagic.FileStorage{Path: caddy.AppDataDir()}
	s.findApp = func() (*App, error) {
		v, err := s.ctx.AppIfConfigured("svc")
		if err != nil {
			return nil, fmt.Errorf("the svc app is not in the configuration; add a global svc block (it may be empty): %v", err)
		}
		return v.(*App), nil
	}
	s.state = &storageState{locks: map[string]*heldLock{}}
	return nil
}

// CertMagicStorage returns the storage itself.
func (s *Storage) CertMagicStorage() (certmagic.Storage, error) { return s, nil }

// UnmarshalCaddyfile refuses any option: `storage svc`.
func (s *Storage) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return noOptions(d, "storage svc")
}

// UnmarshalJSON refuses any field.
func (s *Storage) UnmarshalJSON(b []byte) error { return noJSONOptions(b, "caddy.storage.svc") }

func (s *Storage) app() (*App, error) {
	s.state.mu.Lock()
	defer s.state.mu.Unlock()
	if s.state.app != nil {
		return s.state.app, nil
	}
	if s.findApp == nil {
		return nil, errors.New("svc storage: the svc app is not available")
	}
	app, err := s.findApp()
	if err != nil {
		return nil, fmt.Errorf("svc storage: %v", err)
	}
	s.state.app = app
	return app, nil
}

// Key classes.
type keyClass int

const (
	classLocal    keyClass = iota // the ingress's disk
	classDomain                   // the fleet owning the key's domain
	classAncestor                 // a prefix whose subtree holds domain keys: every fleet and the disk
)

// classifyKey tells where a key lives and, for domain keys, the domain
// (docs/adapter.md "Storage").
func classifyKey(key string) (keyClass, string) {
	if key == "" {
		return classAncestor, ""
	}
	segs := strings.Split(key, "/")
	switch segs[0] {
	case "certificates":
		if len(segs) <= 2 {
			return classAncestor, ""
		}
		return classDomain, unsafeDomain(segs[2])
	case "ocsp":
		if len(segs) == 1 {
			return classAncestor, ""
		}
		if i := strings.LastIndexByte(segs[1], '-'); i > 0 {
			return classDomain, unsafeDomain(segs[1][:i])
		}
	case "acme":
		switch {
		case len(segs) <= 2:
			return classAncestor, ""
		case segs[2] != "challenge_tokens":
			return classLocal, ""
		case len(segs) == 3:
			return classAncestor, ""
		default:
			return classDomain, unsafeDomain(strings.TrimSuffix(segs[3], ".json"))
		}
	}
	return classLocal, ""
}

// fleetOnly reports whether a key belongs to a subtree that lives only in
// fleets (certificates and OCSP staples), so a copy on the local disk is a
// leftover that listings ignore.
func fleetOnly(key string) bool {
	if c, _ := classifyKey(key); c == classDomain {
		return true
	}
	return strings.HasPrefix(key, "certificates/") || strings.HasPrefix(key, "ocsp/")
}

// classifyLock tells where a lock lives: issue_cert_<domain> with the fleet
// owning the domain, every other lock on the disk.
func classifyLock(name string) (keyClass, string) {
	if d, ok := strings.CutPrefix(name, "issue_cert_"); ok && d != "" {
		return classDomain, strings.ToLower(d)
	}
	return classLocal, ""
}

// unsafeDomain undoes certmagic's key-safe form of a wildcard name.
func unsafeDomain(s string) string {
	if rest, ok := strings.CutPrefix(s, "wildcard_"); ok {
		return "*" + rest
	}
	return s
}

// owner returns the storage client of the fleet owning a domain, nil when no
// fleet owns it.
func (s *Storage) owner(domain string) (*storageClient, error) {
	app, err := s.app()
	if err != nil {
		return nil, err
	}
	name := app.Table().Owner(domain)
	if name == "" {
		return nil, nil
	}
	f := app.fleetByName(name)
	if f == nil {
		return nil, nil
	}
	return f.storage, nil
}

func (s *Storage) allFleets() ([]*storageClient, *App, error) {
	app, err := s.app()
	if err != nil {
		return nil, nil, err
	}
	clients := make([]*storageClient, 0, len(app.fleets))
	for _, f := range app.fleets {
		clients = append(clients, f.storage)
	}
	return clients, app, nil
}

func unowned(domain, key string) error {
	return fmt.Errorf("svc storage: no fleet serves %s, so %q has nowhere to go; the domain must be a route or API host of some fleet", domain, key)
}

// Store writes a value.
func (s *Storage) Store(ctx context.Context, key string, value []byte) error {
	class, domain := classifyKey(key)
	if class != classDomain {
		return s.local.Store(ctx, key, value)
	}
	c, err := s.owner(domain)
	if err != nil {
		return err
	}
	if c == nil {
		return unowned(domain, key)
	}
	return c.put(ctx, key, value)
}

// Load reads a value; fs.ErrNotExist when missing or when no fleet owns the
// key's domain.
func (s *Storage) Load(ctx context.Context, key string) ([]byte, error) {
	class, domain := classifyKey(key)
	if class != classDomain {
		return s.local.Load(ctx, key)
	}
	c, err := s.owner(domain)
	if err != nil {
		return nil, err
	}
	if c == nil {
		return nil, fmt.Errorf("no fleet serves %s: %q: %w", domain, key, fs.ErrNotExist)
	}
	return c.get(ctx, key)
}

// Delete removes a key and its subtree; a missing key is not an error.
func (s *Storage) Delete(ctx context.Context, key string) error {
	class, domain := classifyKey(key)
	switch class {
	case classLocal:
		return s.local.Delete(ctx, key)
	case classDomain:
		c, err := s.owner(domain)
		if err != nil || c == nil {
			return err
		}
		return c.del(ctx, key)
	}
	if key == "" {
		return errors.New("svc storage: refusing to delete the whole keyspace")
	}
	clients, _, err := s.allFleets()
	if err != nil {
		return err
	}
	errs := []error{s.local.Delete(ctx, key)}
	for _, c := range clients {
		errs = append(errs, c.del(ctx, key))
	}
	return errors.Join(errs...)
}

// Exists reports whether a key exists as a value or as a prefix.
func (s *Storage) Exists(ctx context.Context, key string) bool {
	_, err := s.Stat(ctx, key)
	return err == nil
}

// Stat describes a key; fs.ErrNotExist when nothing is at or under it.
func (s *Storage) Stat(ctx context.Context, key string) (certmagic.KeyInfo, error) {
	class, domain := classifyKey(key)
	switch class {
	case classLocal:
		return s.local.Stat(ctx, key)
	case classDomain:
		c, err := s.owner(domain)
		if err != nil {
			return certmagic.KeyInfo{}, err
		}
		if c == nil {
			return certmagic.KeyInfo{}, fmt.Errorf("no fleet serves %s: %q: %w", domain, key, fs.ErrNotExist)
		}
		return statInfo(ctx, c, key)
	}
	// An ancestor exists when any source has something under it.
	if info, err := s.local.Stat(ctx, key); err == nil {
		return info, nil
	}
	clients, _, err := s.allFleets()
	if err != nil {
		return certmagic.KeyInfo{}, err
	}
	var errs []error
	for _, c := range clients {
		info, err := statInfo(ctx, c, key)
		if err == nil {
			return info, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return certmagic.KeyInfo{}, errors.Join(errs...)
	}
	return certmagic.KeyInfo{}, fmt.Errorf("%q: %w", key, fs.ErrNotExist)
}

func statInfo(ctx context.Context, c *storageClient, key string) (certmagic.KeyInfo, error) {
	st, modified, err := c.stat(ctx, key)
	if err != nil {
		return certmagic.KeyInfo{}, err
	}
	return certmagic.KeyInfo{Key: key, Modified: modified, Size: st.Size, IsTerminal: st.IsTerminal}, nil
}

// List returns the full keys under a prefix (immediate children unless
// recursive). A prefix naming a domain lists that domain's fleet only; a
// prefix whose children name domains (certificates/<issuer>, ocsp, and their
// ancestors) lists the disk and every fleet, keeping a domain key only from
// the fleet owning the domain. A fleet that cannot be reached is left out of
// a merged listing (logged) rather than failing it.
func (s *Storage) List(ctx context.Context, prefix string, recursive bool) ([]string, error) {
	class, domain := classifyKey(prefix)
	switch class {
	case classLocal:
		return s.local.List(ctx, prefix, recursive)
	case classDomain:
		c, err := s.owner(domain)
		if err != nil {
			return nil, err
		}
		if c == nil {
			return nil, fmt.Errorf("no fleet serves %s: %q: %w", domain, prefix, fs.ErrNotExist)
		}
		return c.list(ctx, prefix, recursive)
	}
	clients, app, err := s.allFleets()
	if err != nil {
		return nil, err
	}
	table := app.Table()
	seen := map[string]bool{}
	var failures []error
	if keys, err := s.local.List(ctx, prefix, recursive); err == nil {
		for _, k := range keys {
			if !underPrefix(k, prefix) {
				continue
			}
			if !fleetOnly(k) {
				seen[k] = true
			}
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		failures = append(failures, err)
	}
	for _, c := range clients {
		keys, err := c.list(ctx, prefix, recursive)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				failures = append(failures, err)
				if s.logger != nil {
					s.logger.Warn("listing left a fleet out", zap.String("prefix", prefix), zap.String("fleet", c.fleet), zap.Error(err))
				}
			}
			continue
		}
		for _, k := range keys {
			if kc, d := classifyKey(k); kc == classDomain && table.Owner(d) != c.fleet {
				continue
			}
			seen[k] = true
		}
	}
	if len(seen) == 0 {
		if len(failures) > 0 {
			return nil, errors.Join(failures...)
		}
		return nil, fmt.Errorf("%q: %w", prefix, fs.ErrNotExist)
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out, nil
}

// Lock takes a named lock. A fleet lock is asked for with a token naming
// this acquisition; a 409 is retried every second until granted or until
// ctx ends; any other failure ends the attempt. While held, the lock is
// restamped every 5 s; a refused restamp drops it locally.
func (s *Storage) Lock(ctx context.Context, name string) error {
	class, domain := classifyLock(name)
	if class == classLocal {
		return s.local.Lock(ctx, name)
	}
	c, err := s.owner(domain)
	if err != nil {
		return err
	}
	if c == nil {
		return unowned(domain, "lock "+name)
	}
	token := newLockToken()
	for {
		granted, err := c.tryLock(ctx, name, token)
		if err != nil {
			return err
		}
		if granted {
			break
		}
		timer := time.NewTimer(lockRetryInterval)
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-timer.C:
		}
	}
	s.hold(name, token, c)
	return nil
}

// TryLock asks for a named lock once.
func (s *Storage) TryLock(ctx context.Context, name string) (bool, error) {
	class, domain := classifyLock(name)
	if class == classLocal {
		if tl, ok := s.local.(certmagic.TryLocker); ok {
			return tl.TryLock(ctx, name)
		}
		return false, fmt.Errorf("svc storage: the local storage cannot try-lock %s", name)
	}
	c, err := s.owner(domain)
	if err != nil {
		return false, err
	}
	if c == nil {
		return false, unowned(domain, "lock "+name)
	}
	token := newLockToken()
	granted, err := c.tryLock(ctx, name, token)
	if granted && err == nil {
		s.hold(name, token, c)
	}
	return granted, err
}

func newLockToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// hold records a granted lock and starts its restamper.
func (s *Storage) hold(name, token string, c *storageClient) {
	h := &heldLock{name: name, token: token, client: c, stop: make(chan struct{}), done: make(chan struct{})}
	s.state.mu.Lock()
	s.state.locks[name] = h
	s.state.mu.Unlock()
	go s.restamp(h)
}

func (s *Storage) restamp(h *heldLock) {
	defer close(h.done)
	ticker := time.NewTicker(lockRestampInterval)
	defer ticker.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-ticker.C:
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			select {
			case <-h.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		granted, err := h.client.tryLock(ctx, h.name, h.token)
		cancel()
		select {
		case <-h.stop:
			return // unlocked meanwhile: the answer no longer matters
		default:
		}
		if granted && err == nil {
			continue
		}
		// The holder must not keep a lock it may no longer have.
		s.state.mu.Lock()
		if s.state.locks[h.name] == h {
			delete(s.state.locks, h.name)
		}
		s.state.mu.Unlock()
		if s.logger != nil {
			s.logger.Error("lost a storage lock: a restamp was refused; dropped it", zap.String("lock", h.name),
				zap.String("fleet", h.client.fleet), zap.Bool("held_elsewhere", err == nil), zap.Error(err))
		}
		return
	}
}

// Unlock releases a named lock, even when ctx is already cancelled.
func (s *Storage) Unlock(ctx context.Context, name string) error {
	class, _ := classifyLock(name)
	if class == classLocal {
		return s.local.Unlock(ctx, name)
	}
	s.state.mu.Lock()
	h := s.state.locks[name]
	delete(s.state.locks, name)
	s.state.mu.Unlock()
	if h == nil {
		return fmt.Errorf("svc storage: the lock %s is not held here (it was dropped after a refused restamp, or never taken); not releasing it", name)
	}
	close(h.stop)
	<-h.done
	return h.client.unlock(context.WithoutCancel(ctx), name, h.token)
}

// noOptions consumes a no-option module's Caddyfile tokens and refuses any
// argument or block.
func noOptions(d *caddyfile.Dispenser, usage string) error {
	d.Next() // the module name
	if d.NextArg() {
		return d.Errf("%s takes no options (got %q); %s", usage, d.Val(), whereFleets)
	}
	if d.NextBlock(0) {
		return d.Errf("%s takes no options (got %q); %s", usage, d.Val(), whereFleets)
	}
	return nil
}

// noJSONOptions refuses any field in a no-option module's JSON.
func noJSONOptions(b []byte, id string) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		if strings.TrimSpace(string(b)) == "null" {
			return nil
		}
		return fmt.Errorf("%s takes no options: %v", id, err)
	}
	for k := range fields {
		return fmt.Errorf("%s takes no options (got %q); %s", id, k, whereFleets)
	}
	return nil
}

// Interface guards
var (
	_ caddy.Provisioner      = (*Storage)(nil)
	_ caddy.StorageConverter = (*Storage)(nil)
	_ certmagic.Storage      = (*Storage)(nil)
	_ certmagic.TryLocker    = (*Storage)(nil)
	_ caddyfile.Unmarshaler  = (*Storage)(nil)
	_ json.Unmarshaler       = (*Storage)(nil)
)
