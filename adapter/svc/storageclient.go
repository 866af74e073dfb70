package svc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// storageClient speaks storage protocol v1 (docs/ingress.md "The storage protocol (version 1)")
// to one fleet's node with that fleet's token. It never retries: certmagic
// decides what to do with a failure.
type storageClient struct {
	fleet    string
	endpoint string
	token    string
	timeout  time.Duration
	http     *http.Client
}

// maxStorageValue bounds a value read back (certificates and ACME state are
// small; the node refuses more than 16 MiB).
const maxStorageValue = 32 << 20

func newStorageClient(spec fleetSpec, rt http.RoundTripper) *storageClient {
	return &storageClient{
		fleet: spec.Name, endpoint: spec.Endpoint, token: spec.Token,
		timeout: spec.StorageTimeout, http: &http.Client{Transport: rt},
	}
}

// keyPath maps a key onto a path: each component percent-encoded (everything
// but unreserved characters), separators kept.
func keyPath(key string) string {
	parts := strings.Split(key, "/")
	for i, p := range parts {
		parts[i] = escapeComponent(p)
	}
	return strings.Join(parts, "/")
}

func escapeComponent(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// do sends one request bounded by the storage timeout (when bounded is true)
// and returns the status and body.
func (c *storageClient) do(ctx context.Context, method, path string, body []byte, header http.Header, bounded bool) (int, []byte, error) {
	if bounded {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	var reader io.Reader
	if body != nil {
		reader = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.endpoint+path, reader)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("X-Svc-Storage-Version", "1")
	if body != nil {
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("fleet %s storage: %w", c.fleet, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxStorageValue+1))
	if err != nil {
		return 0, nil, fmt.Errorf("fleet %s storage: reading %s %s: %w", c.fleet, method, path, err)
	}
	if len(data) > maxStorageValue {
		return 0, nil, fmt.Errorf("fleet %s storage: %s %s answered more than %d bytes", c.fleet, method, path, maxStorageValue)
	}
	if resp.StatusCode/100 != 2 && resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusConflict {
		err := problemError(method+" "+strings.SplitN(path, "?", 2)[0], resp, data)
		return resp.StatusCode, data, fmt.Errorf("fleet %s storage: %w", c.fleet, err)
	}
	return resp.StatusCode, data, nil
}

// notFound wraps fs.ErrNotExist, which certmagic expects for missing keys.
func notFound(fleet, key string) error {
	return fmt.Errorf("fleet %s: %q: %w", fleet, key, fs.ErrNotExist)
}

func unexpected(fleet, what string, status int) error {
	return fmt.Errorf("fleet %s storage: %s answered %d %s", fleet, what, status, http.StatusText(status))
}

func (c *storageClient) put(ctx context.Context, key string, value []byte) error {
	if value == nil {
		value = []byte{}
	}
	status, _, err := c.do(ctx, http.MethodPut, "/v1/storage/objects/"+keyPath(key), value, nil, true)
	if err != nil {
		return err
	}
	if status/100 != 2 {
		return unexpected(c.fleet, "PUT "+key, status)
	}
	return nil
}

func (c *storageClient) get(ctx context.Context, key string) ([]byte, error) {
	status, body, err := c.do(ctx, http.MethodGet, "/v1/storage/objects/"+keyPath(key), nil, nil, true)
	if err != nil {
		return nil, err
	}
	switch {
	case status == http.StatusNotFound:
		return nil, notFound(c.fleet, key)
	case status/100 != 2:
		return nil, unexpected(c.fleet, "GET "+key, status)
	}
	return body, nil
}

// del removes a key and its subtree; a missing key is not an error (the
// certmagic.Storage contract for Delete).
func (c *storageClient) del(ctx context.Context, key string) error {
	status, _, err := c.do(ctx, http.MethodDelete, "/v1/storage/objects/"+keyPath(key), nil, nil, true)
	if err != nil {
		return err
	}
	if status/100 != 2 && status != http.StatusNotFound {
		return unexpected(c.fleet, "DELETE "+key, status)
	}
	return nil
}

// list answers full keys under prefix ("" lists everything). Keys the node
// answers outside the prefix are dropped: a listing that ignored its prefix
// must never reach certmagic's cleanup.
func (c *storageClient) list(ctx context.Context, prefix string, recursive bool) ([]string, error) {
	q := url.Values{}
	q.Set("prefix", prefix)
	if recursive {
		q.Set("recursive", "true")
	}
	status, body, err := c.do(ctx, http.MethodGet, "/v1/storage/list?"+q.Encode(), nil, nil, true)
	if err != nil {
		return nil, err
	}
	switch {
	case status == http.StatusNotFound:
		return nil, notFound(c.fleet, prefix)
	case status/100 != 2:
		return nil, unexpected(c.fleet, "list "+prefix, status)
	}
	var keys []string
	if err := json.Unmarshal(body, &keys); err != nil {
		return nil, fmt.Errorf("fleet %s storage: the listing of %q is not a JSON array of keys: %v", c.fleet, prefix, err)
	}
	out := keys[:0]
	for _, k := range keys {
		if underPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		return nil, notFound(c.fleet, prefix)
	}
	return out, nil
}

// underPrefix reports whether key is prefix itself or below it.
func underPrefix(key, prefix string) bool {
	if prefix == "" {
		return key != ""
	}
	return key == prefix || strings.HasPrefix(key, prefix+"/")
}

// statObject is the node's stat answer.
type statObject struct {
	Key        string  `json:"key"`
	Modified   *string `json:"modified"`
	Size       int64   `json:"size"`
	IsTerminal bool    `json:"isTerminal"`
}

func (c *storageClient) stat(ctx context.Context, key string) (statObject, time.Time, error) {
	q := url.Values{}
	q.Set("key", key)
	status, body, err := c.do(ctx, http.MethodGet, "/v1/storage/stat?"+q.Encode(), nil, nil, true)
	if err != nil {
		return statObject{}, time.Time{}, err
	}
	switch {
	case status == http.StatusNotFound:
		return statObject{}, time.Time{}, notFound(c.fleet, key)
	case status/100 != 2:
		return statObject{}, time.Time{}, unexpected(c.fleet, "stat "+key, status)
	}
	var st statObject
	if err := json.Unmarshal(body, &st); err != nil {
		return statObject{}, time.Time{}, fmt.Errorf("fleet %s storage: the stat of %q does not parse: %v", c.fleet, key, err)
	}
	var modified time.Time
	if st.Modified != nil && *st.Modified != "" {
		modified, err = time.Parse(time.RFC3339Nano, *st.Modified)
		if err != nil {
			return statObject{}, time.Time{}, fmt.Errorf("fleet %s storage: the stat of %q has a bad modified time: %v", c.fleet, key, err)
		}
	}
	return st, modified, nil
}

// lockToken is the header naming one lock acquisition; a POST carrying the
// holder's token restamps instead of conflicting.
const lockTokenHeader = "X-Svc-Lock-Token"

// tryLock asks for the lock once: true when granted (or restamped), false on
// 409 cas-conflict; any other answer is an error.
func (c *storageClient) tryLock(ctx context.Context, name, token string) (bool, error) {
	status, _, err := c.do(ctx, http.MethodPost, "/v1/storage/locks/"+keyPath(name), nil, http.Header{lockTokenHeader: {token}}, true)
	if err != nil {
		return false, err
	}
	switch {
	case status == http.StatusConflict:
		return false, nil
	case status/100 != 2:
		return false, unexpected(c.fleet, "lock "+name, status)
	}
	return true, nil
}

func (c *storageClient) unlock(ctx context.Context, name, token string) error {
	status, _, err := c.do(ctx, http.MethodDelete, "/v1/storage/locks/"+keyPath(name), nil, http.Header{lockTokenHeader: {token}}, true)
	if err != nil {
		return err
	}
	if status/100 != 2 {
		return unexpected(c.fleet, "unlock "+name, status)
	}
	return nil
}
