package testenv

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy is a TCP proxy in the test process between a client and a server
// (NATS, Postgres) whose link a test can drop: Cut closes every connection
// through it and refuses new ones, as a server or network that went away
// does, until Heal. The client sees its connection end at once (unlike a
// silent partition, which it notices only by its own timeouts). Make one
// with NewProxy; it closes with the test.
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

// NewProxy starts a proxy to target (host:port) on a free local port.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	var lc net.ListenConfig
	ln, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target}
	t.Cleanup(p.close)
	go p.accept()
	return p
}

// Addr is the proxy's host:port, for the client to dial.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every connection through the proxy and refuses new ones
// (each is accepted and closed at once) until Heal.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	p.closeConns()
}

// Heal lets new connections through again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

func (p *Proxy) close() {
	_ = p.ln.Close()
	p.Cut()
}

// closeConns closes the tracked connections; p.mu is held.
func (p *Proxy) closeConns() {
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// admit tracks c, or closes it and reports false while cut.
func (p *Proxy) admit(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		_ = c.Close()
		return false
	}
	p.conns = append(p.conns, c)
	return true
}

func (p *Proxy) accept() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.admit(in) {
			continue
		}
		go func() {
			var d net.Dialer
			out, err := d.DialContext(context.Background(), "tcp", p.target)
			if err != nil {
				_ = in.Close()
				return
			}
			if !p.admit(out) {
				_ = in.Close()
				return
			}
			go pipe(out, in)
			go pipe(in, out)
		}()
	}
}

// pipe copies src to dst until either ends, then closes both.
func pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	_, _ = io.Copy(dst, src)
}
