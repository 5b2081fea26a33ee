package app

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestHTTPLimitsFromEnv(t *testing.T) {
	t.Parallel()
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	l, err := HTTPLimitsFromEnv(env(nil))
	if err != nil || l != (HTTPLimits{ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: time.Minute, IdleTimeout: 2 * time.Minute, MaxConns: 4096}) {
		t.Fatalf("defaults: %+v, %v", l, err)
	}
	l, err = HTTPLimitsFromEnv(env(map[string]string{"RATH_HTTP_READ_TIMEOUT": "2s", "RATH_HTTP_MAX_CONNS": "150"}))
	if err != nil || l.ReadTimeout != 2*time.Second || l.MaxConns != 150 || l.WriteTimeout != time.Minute {
		t.Fatalf("set: %+v, %v", l, err)
	}
	for k, v := range map[string]string{
		"RATH_HTTP_READ_TIMEOUT": "soon", "RATH_HTTP_WRITE_TIMEOUT": "-1s", "RATH_HTTP_IDLE_TIMEOUT": "0s",
		"RATH_HTTP_MAX_CONNS": "0", "RATH_HTTP_READ_HEADER_TIMEOUT": "10",
	} {
		if _, err := HTTPLimitsFromEnv(env(map[string]string{k: v})); err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%q: %v; want an error naming it", k, v, err)
		}
	}
	if err := (HTTPLimits{MaxConns: -1}).Validate(); err == nil || !strings.Contains(err.Error(), "MaxConns") {
		t.Errorf("MaxConns -1: %v", err)
	}
	if err := (HTTPLimits{WriteTimeout: -time.Second}).Validate(); err == nil || !strings.Contains(err.Error(), "WriteTimeout") {
		t.Errorf("WriteTimeout -1s: %v", err)
	}
}

// A client that sends its body slowly is cut off by the read timeout, and
// connections past MaxConns wait: the cap holds while slow clients hold
// their connections, and frees as the timeout closes them.
func TestHTTPLimitsSlowClients(t *testing.T) {
	t.Parallel()
	l := HTTPLimits{ReadTimeout: 300 * time.Millisecond, MaxConns: 4}
	ctx, cancel := context.WithCancel(context.Background())
	ln, err := l.Listen(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := l.Server(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusRequestTimeout)
			return
		}
		_, _ = w.Write([]byte("ok"))
	}))
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { cancel(); srv.Close(); <-done })

	addr := ln.Addr().String()
	closed := make(chan struct{}, 8)
	for range 8 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\npartial")
		go func() { _, _ = io.Copy(io.Discard, c); closed <- struct{}{} }()
	}
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for i := range 8 {
		select {
		case <-closed:
		case <-timeout.C:
			t.Fatalf("%d of 8 slow connections closed within 10 s; want all (read timeout 300 ms, cap 4)", i)
		}
	}
	res, err := http.Post("http://"+addr+"/", "text/plain", strings.NewReader("fast"))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("a prompt request after the slow ones: %d", res.StatusCode)
	}
}
