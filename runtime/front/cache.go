package main

// The Cache API's service (docs/runtime.md "Cache API"): each instance's workerd sends
// `caches.default` and `caches.open()` calls (its `cacheApiOutbound`) to a Unix socket in the
// instance's folder, which the front listens on while the instance runs. svc keeps no response
// cache: the socket answers as an always-empty cache, in workerd's cache protocol. `match` is a
// GET answered 504 with `Cf-Cache-Status: MISS`; `put` a PUT whose body (the response to keep) is
// read and dropped, answered 204; `delete` a PURGE answered 404 (nothing was there). Any other
// method is answered as a miss.

import (
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// cacheSocketName is the cache socket's name in the instance's folder. The runtime host names it
// too, in the workerd config it writes: runtime/src/instance.ts `CACHE_SOCKET`.
const cacheSocketName = "cache.sock"

// cacheSocketPath is where the instance in folder `dir` has its cache socket.
func cacheSocketPath(dir string) string { return filepath.Join(dir, cacheSocketName) }

// cacheHandler answers workerd's cache calls as an always-empty cache.
func cacheHandler(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPut:
		// The response to keep: read to its end, so workerd's put completes, and dropped.
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	case "PURGE":
		w.WriteHeader(http.StatusNotFound)
	default:
		w.Header().Set("Cf-Cache-Status", "MISS")
		w.WriteHeader(http.StatusGatewayTimeout)
	}
}

// cacheServer is one instance's cache socket and the server answering on it.
type cacheServer struct {
	path   string
	server *http.Server
	once   sync.Once
}

// listenCache removes a stale socket at the instance's cache socket path, listens there and
// answers on it until close.
func listenCache(dir string) (*cacheServer, error) {
	path := cacheSocketPath(dir)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("cannot remove the stale cache socket %s: %v", path, err)
	}
	listener, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("cannot listen on the cache socket: %v", err)
	}
	c := &cacheServer{
		path: path,
		server: &http.Server{
			Handler:           http.HandlerFunc(cacheHandler),
			ReadHeaderTimeout: 30 * time.Second,
			ErrorLog:          log.New(io.Discard, "", 0),
		},
	}
	go func() { _ = c.server.Serve(listener) }()
	return c, nil
}

// close stops answering and removes the socket; calling it again does nothing.
func (c *cacheServer) close() {
	if c == nil {
		return
	}
	c.once.Do(func() {
		_ = c.server.Close()
		_ = os.Remove(c.path)
	})
}
