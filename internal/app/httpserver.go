package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"golang.org/x/net/netutil"
)

// HTTPLimits bound what clients can hold of an HTTP server: how long a
// request may take to arrive and its response to leave, how long an idle
// keep-alive connection stays, and how many connections are open at once.
// Without them a client that sends its request slowly holds a connection
// (and a file descriptor) forever, and enough such clients take the
// server down (slowloris). Handlers that legitimately outlast the
// timeouts (event streams, long polls) extend their own deadlines after
// authenticating (http.ResponseController). Zero fields take the
// defaults; negative ones are errors.
type HTTPLimits struct {
	// ReadHeaderTimeout bounds reading a request's headers; default 10s.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included; default
	// 30s.
	ReadTimeout time.Duration
	// WriteTimeout bounds a request from the end of its headers to the
	// end of its response; default 60s.
	WriteTimeout time.Duration
	// IdleTimeout bounds how long a keep-alive connection waits for its
	// next request; default 120s.
	IdleTimeout time.Duration
	// MaxConns caps the open connections; past it, new connections wait
	// in the listen backlog until one closes. Default 4096. Keep it under
	// the process's open-file limit less what its database and NATS
	// connections need.
	MaxConns int
}

// Defaults of HTTPLimits for an API server.
const (
	DefaultHTTPReadHeaderTimeout = 10 * time.Second
	DefaultHTTPReadTimeout       = 30 * time.Second
	DefaultHTTPWriteTimeout      = 60 * time.Second
	DefaultHTTPIdleTimeout       = 120 * time.Second
	DefaultHTTPMaxConns          = 4096
)

// HealthHTTPLimits are the limits of a health and metrics listener: its
// clients are probes and scrapers on the operator's network, so short
// timeouts and a small cap.
var HealthHTTPLimits = HTTPLimits{
	ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 5 * time.Second, WriteTimeout: 30 * time.Second,
	IdleTimeout: 60 * time.Second, MaxConns: 64,
}

// WithDefaults returns l with every zero field set to its default.
func (l HTTPLimits) WithDefaults() HTTPLimits {
	l.ReadHeaderTimeout = cmp.Or(l.ReadHeaderTimeout, DefaultHTTPReadHeaderTimeout)
	l.ReadTimeout = cmp.Or(l.ReadTimeout, DefaultHTTPReadTimeout)
	l.WriteTimeout = cmp.Or(l.WriteTimeout, DefaultHTTPWriteTimeout)
	l.IdleTimeout = cmp.Or(l.IdleTimeout, DefaultHTTPIdleTimeout)
	l.MaxConns = cmp.Or(l.MaxConns, DefaultHTTPMaxConns)
	return l
}

// Validate reports a negative field, naming it.
func (l HTTPLimits) Validate() error {
	for _, f := range []struct {
		name string
		d    time.Duration
	}{
		{"ReadHeaderTimeout", l.ReadHeaderTimeout}, {"ReadTimeout", l.ReadTimeout},
		{"WriteTimeout", l.WriteTimeout}, {"IdleTimeout", l.IdleTimeout},
	} {
		if f.d < 0 {
			return fmt.Errorf("http limits: %s %s: want > 0 (0: the default)", f.name, f.d)
		}
	}
	if l.MaxConns < 0 {
		return fmt.Errorf("http limits: MaxConns %d: want > 0 (0: the default %d)", l.MaxConns, DefaultHTTPMaxConns)
	}
	return nil
}

// HTTPLimitsFromEnv reads an API server's limits from RATH_HTTP_READ_HEADER_TIMEOUT,
// RATH_HTTP_READ_TIMEOUT, RATH_HTTP_WRITE_TIMEOUT, RATH_HTTP_IDLE_TIMEOUT
// (Go durations) and RATH_HTTP_MAX_CONNS; unset ones take the defaults.
func HTTPLimitsFromEnv(getenv func(string) string) (HTTPLimits, error) {
	var l HTTPLimits
	for _, f := range []struct {
		env string
		d   *time.Duration
	}{
		{"RATH_HTTP_READ_HEADER_TIMEOUT", &l.ReadHeaderTimeout}, {"RATH_HTTP_READ_TIMEOUT", &l.ReadTimeout},
		{"RATH_HTTP_WRITE_TIMEOUT", &l.WriteTimeout}, {"RATH_HTTP_IDLE_TIMEOUT", &l.IdleTimeout},
	} {
		if s := getenv(f.env); s != "" {
			d, err := time.ParseDuration(s)
			if err != nil || d <= 0 {
				return HTTPLimits{}, fmt.Errorf("%s=%q: want a positive Go duration such as 30s", f.env, s)
			}
			*f.d = d
		}
	}
	if s := getenv("RATH_HTTP_MAX_CONNS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			return HTTPLimits{}, fmt.Errorf("RATH_HTTP_MAX_CONNS=%q: want a positive integer", s)
		}
		l.MaxConns = n
	}
	return l.WithDefaults(), nil
}

// Server returns an http.Server with l's timeouts serving h. Serve it on
// a listener from [HTTPLimits.Listen], which applies MaxConns.
func (l HTTPLimits) Server(h http.Handler) *http.Server {
	l = l.WithDefaults()
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
	}
}

// Listen listens on addr (TCP) and caps the connections it accepts at
// MaxConns.
func (l HTTPLimits) Listen(ctx context.Context, addr string) (net.Listener, error) {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return l.Limit(ln), nil
}

// Limit caps the connections ln accepts at MaxConns.
func (l HTTPLimits) Limit(ln net.Listener) net.Listener {
	return netutil.LimitListener(ln, l.WithDefaults().MaxConns)
}

// ServeHTTP serves h on addr under l until ctx ends, then shuts the server
// down, giving requests in flight up to grace to finish.
func ServeHTTP(ctx context.Context, addr string, h http.Handler, l HTTPLimits, grace time.Duration) error {
	if err := l.Validate(); err != nil {
		return err
	}
	ln, err := l.Listen(ctx, addr)
	if err != nil {
		return err
	}
	return serve(ctx, ln, h, l, grace)
}

// Serve is [ServeHTTP] on a listener the caller opened with
// [HTTPLimits.Listen] (to learn the port it was given for addr ":0", say).
// It closes ln.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, l HTTPLimits, grace time.Duration) error {
	if err := l.Validate(); err != nil {
		ln.Close()
		return err
	}
	return serve(ctx, ln, h, l, grace)
}

// serve is Serve on limits already validated.
func serve(ctx context.Context, ln net.Listener, h http.Handler, l HTTPLimits, grace time.Duration) error {
	addr := ln.Addr().String()
	srv := l.Server(h)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	err := srv.Serve(ln)
	cancel()
	<-stopped
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("serve %s: %w", addr, err)
}
