// Package client is the Go client of the coordinator's HTTP API
// (docs/api.md). rathctl uses it; so can programs.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/rath-run/rath/pkg/api"
)

// Client talks to one coordinator. It is safe for concurrent use.
type Client struct {
	base  string
	token string
	http  *http.Client
}

// New returns a client for the coordinator at baseURL (http://host:port).
// token, when set, is sent as a bearer token.
//
// The client sends through http.DefaultTransport as it is when New is
// called: a program that wrapped it before (rathctl wraps it with
// otelhttp, so its requests carry the command's traceparent) gets its
// wrapper; the standard default is replaced by a shared pool with more
// idle connections (see pooled).
func New(baseURL, token string) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: server URL %q: want http://host:port", baseURL)
	}
	return &Client{base: strings.TrimRight(baseURL, "/"), token: token, http: &http.Client{Transport: transport()}}, nil
}

// transport returns what a new client sends through: the pooled clone of
// the standard default transport, or http.DefaultTransport itself when a
// program replaced it with a wrapper of its own.
func transport() http.RoundTripper {
	rt := http.DefaultTransport
	if t, ok := rt.(*http.Transport); ok {
		return pooled(t)
	}
	return rt
}

// PooledTransport returns the connection pool clients share: a clone of
// the standard default transport, made once, keeping up to 1,024 idle
// connections per host. A program that replaces http.DefaultTransport
// with a wrapper (rathctl traces requests with otelhttp) wraps this
// instead: clients send through such a wrapper as it is, and a wrapped
// standard default keeps Go's 2 idle connections per host, so concurrent
// requests beyond them dial again.
func PooledTransport() *http.Transport {
	if std == nil { // replaced in an init before this package's
		return pooled(&http.Transport{Proxy: http.ProxyFromEnvironment, ForceAttemptHTTP2: true})
	}
	return pooled(std)
}

// std is http.DefaultTransport as the standard library made it: read when
// this package is initialized, before a program's main can replace it.
var std, _ = http.DefaultTransport.(*http.Transport)

// pooled returns the clients' connection pool, cloned once from the
// standard default transport t. http.DefaultTransport keeps 2 idle
// connections per host: a workflow driver with 1,000 steps waiting at once
// (each a long-poll holding a connection) would close ~998 of them as they
// end and dial again for its next requests.
func pooled(t *http.Transport) *http.Transport {
	pool.once.Do(func() {
		pool.t = t.Clone()
		pool.t.MaxIdleConns, pool.t.MaxIdleConnsPerHost = 1024, 1024
	})
	return pool.t
}

var pool struct {
	once sync.Once
	t    *http.Transport
}

// APIError is an error response from the coordinator: its HTTP status
// and the body's code (one of api.Code…) and message.
type APIError struct {
	Status  int
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error returns the message with the status and code, such as
// "no such version (404 not_found)".
func (e *APIError) Error() string { return fmt.Sprintf("%s (%d %s)", e.Message, e.Status, e.Code) }

// ErrNotFound matches an APIError with status 404 through errors.Is.
var ErrNotFound = errors.New("not found")

// ErrNondeterministic matches an APIError with code "nondeterministic"
// through errors.Is: a re-executed workflow put a step key with another
// input or call than recorded (see [Client.AcceptChanges]).
var ErrNondeterministic = errors.New("nondeterministic")

// Is reports whether target is ErrNotFound and e a 404, or
// ErrNondeterministic and e's code "nondeterministic".
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.Status == http.StatusNotFound
	case ErrNondeterministic:
		return e.Code == api.CodeNondeterministic
	}
	return false
}

// Do sends a request with an optional JSON body and decodes a JSON reply
// into out (which may be nil).
func (c *Client) Do(ctx context.Context, method, path string, body, out any) error {
	resp, err := c.send(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode reply: %w", method, path, err)
	}
	return nil
}

// Stream sends a request whose body (nil for none) is read from body with
// the given content type, and copies the reply's body to w: for what is not
// JSON, such as a session's JSONL export. Error replies are [*APIError]s.
func (c *Client) Stream(ctx context.Context, method, path string, body io.Reader, contentType string, w io.Writer) error {
	resp, err := c.sendRaw(ctx, method, path, body, contentType)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("%s %s: read reply: %w", method, path, err)
	}
	return nil
}

func (c *Client) send(ctx context.Context, method, path string, body any) (*http.Response, error) {
	if body == nil {
		return c.sendRaw(ctx, method, path, nil, "")
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: encode body: %w", method, path, err)
	}
	return c.sendRaw(ctx, method, path, bytes.NewReader(b), "application/json")
}

func (c *Client) sendRaw(ctx context.Context, method, path string, body io.Reader, contentType string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		var e api.ErrorResponse
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if json.Unmarshal(raw, &e) != nil || e.Error.Message == "" {
			e.Error = api.ErrorBody{Code: "http", Message: strings.TrimSpace(string(raw))}
		}
		return nil, &APIError{Status: resp.StatusCode, Code: e.Error.Code, Message: e.Error.Message}
	}
	return resp, nil
}
