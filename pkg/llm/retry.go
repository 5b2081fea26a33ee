package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"
)

// callState carries one Chat call's body patch into bodyPatcher and what the
// last HTTP response said back out of it.
type callState struct {
	patch map[string]json.RawMessage

	mu         sync.Mutex // guards following
	calls      int
	status     int
	retryAfter time.Duration
}

type callStateKey struct{}

// bodyPatcher is the HTTP client go-openai calls. It rewrites the JSON body
// with the call's patch (fields go-openai cannot express: an explicit zero
// temperature, raw response_format, extra fields, messages with content
// always present) and records the status and Retry-After of the response.
type bodyPatcher struct {
	next *http.Client
}

// Do implements go-openai's HTTPDoer.
func (b *bodyPatcher) Do(req *http.Request) (*http.Response, error) {
	st, _ := req.Context().Value(callStateKey{}).(*callState)
	if st == nil {
		return b.next.Do(req)
	}
	if len(st.patch) > 0 && req.Body != nil {
		raw, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, err
		}
		var body map[string]json.RawMessage
		if err := json.Unmarshal(raw, &body); err != nil {
			return nil, fmt.Errorf("patch request body: %w", err)
		}
		for k, v := range st.patch {
			body[k] = v
		}
		if raw, err = json.Marshal(body); err != nil {
			return nil, fmt.Errorf("patch request body: %w", err)
		}
		req.Body = io.NopCloser(bytes.NewReader(raw))
		req.ContentLength = int64(len(raw))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil }
	}
	st.mu.Lock()
	st.calls++
	st.status, st.retryAfter = 0, 0
	st.mu.Unlock()
	resp, err := b.next.Do(req)
	if err == nil {
		st.mu.Lock()
		st.status = resp.StatusCode
		st.retryAfter = parseRetryAfter(resp.Header, time.Now())
		st.mu.Unlock()
	}
	return resp, err
}

// parseRetryAfter reads retry-after-ms (OpenAI's) or Retry-After (seconds
// or an HTTP date). It returns 0 when neither is present or parseable.
func parseRetryAfter(h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && ms < 1e12 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 || s > 1e9 {
			return 0
		}
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

// attemptFunc makes one HTTP call. emitted reports whether text reached the
// caller, after which the call must not be repeated.
type attemptFunc func(ctx context.Context) (r Response, emitted bool, err error)

func (p *OpenAI) withRetry(ctx context.Context, op string, patch map[string]json.RawMessage, attempt attemptFunc) (Response, error) {
	st := &callState{patch: patch}
	for n := 1; ; n++ {
		actx, cancel := context.WithTimeout(context.WithValue(ctx, callStateKey{}, st), p.cfg.Timeout)
		r, emitted, err := attempt(actx)
		cancel()
		if err == nil {
			return r, nil
		}
		e := p.classify(ctx, op, err, st)
		e.Attempts = n
		if !e.Transient || ctx.Err() != nil || emitted || n >= p.cfg.MaxAttempts {
			return Response{}, e
		}
		wait := e.RetryAfter
		if wait > p.cfg.MaxDelay {
			return Response{}, e // the server wants more than we hold a step for
		}
		if wait == 0 {
			wait = backoff(n, p.cfg.BaseDelay, p.cfg.MaxDelay)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			ce := ctxError(ctx, op, n)
			return Response{}, ce
		case <-t.C:
		}
	}
}

// backoff is full jitter: uniform in [0, min(max, base·2^(n-1))].
func backoff(n int, base, maxDelay time.Duration) time.Duration {
	d := maxDelay
	if n-1 < 40 {
		if c := base << (n - 1); c > 0 && c < maxDelay {
			d = c
		}
	}
	if d <= 0 {
		return 0
	}
	return rand.N(d + 1)
}

// ctxError is the error for a call whose caller's context ended.
func ctxError(ctx context.Context, op string, attempts int) *Error {
	cause := context.Cause(ctx)
	if cause == nil {
		cause = ctx.Err()
	}
	return &Error{Op: op, Message: cause.Error(), Attempts: attempts, Transient: true, cause: ctx.Err()}
}

// classify turns whatever go-openai or the transport returned into an
// *Error, redacting the key.
func (p *OpenAI) classify(ctx context.Context, op string, err error, st *callState) *Error {
	if ctx.Err() != nil {
		return ctxError(ctx, op, 0)
	}
	st.mu.Lock()
	calls, status, retryAfter := st.calls, st.status, st.retryAfter
	st.mu.Unlock()
	e := &Error{Op: op, StatusCode: status}
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		e.RetryAfter = retryAfter
	}
	var apiErr *openai.APIError
	var reqErr *openai.RequestError
	switch {
	case errors.As(err, &apiErr):
		e.Message = apiErr.Message
		e.Type = apiErr.Type
		switch c := apiErr.Code.(type) {
		case nil:
		case int:
			if c != 0 { // go-openai decodes a null code as 0
				e.Code = fmt.Sprint(c)
			}
		default:
			e.Code = fmt.Sprint(c)
		}
		if apiErr.HTTPStatusCode != 0 {
			e.StatusCode = apiErr.HTTPStatusCode
			e.Transient = retryableStatus(e.StatusCode)
		} else {
			// An error event inside a 200 stream.
			e.StatusCode = 0
			e.Transient = apiErr.Type != "invalid_request_error"
			e.Message = "error event in stream: " + e.Message
		}
	case errors.As(err, &reqErr):
		e.StatusCode = reqErr.HTTPStatusCode
		e.Transient = retryableStatus(e.StatusCode)
		// Redact before truncating, so a cut cannot split the key.
		e.Message = "body: " + truncate(redact(string(reqErr.Body), p.cfg.APIKey), 512)
	case errors.Is(err, context.DeadlineExceeded):
		e.Transient = true
		e.Message = fmt.Sprintf("no complete reply within the %s timeout", p.cfg.Timeout)
	case errors.Is(err, errNoChoices), errors.Is(err, errTruncatedStream):
		e.Transient = true
		e.Message = err.Error()
	case isDecodeError(err):
		e.Transient = true
		e.Message = "malformed reply: " + err.Error()
	case calls == 0:
		// Refused before any HTTP call: go-openai's request validation.
		e.Message = err.Error()
	default:
		// The transport failed: refused, reset or dropped connections.
		e.Transient = true
		e.Message = "connection: " + err.Error()
	}
	if e.StatusCode != 0 && e.StatusCode < 400 {
		// A success status whose body could not be used: a proxy cut it
		// or mangled it, which a retry may not repeat.
		e.Transient = true
	}
	e.Message = redact(e.Message, p.cfg.APIKey)
	e.Type = redact(e.Type, p.cfg.APIKey)
	e.Code = redact(e.Code, p.cfg.APIKey)
	return e
}

func retryableStatus(code int) bool {
	return code == http.StatusTooManyRequests || code >= 500
}

func isDecodeError(err error) bool {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	return errors.As(err, &se) || errors.As(err, &te)
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…(truncated)"
}

// readLimited reads r to its end, refusing more than limit bytes.
func readLimited(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("larger than the %d byte limit", limit)
	}
	return b, nil
}
