package svc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/svc-dev/svc/adapter/routing"
)

// Poller behaviour (docs/adapter.md "Polling"): one poller per fleet,
// shared across configuration reloads through a usage pool; the last document
// that parsed keeps answering through failures; identical bytes are dropped;
// a `v` other than 1 is refused whole; the wait is measured from the end of
// one attempt to the start of the next.

// pollers holds every running poller, keyed by pollKey. A configuration takes
// its references during provisioning and releases them in Cleanup, which
// Caddy runs for the old configuration only after the new one provisioned:
// a poller both use never stops.
var pollers = caddy.NewUsagePool()

// maxDocumentBytes bounds a routing document (10,000 applications render to a
// few megabytes).
const maxDocumentBytes = 64 << 20

// poller fetches one fleet's routing document.
type poller struct {
	spec   fleetSpec
	client *http.Client
	logger *zap.Logger

	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{}

	firstOnce sync.Once
	firstDone chan struct{} // closed when the first attempt completed

	mu       sync.Mutex
	doc      *routing.Document
	body     []byte // bytes of doc, to drop identical fetches
	failure  string // last failure logged; "" while healthy
	attempts int
	subs     map[*subscription]struct{}
}

// subscription is one configuration's interest in a poller's changes.
type subscription struct{ notify func() }

func newPoller(spec fleetSpec, transport http.RoundTripper, logger *zap.Logger) *poller {
	return &poller{
		spec:      spec,
		client:    &http.Client{Transport: transport},
		logger:    logger.With(zap.String("fleet", spec.Name), zap.String("endpoint", spec.Endpoint)),
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
		firstDone: make(chan struct{}),
		subs:      map[*subscription]struct{}{},
	}
}

// start runs the polling loop; the first attempt happens at once.
func (p *poller) start() {
	go p.loop()
}

// Destruct stops the loop; the usage pool calls it when the last
// configuration using the poller released it.
func (p *poller) Destruct() error {
	p.stopOnce.Do(func() { close(p.stop) })
	<-p.done
	p.logger.Debug("poller stopped")
	return nil
}

func (p *poller) loop() {
	defer close(p.done)
	for {
		p.attempt()
		p.firstOnce.Do(func() { close(p.firstDone) })
		timer := time.NewTimer(p.spec.PollInterval)
		select {
		case <-p.stop:
			timer.Stop()
			return
		case <-timer.C:
		}
	}
}

// waitFirst waits until the first attempt completed (or ctx ends), so a
// configuration being provisioned starts with whatever the fleet answered.
func (p *poller) waitFirst(ctx context.Context) {
	select {
	case <-p.firstDone:
	case <-ctx.Done():
	case <-p.done:
	}
}

// current is the last document that parsed, nil before the first.
func (p *poller) current() *routing.Document {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.doc
}

func (p *poller) subscribe(notify func()) *subscription {
	s := &subscription{notify: notify}
	p.mu.Lock()
	p.subs[s] = struct{}{}
	p.mu.Unlock()
	return s
}

func (p *poller) unsubscribe(s *subscription) {
	p.mu.Lock()
	delete(p.subs, s)
	p.mu.Unlock()
}

// attempt fetches once and publishes a changed document.
func (p *poller) attempt() {
	ctx, cancel := context.WithTimeout(context.Background(), p.spec.Timeout)
	defer cancel()
	go func() {
		select {
		case <-p.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	body, err := p.fetch(ctx)
	var doc *routing.Document
	if err == nil {
		p.mu.Lock()
		same := p.doc != nil && bytes.Equal(body, p.body)
		p.mu.Unlock()
		if same {
			p.healthy(nil)
			return
		}
		doc, err = routing.Parse(body)
		if err != nil && errors.Is(err, routing.ErrVersion) {
			err = fmt.Errorf("%w; keeping the last document this adapter understood", err)
		}
	}
	if err != nil {
		select {
		case <-p.stop:
			return // stopping: not a fleet failure
		default:
		}
		p.failed(err)
		return
	}
	p.mu.Lock()
	p.doc, p.body = doc, body
	subs := make([]*subscription, 0, len(p.subs))
	for s := range p.subs {
		subs = append(subs, s)
	}
	p.mu.Unlock()
	p.healthy(doc)
	for _, s := range subs {
		s.notify()
	}
}

// healthy logs a recovery or a new document; doc is nil when the fetch
// answered the same bytes.
func (p *poller) healthy(doc *routing.Document) {
	p.mu.Lock()
	recovered := p.failure != ""
	p.failure = ""
	p.attempts++
	p.mu.Unlock()
	switch {
	case doc != nil:
		api := 0
		if doc.API != nil {
			api = len(doc.API.Hosts)
		}
		p.logger.Info("routing document received", zap.Int("routes", len(doc.Routes)), zap.Int("api_hosts", api), zap.Bool("recovered", recovered))
	case recovered:
		p.logger.Info("routing fetch recovered; document unchanged")
	}
}

func (p *poller) failed(err error) {
	msg := err.Error()
	p.mu.Lock()
	changed := p.failure != msg
	p.failure = msg
	p.attempts++
	holding := p.doc != nil
	p.mu.Unlock()
	if changed {
		if holding {
			p.logger.Error("routing fetch failed; serving the last document", zap.Error(err))
		} else {
			p.logger.Error("routing fetch failed; no document yet, this fleet's hosts are unavailable", zap.Error(err))
		}
	}
}

// routesURL is the routing document's URL, with ?prefer= unless prefer is none.
func (p *poller) routesURL() string {
	u := p.spec.Endpoint + "/v1/ingress/routes"
	if p.spec.Prefer != "" {
		u += "?prefer=" + url.QueryEscape(p.spec.Prefer)
	}
	return u
}

func (p *poller) fetch(ctx context.Context) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.routesURL(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+p.spec.Token)
	req.Header.Set("Accept", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocumentBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the routing document: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, problemError("GET /v1/ingress/routes", resp, body)
	}
	if len(body) > maxDocumentBytes {
		return nil, fmt.Errorf("the routing document is larger than %d bytes", maxDocumentBytes)
	}
	return body, nil
}

// problemError reports a non-2xx answer by its problem document's title and
// detail when present, otherwise by the status alone (docs/api.md "Conventions"). A 503
// `urn:svc:draining` (routing not known yet) is a failure like any other.
func problemError(what string, resp *http.Response, body []byte) error {
	e := &httpError{what: what, status: resp.StatusCode}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt == "application/problem+json" || mt == "application/json" {
		var problem struct {
			Type   string `json:"type"`
			Title  string `json:"title"`
			Detail string `json:"detail"`
		}
		if json.Unmarshal(body, &problem) == nil {
			e.problemType, e.title, e.detail = problem.Type, problem.Title, problem.Detail
		}
	}
	return e
}

// httpError is a non-2xx answer of the node.
type httpError struct {
	what        string
	status      int
	problemType string
	title       string
	detail      string
}

func (e *httpError) Error() string {
	msg := fmt.Sprintf("%s: %d %s", e.what, e.status, http.StatusText(e.status))
	if e.title != "" {
		msg += ": " + e.title
	}
	if e.detail != "" {
		msg += ": " + e.detail
	}
	return msg
}
