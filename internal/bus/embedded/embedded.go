// Package embedded runs a NATS server with JetStream inside the current
// process, for tests and for `rathctl dev`.
//
// A [Server] is started with [Start] and stopped with [Server.Shutdown],
// which waits until the server has stopped and flushed its store. State lives
// in Options.StoreDir, so a new server started on the same StoreDir (and, for
// clients to reconnect by themselves, the same port) finds its streams,
// consumers and unacknowledged messages again.
//
// [Server.Connect] returns a client connection with unlimited reconnects and
// a short reconnect wait, so clients ride out a restart. An in-process
// connection (Options.InProcess) is bound to one server instance and cannot
// follow a restart; use TCP for that.
package embedded

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Options configures an embedded server.
type Options struct {
	// StoreDir is the JetStream storage directory. Required.
	StoreDir string
	// Host is the client listen address. Default "127.0.0.1" (loopback only).
	Host string
	// Port is the client port: -1 picks a free port, 0 means NATS' default
	// 4222. [Server.Port] returns the port in use.
	Port int
	// InProcess makes Connect use an in-process pipe instead of TCP.
	InProcess bool
	// NoListen disables the TCP listener altogether (requires InProcess);
	// ClientURL is then "".
	NoListen bool
	// ServerName names the server in JetStream metadata. Default "rath-dev".
	ServerName string
	// ReadyTimeout bounds how long Start waits for the server to accept
	// connections when ctx has no earlier deadline. Default 10s.
	ReadyTimeout time.Duration
	// Users, when set, are the only users the server accepts, each with
	// its subject permissions (package natsauth builds them). Default: no
	// authentication.
	Users []*server.User
	// MaxFileStore bounds what JetStream stores on disk, all streams
	// together (NATS' max_file_store). Default 0: NATS' own, most of the
	// disk.
	MaxFileStore int64
}

// ErrInvalidOptions is returned by Start when an Options field is unusable;
// the message names the field.
var ErrInvalidOptions = errors.New("embedded: invalid options")

// Server is a running embedded NATS server with JetStream.
type Server struct {
	ns   *server.Server
	opts Options
}

// Start starts a server and waits until it accepts connections and
// JetStream is enabled. ctx bounds the start only; the server runs until
// Shutdown.
func Start(ctx context.Context, o Options) (*Server, error) {
	if o.StoreDir == "" {
		return nil, fmt.Errorf("%w: StoreDir is empty", ErrInvalidOptions)
	}
	if o.NoListen && !o.InProcess {
		return nil, fmt.Errorf("%w: NoListen requires InProcess", ErrInvalidOptions)
	}
	if o.Port < -1 || o.Port > 65535 {
		return nil, fmt.Errorf("%w: Port = %d, want -1..65535", ErrInvalidOptions, o.Port)
	}
	if o.MaxFileStore < 0 {
		return nil, fmt.Errorf("%w: MaxFileStore = %d, want >= 0", ErrInvalidOptions, o.MaxFileStore)
	}
	o.Host = cmp.Or(o.Host, "127.0.0.1")
	o.ServerName = cmp.Or(o.ServerName, "rath-dev")
	o.ReadyTimeout = cmp.Or(o.ReadyTimeout, 10*time.Second)

	ns, err := server.NewServer(&server.Options{
		ServerName: o.ServerName,
		Host:       o.Host,
		Port:       o.Port,
		DontListen: o.NoListen,
		JetStream:  true,
		StoreDir:   o.StoreDir,
		// 0 is NATS' own default.
		JetStreamMaxStore: o.MaxFileStore,
		NoLog:             true,
		NoSigs:            true,
		// A bigger max_payload than NATS' 1 MiB default so that a full
		// 1 MiB job envelope plus its headers fits.
		MaxPayload: 2 << 20,
		Users:      o.Users,
	})
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	// Start returns once the accept loop runs; it must not block the caller
	// on a slow store recovery, hence the bounded readiness wait below.
	go ns.Start()

	wait := o.ReadyTimeout
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl))
	}
	if !ns.ReadyForConnections(wait) {
		ns.Shutdown()
		ns.WaitForShutdown()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("embedded nats: not ready after %s", wait)
	}
	if !ns.JetStreamEnabled() {
		ns.Shutdown()
		ns.WaitForShutdown()
		return nil, errors.New("embedded nats: jetstream did not start")
	}
	s := &Server{ns: ns, opts: o}
	if !o.NoListen {
		if addr, ok := ns.Addr().(*net.TCPAddr); ok {
			s.opts.Port = addr.Port
		}
	}
	return s, nil
}

// ClientURL returns the TCP URL clients connect to ("" with NoListen).
func (s *Server) ClientURL() string {
	if s.opts.NoListen {
		return ""
	}
	return "nats://" + net.JoinHostPort(s.opts.Host, strconv.Itoa(s.opts.Port))
}

// Port returns the TCP port in use (0 with NoListen).
func (s *Server) Port() int {
	if s.opts.NoListen {
		return 0
	}
	return s.opts.Port
}

// Options returns the options the server runs with, the resolved Port
// included: Start(ctx, s.Options()) after Shutdown restarts the same server.
func (s *Server) Options() Options { return s.opts }

// NATS returns the underlying nats-server, for what this package does not
// wrap (monitoring, JetStream stats).
func (s *Server) NATS() *server.Server { return s.ns }

// Connect connects a client to the server: in-process when
// Options.InProcess, otherwise over TCP. Defaults, which opts may override:
// unlimited reconnects, a 50ms reconnect wait with 50ms jitter, a 2s connect
// timeout.
func (s *Server) Connect(opts ...nats.Option) (*nats.Conn, error) {
	all := []nats.Option{
		nats.Name("rath-embedded"),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(50 * time.Millisecond),
		nats.ReconnectJitter(50*time.Millisecond, 50*time.Millisecond),
		nats.Timeout(2 * time.Second),
	}
	url := s.ClientURL()
	if s.opts.InProcess {
		all = append(all, nats.InProcessServer(s.ns))
	}
	all = append(all, opts...)
	nc, err := nats.Connect(url, all...)
	if err != nil {
		return nil, fmt.Errorf("connect to embedded nats: %w", err)
	}
	return nc, nil
}

// Shutdown stops the server and waits until it has stopped. It is safe to
// call more than once.
func (s *Server) Shutdown() {
	s.ns.Shutdown()
	s.ns.WaitForShutdown()
}
