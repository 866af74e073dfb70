package svc

import (
	"context"
	"errors"
	"io/fs"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
)

const ownerDocA = `{"v":1,"routes":[{"host":"a.example","application":"a","upstreams":[{"node":"n1","address":"127.0.0.1:1"}]},
{"host":"*.wild.example","application":"w","upstreams":[{"node":"n1","address":"127.0.0.1:1"}]}],
"api":{"hosts":["svc-a.test"],"upstreams":[],"denied":[]}}`
const ownerDocB = `{"v":1,"routes":[{"host":"b.example","application":"b","upstreams":[{"node":"n1","address":"127.0.0.1:2"}]}]}`

// storageFixture is a Storage over two fake nodes (fleet-a owns a.example,
// *.wild.example and svc-a.test; fleet-b owns b.example) and a local disk.
type storageFixture struct {
	s    *Storage
	a, b *fakeNode
	disk *certmagic.FileStorage
}

func newStorageFixture(t *testing.T) *storageFixture {
	a, b := newFakeNode(t), newFakeNode(t)
	a.setDocument(ownerDocA)
	b.setDocument(ownerDocB)
	app := provisionApp(t, &App{Fleets: []FleetConfig{fleetConfig(a, "fleet-a"), fleetConfig(b, "fleet-b")}})
	disk := &certmagic.FileStorage{Path: t.TempDir()}
	s := &Storage{local: disk, findApp: func() (*App, error) { return app, nil }, state: &storageState{locks: map[string]*heldLock{}}}
	return &storageFixture{s: s, a: a, b: b, disk: disk}
}

func TestClassifyKey(t *testing.T) {
	cases := map[string]struct {
		class  keyClass
		domain string
	}{
		"certificates/acme-v02.api.letsencrypt.org-directory/a.example/a.example.crt": {classDomain, "a.example"},
		"certificates/issuer/wildcard_.wild.example/wildcard_.wild.example.key":       {classDomain, "*.wild.example"},
		"certificates/issuer/a.example":                                               {classDomain, "a.example"},
		"certificates/issuer":                                                         {classAncestor, ""},
		"certificates":                                                                {classAncestor, ""},
		"ocsp/a.example-0123abcd":                                                     {classDomain, "a.example"},
		"ocsp/my-host.example-0123abcd":                                               {classDomain, "my-host.example"},
		"ocsp":                                                                        {classAncestor, ""},
		"acme/issuer/challenge_tokens/a.example.json":                                 {classDomain, "a.example"},
		"acme/issuer/challenge_tokens":                                                {classAncestor, ""},
		"acme/issuer/users/ops@example.com/ops.json":                                  {classLocal, ""},
		"acme/issuer":                                                                 {classAncestor, ""},
		"last_clean.json":                                                             {classLocal, ""},
		"rw_test_123":                                                                 {classLocal, ""},
		"pki/authorities/local/root.crt":                                              {classLocal, ""},
		"":                                                                            {classAncestor, ""},
	}
	for key, want := range cases {
		class, domain := classifyKey(key)
		if class != want.class || domain != want.domain {
			t.Errorf("%q: (%v, %q), want (%v, %q)", key, class, domain, want.class, want.domain)
		}
	}
	for name, want := range map[string]keyClass{"issue_cert_a.example": classDomain, "issue_cert_*.wild.example": classDomain, "storage_clean": classLocal, "register_acme_account_x": classLocal, "ari_1": classLocal} {
		if c, _ := classifyLock(name); c != want {
			t.Errorf("lock %q: %v, want %v", name, c, want)
		}
	}
}

func TestStorageRoutesKeysByDomainOwner(t *testing.T) {
	f := newStorageFixture(t)
	ctx := context.Background()
	keyA := "certificates/issuer/a.example/a.example.crt"
	keyB := "certificates/issuer/b.example/b.example.crt"
	keyW := "certificates/issuer/wildcard_.wild.example/wildcard_.wild.example.crt"
	keyAPI := "certificates/issuer/svc-a.test/svc-a.test.crt"
	for _, k := range []string{keyA, keyB, keyW, keyAPI} {
		if err := f.s.Store(ctx, k, []byte("pem:"+k)); err != nil {
			t.Fatalf("store %s: %v", k, err)
		}
	}
	if _, ok := f.a.objects[keyA]; !ok {
		t.Error("a.example's certificate did not go to fleet-a")
	}
	if _, ok := f.a.objects[keyW]; !ok {
		t.Error("*.wild.example's certificate did not go to fleet-a")
	}
	if _, ok := f.a.objects[keyAPI]; !ok {
		t.Error("the API host's certificate did not go to fleet-a")
	}
	if _, ok := f.b.objects[keyB]; !ok || len(f.b.objects) != 1 {
		t.Errorf("fleet-b holds %v", f.b.objects)
	}
	got, err := f.s.Load(ctx, keyB)
	if err != nil || string(got) != "pem:"+keyB {
		t.Fatalf("load %q %v", got, err)
	}
	// Local keys stay on the disk.
	if err := f.s.Store(ctx, "acme/issuer/users/ops@example.com/ops.json", []byte("account")); err != nil {
		t.Fatal(err)
	}
	if v, err := f.disk.Load(ctx, "acme/issuer/users/ops@example.com/ops.json"); err != nil || string(v) != "account" {
		t.Fatalf("account not on disk: %v", err)
	}
	if len(f.a.objects) != 3 || len(f.b.objects) != 1 {
		t.Error("a local key reached a fleet")
	}
	// Stat of a value and of a prefix.
	info, err := f.s.Stat(ctx, keyA)
	if err != nil || !info.IsTerminal || info.Size != int64(len("pem:"+keyA)) || info.Modified.IsZero() {
		t.Errorf("stat %+v %v", info, err)
	}
	info, err = f.s.Stat(ctx, "certificates/issuer/a.example")
	if err != nil || info.IsTerminal || !info.Modified.IsZero() {
		t.Errorf("stat of a prefix %+v %v", info, err)
	}
	if !f.s.Exists(ctx, keyA) || f.s.Exists(ctx, keyA+".nope") {
		t.Error("exists")
	}
	// Delete: subtree, and a missing key is not an error.
	if err := f.s.Delete(ctx, "certificates/issuer/a.example"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Load(ctx, keyA); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after delete: %v", err)
	}
	if err := f.s.Delete(ctx, keyA); err != nil {
		t.Fatalf("deleting a missing key: %v", err)
	}
}

func TestStorageMissingKeysAreErrNotExist(t *testing.T) {
	f := newStorageFixture(t)
	ctx := context.Background()
	missing := "certificates/issuer/a.example/a.example.json"
	if _, err := f.s.Load(ctx, missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("load: %v", err)
	}
	if _, err := f.s.Stat(ctx, missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stat: %v", err)
	}
	if _, err := f.s.List(ctx, "certificates/issuer/a.example", false); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("list: %v", err)
	}
	if _, err := f.s.List(ctx, "ocsp", false); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("merged list of nothing: %v", err)
	}
}

func TestStorageUnownedDomain(t *testing.T) {
	f := newStorageFixture(t)
	ctx := context.Background()
	key := "certificates/issuer/nobody.example/nobody.example.crt"
	err := f.s.Store(ctx, key, []byte("x"))
	if err == nil || !strings.Contains(err.Error(), "nobody.example") {
		t.Fatalf("store for an unowned domain: %v", err)
	}
	if _, err := f.s.Load(ctx, key); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("load for an unowned domain: %v", err)
	}
	if err := f.s.Lock(ctx, "issue_cert_nobody.example"); err == nil || !strings.Contains(err.Error(), "nobody.example") {
		t.Fatalf("lock for an unowned domain: %v", err)
	}
	if len(f.a.objects)+len(f.b.objects) != 0 {
		t.Fatal("a write for an unowned domain reached a fleet")
	}
}

func TestStorageKeyEncoding(t *testing.T) {
	f := newStorageFixture(t)
	ctx := context.Background()
	key := "certificates/acme-staging.example-directory/a.example/a.example+odd key%.json"
	if err := f.s.Store(ctx, key, []byte{0, 1, 2, 255}); err != nil {
		t.Fatal(err)
	}
	got, err := f.s.Load(ctx, key)
	if err != nil || string(got) != string([]byte{0, 1, 2, 255}) {
		t.Fatalf("bytes did not round-trip: %v %v", got, err)
	}
	f.a.mu.Lock()
	defer f.a.mu.Unlock()
	want := "PUT /v1/storage/objects/certificates/acme-staging.example-directory/a.example/a.example%2Bodd%20key%25.json"
	if f.a.paths[0] != want {
		t.Fatalf("path %s, want %s", f.a.paths[0], want)
	}
}

func TestStorageListingMergedAcrossFleets(t *testing.T) {
	f := newStorageFixture(t)
	ctx := context.Background()
	// Each fleet holds its own certificates plus a stale copy of the other's
	// domain (for example from before the domain moved): a merged listing
	// keeps a domain key only from the fleet owning the domain.
	f.a.objects["certificates/issuer/a.example/a.example.crt"] = []byte("a")
	f.a.objects["certificates/issuer/b.example/b.example.crt"] = []byte("stale")
	f.a.objects["ocsp/a.example-aaaa"] = []byte("a")
	f.b.objects["certificates/issuer/b.example/b.example.crt"] = []byte("b")
	f.b.objects["certificates/other-issuer/b.example/b.example.crt"] = []byte("b")
	f.b.objects["ocsp/a.example-bbbb"] = []byte("stale")
	f.b.objects["ocsp/b.example-cccc"] = []byte("b")
	_ = f.disk.Store(ctx, "certificates/local-issuer/x/x.crt", []byte("legacy"))

	got, err := f.s.List(ctx, "certificates", false)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, " ") != "certificates/issuer certificates/other-issuer" {
		t.Errorf("certificates: %v", got)
	}
	got, _ = f.s.List(ctx, "certificates/issuer", false)
	if strings.Join(got, " ") != "certificates/issuer/a.example certificates/issuer/b.example" {
		t.Errorf("certificates/issuer: %v", got)
	}
	got, _ = f.s.List(ctx, "ocsp", false)
	if strings.Join(got, " ") != "ocsp/a.example-aaaa ocsp/b.example-cccc" {
		t.Errorf("ocsp: %v", got)
	}
	got, _ = f.s.List(ctx, "certificates/issuer/b.example", false)
	if strings.Join(got, " ") != "certificates/issuer/b.example/b.example.crt" {
		t.Errorf("a domain prefix lists its fleet only: %v", got)
	}
	f.b.mu.Lock()
	f.b.objects["certificates/issuer/b.example/b.example.json"] = []byte("b")
	f.b.mu.Unlock()
	got, _ = f.s.List(ctx, "certificates", true)
	want := "certificates/issuer certificates/issuer/a.example certificates/issuer/a.example/a.example.crt certificates/issuer/b.example certificates/issuer/b.example/b.example.crt certificates/issuer/b.example/b.example.json certificates/other-issuer certificates/other-issuer/b.example certificates/other-issuer/b.example/b.example.crt"
	if strings.Join(got, " ") != want {
		t.Errorf("recursive:\n got %v\nwant %v", got, want)
	}
	for _, k := range got {
		if !strings.HasPrefix(k, "certificates/") {
			t.Errorf("a key outside the prefix: %s", k)
		}
	}
}

func TestStorageListingDropsKeysOutsideThePrefix(t *testing.T) {
	c := &storageClient{fleet: "x"}
	for _, k := range []string{"ocsp/a", "ocsp", "certificates/a", "ocspx/a"} {
		if got := underPrefix(k, "ocsp"); got != (k == "ocsp/a" || k == "ocsp") {
			t.Errorf("underPrefix(%q)", k)
		}
	}
	_ = c
}

func TestStorageLockRetriesOn409(t *testing.T) {
	defer setLockTiming(10*time.Millisecond, time.Hour)()
	f := newStorageFixture(t)
	ctx := context.Background()
	name := "issue_cert_a.example"
	f.a.mu.Lock()
	f.a.locks[name] = "someone-else"
	f.a.mu.Unlock()
	acquired := make(chan error, 1)
	go func() { acquired <- f.s.Lock(ctx, name) }()
	eventually(t, "a few 409s", func() bool { f.a.mu.Lock(); defer f.a.mu.Unlock(); return f.a.lockPosts[name] >= 3 })
	select {
	case err := <-acquired:
		t.Fatalf("acquired while held elsewhere: %v", err)
	default:
	}
	f.a.mu.Lock()
	delete(f.a.locks, name) // the other holder releases
	f.a.mu.Unlock()
	if err := <-acquired; err != nil {
		t.Fatal(err)
	}
	f.a.mu.Lock()
	token := f.a.locks[name]
	f.a.mu.Unlock()
	if token == "" || token == "someone-else" {
		t.Fatalf("lock token %q", token)
	}
	if err := f.s.Unlock(ctx, name); err != nil {
		t.Fatal(err)
	}
	f.a.mu.Lock()
	_, held := f.a.locks[name]
	f.a.mu.Unlock()
	if held {
		t.Fatal("unlock did not release")
	}
	// A second acquisition uses a new token.
	if err := f.s.Lock(ctx, name); err != nil {
		t.Fatal(err)
	}
	f.a.mu.Lock()
	second := f.a.locks[name]
	f.a.mu.Unlock()
	if second == token {
		t.Error("the same token for two acquisitions")
	}
	_ = f.s.Unlock(ctx, name)
}

func TestStorageLockEndsOnContextCancel(t *testing.T) {
	defer setLockTiming(10*time.Millisecond, time.Hour)()
	f := newStorageFixture(t)
	name := "issue_cert_b.example"
	f.b.locks[name] = "someone-else"
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.s.Lock(ctx, name) }()
	eventually(t, "a 409", func() bool { f.b.mu.Lock(); defer f.b.mu.Unlock(); return f.b.lockPosts[name] >= 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("%v, want context.Canceled", err)
	}
}

func TestStorageLockRestampsAndDropsWhenRefused(t *testing.T) {
	defer setLockTiming(10*time.Millisecond, 10*time.Millisecond)()
	f := newStorageFixture(t)
	ctx := context.Background()
	name := "issue_cert_*.wild.example"
	if err := f.s.Lock(ctx, name); err != nil {
		t.Fatal(err)
	}
	eventually(t, "restamps", func() bool { f.a.mu.Lock(); defer f.a.mu.Unlock(); return f.a.lockPosts[name] >= 4 })
	f.a.mu.Lock()
	f.a.refuseRestamp = true
	f.a.mu.Unlock()
	eventually(t, "the lock dropped locally", func() bool {
		f.s.state.mu.Lock()
		defer f.s.state.mu.Unlock()
		return f.s.state.locks[name] == nil
	})
	f.a.mu.Lock()
	f.a.locks[name] = "new-holder" // someone else took it over
	f.a.refuseRestamp = false
	f.a.mu.Unlock()
	err := f.s.Unlock(ctx, name)
	if err == nil || !strings.Contains(err.Error(), "not held") {
		t.Fatalf("unlock of a dropped lock: %v", err)
	}
	f.a.mu.Lock()
	defer f.a.mu.Unlock()
	if f.a.locks[name] != "new-holder" {
		t.Fatal("unlocking a dropped lock released the new holder's lock")
	}
}

func TestStorageUnlockWithCancelledContext(t *testing.T) {
	defer setLockTiming(10*time.Millisecond, time.Hour)()
	f := newStorageFixture(t)
	name := "issue_cert_a.example"
	if err := f.s.Lock(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := f.s.Unlock(ctx, name); err != nil {
		t.Fatal(err)
	}
	f.a.mu.Lock()
	defer f.a.mu.Unlock()
	if _, held := f.a.locks[name]; held {
		t.Fatal("not released")
	}
}

func TestStorageLocalLocks(t *testing.T) {
	f := newStorageFixture(t)
	ctx := context.Background()
	if err := f.s.Lock(ctx, "storage_clean"); err != nil {
		t.Fatal(err)
	}
	if err := f.s.Unlock(ctx, "storage_clean"); err != nil {
		t.Fatal(err)
	}
	if len(f.a.lockPosts)+len(f.b.lockPosts) != 0 {
		t.Fatal("a local lock reached a fleet")
	}
}

func TestStorageSendsVersionAndToken(t *testing.T) {
	f := newStorageFixture(t)
	f.a.token = "changed" // the fake now refuses fleet-a's token
	err := f.s.Store(context.Background(), "certificates/i/a.example/a.example.crt", []byte("x"))
	if err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "Bad token") {
		t.Fatalf("%v, want the problem's status and title", err)
	}
}

func setLockTiming(retry, restamp time.Duration) func() {
	oldRetry, oldRestamp := lockRetryInterval, lockRestampInterval
	lockRetryInterval, lockRestampInterval = retry, restamp
	return func() { lockRetryInterval, lockRestampInterval = oldRetry, oldRestamp }
}

func FuzzKeyPath(f *testing.F) {
	for _, s := range []string{"certificates/i/a.example/a.example.crt", "a b/%2F/+", "issue_cert_*.x", "ocsp/ü-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		p := keyPath(key)
		parts := strings.Split(p, "/")
		if len(parts) != len(strings.Split(key, "/")) {
			t.Fatalf("%q -> %q changed the number of segments", key, p)
		}
		for i, part := range parts {
			d, err := url.PathUnescape(part)
			if err != nil || d != strings.Split(key, "/")[i] {
				t.Fatalf("%q -> %q does not decode back (%v)", key, p, err)
			}
			if strings.ContainsAny(part, "?#") {
				t.Fatalf("%q -> %q leaves a query or fragment character", key, p)
			}
		}
		_, _ = classifyKey(key)
		_, _ = classifyLock(key)
	})
}
