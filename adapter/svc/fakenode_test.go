package svc

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeNode is a test double of a node's ingress side: the routing document
// and storage protocol v1 (docs/ingress.md), in memory. It stands at the seam the spec
// defines; end-to-end tests against a real node live in test/.
type fakeNode struct {
	t      *testing.T
	server *httptest.Server
	token  string

	mu            sync.Mutex
	routes        func(r *http.Request) (int, string, []byte) // status, content type, body
	routeHits     int
	routeQueries  []string
	objects       map[string][]byte
	modified      map[string]time.Time
	locks         map[string]string // name -> token
	lockPosts     map[string]int
	refuseRestamp bool
	paths         []string // raw request paths of storage requests
}

func newFakeNode(t *testing.T) *fakeNode {
	n := &fakeNode{
		t: t, token: "tok-" + strings.ReplaceAll(t.Name(), "/", "-"),
		objects: map[string][]byte{}, modified: map[string]time.Time{},
		locks: map[string]string{}, lockPosts: map[string]int{},
	}
	n.setDocument(`{"v":1,"routes":[]}`)
	n.server = httptest.NewServer(http.HandlerFunc(n.serve))
	t.Cleanup(n.server.Close)
	return n
}

func (n *fakeNode) setDocument(body string) {
	n.setRoutes(func(*http.Request) (int, string, []byte) { return 200, "application/json", []byte(body) })
}

func (n *fakeNode) setRoutes(f func(r *http.Request) (int, string, []byte)) {
	n.mu.Lock()
	n.routes = f
	n.mu.Unlock()
}

func (n *fakeNode) hits() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.routeHits
}

func (n *fakeNode) problem(w http.ResponseWriter, status int, code, title string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"type": "urn:svc:" + code, "title": title, "status": status, "detail": "fake node"})
}

func (n *fakeNode) serve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+n.token {
		n.problem(w, 401, "auth-invalid", "Bad token")
		return
	}
	path := r.URL.EscapedPath()
	if path == "/v1/ingress/routes" || strings.HasSuffix(path, "/v1/ingress/routes") {
		n.mu.Lock()
		n.routeHits++
		n.routeQueries = append(n.routeQueries, r.URL.RawQuery)
		f := n.routes
		n.mu.Unlock()
		status, ct, body := f(r)
		w.Header().Set("Content-Type", ct)
		w.WriteHeader(status)
		_, _ = w.Write(body)
		return
	}
	if v := r.Header.Get("X-Svc-Storage-Version"); v != "1" {
		n.problem(w, 400, "invalid-input", "Unsupported storage protocol version")
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.paths = append(n.paths, r.Method+" "+r.URL.RequestURI())
	decode := func(tail string) string {
		parts := strings.Split(tail, "/")
		for i, p := range parts {
			d, err := url.PathUnescape(p)
			if err != nil || strings.Contains(d, "/") {
				n.t.Errorf("bad key path %q", tail)
			}
			parts[i] = d
		}
		return strings.Join(parts, "/")
	}
	switch {
	case strings.HasPrefix(path, "/v1/storage/objects/"):
		key := decode(strings.TrimPrefix(path, "/v1/storage/objects/"))
		switch r.Method {
		case http.MethodPut:
			body, _ := io.ReadAll(r.Body)
			n.objects[key] = body
			n.modified[key] = time.Now().UTC()
			w.WriteHeader(204)
		case http.MethodGet:
			v, ok := n.objects[key]
			if !ok {
				n.problem(w, 404, "not-found", "No such key")
				return
			}
			w.Header().Set("Content-Type", "application/octet-stream")
			_, _ = w.Write(v)
		case http.MethodDelete:
			found := false
			for k := range n.objects {
				if k == key || strings.HasPrefix(k, key+"/") {
					delete(n.objects, k)
					found = true
				}
			}
			if !found {
				n.problem(w, 404, "not-found", "No such key")
				return
			}
			w.WriteHeader(204)
		}
	case path == "/v1/storage/list":
		prefix := r.URL.Query().Get("prefix")
		rec := r.URL.Query().Get("recursive")
		recursive := rec == "true" || rec == "1"
		set := map[string]bool{}
		for k := range n.objects {
			var rest string
			if prefix == "" {
				rest = k
			} else if strings.HasPrefix(k, prefix+"/") {
				rest = strings.TrimPrefix(k, prefix+"/")
			} else {
				continue
			}
			base := prefix
			if base != "" {
				base += "/"
			}
			if recursive {
				set[k] = true
				segs := strings.Split(rest, "/")
				for i := 1; i < len(segs); i++ {
					set[base+strings.Join(segs[:i], "/")] = true
				}
			} else {
				first, _, _ := strings.Cut(rest, "/")
				set[base+first] = true
			}
		}
		if len(set) == 0 {
			if _, ok := n.objects[prefix]; ok && prefix != "" {
				set[prefix] = true
			}
		}
		if len(set) == 0 {
			n.problem(w, 404, "not-found", "No such key")
			return
		}
		keys := make([]string, 0, len(set))
		for k := range set {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(keys)
	case path == "/v1/storage/stat":
		key := r.URL.Query().Get("key")
		if v, ok := n.objects[key]; ok {
			_ = json.NewEncoder(w).Encode(map[string]any{"key": key, "modified": n.modified[key].Format(time.RFC3339Nano), "size": len(v), "isTerminal": true})
			return
		}
		for k := range n.objects {
			if strings.HasPrefix(k, key+"/") {
				_ = json.NewEncoder(w).Encode(map[string]any{"key": key, "modified": nil, "size": 0, "isTerminal": false})
				return
			}
		}
		n.problem(w, 404, "not-found", "No such key")
	case strings.HasPrefix(path, "/v1/storage/locks/"):
		name := decode(strings.TrimPrefix(path, "/v1/storage/locks/"))
		token := r.Header.Get("X-Svc-Lock-Token")
		switch r.Method {
		case http.MethodPost:
			n.lockPosts[name]++
			holder, held := n.locks[name]
			if held && holder == token && n.refuseRestamp {
				n.problem(w, 409, "cas-conflict", "Lock is held")
				return
			}
			if held && holder != token {
				n.problem(w, 409, "cas-conflict", "Lock is held")
				return
			}
			n.locks[name] = token
			w.WriteHeader(204)
		case http.MethodDelete:
			delete(n.locks, name)
			w.WriteHeader(204)
		}
	default:
		n.problem(w, 404, "not-found", "Not found")
	}
}

// eventually polls cond until it holds or the deadline passes (no sleeps to wait).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
