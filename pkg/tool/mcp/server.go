package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os/exec"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rath-run/rath/pkg/agent"
)

// stderrTail is how much of a server's stderr is kept for error messages.
const stderrTail = 2048

// server is one MCP server process and its client session, restarted on
// demand after it dies.
type server struct {
	m    *Manager
	key  string
	spec agent.MCPServer
	// connect is a one-slot semaphore held while starting the process, so
	// concurrent callers wait (abandonably) for one start instead of racing.
	connect chan struct{}

	mu       sync.Mutex // guards following
	closed   bool
	conn     *conn         // nil when not running
	tools    []*remoteTool // listed on conn; nil until listed
	failures int           // consecutive failures since the last success
	retryAt  time.Time     // no start before this
	lastErr  error         // why the last start failed or the last conn ended
	lastUsed time.Time
	inflight int
}

// conn is one running process and its session.
type conn struct {
	cs     *sdk.ClientSession
	cmd    *exec.Cmd
	stderr *tailBuffer
	// done is closed when the session has ended and the process is reaped.
	done chan struct{}
	// ended is why the session ended; read it only after done is closed.
	ended error
}

// remoteTool is a tool as the server listed it.
type remoteTool struct {
	name        string // the server's name for it
	description string
	schema      []byte // the inputSchema, JSON
}

func newServer(m *Manager, key string, spec agent.MCPServer) *server {
	return &server{m: m, key: key, spec: spec, connect: make(chan struct{}, 1), lastUsed: time.Now()}
}

// idleSince returns how long the server has been unused, or 0 while a call
// is in flight.
func (s *server) idleSince(now time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inflight > 0 {
		return 0
	}
	return now.Sub(s.lastUsed)
}

// begin and release bracket a use (see Manager.acquire), keeping the
// server from idling out; a successful use resets the restart backoff.
func (s *server) begin() {
	s.mu.Lock()
	s.inflight++
	s.lastUsed = time.Now()
	s.mu.Unlock()
}

func (s *server) release(ok bool) {
	s.mu.Lock()
	s.inflight--
	s.lastUsed = time.Now()
	if ok {
		s.failures = 0
	}
	s.mu.Unlock()
}

// session returns the running connection, starting the server if needed.
// A server that failed or died recently is restarted only after its
// backoff; when the backoff outlasts ctx, the call fails at once with the
// reason.
func (s *server) session(ctx context.Context) (*conn, error) {
	if c, err := s.current(); c != nil || err != nil {
		return c, err
	}
	select {
	case s.connect <- struct{}{}:
	case <-ctx.Done():
		return nil, s.ctxErr(ctx, "waiting for the server to start")
	}
	defer func() { <-s.connect }()
	if c, err := s.current(); c != nil || err != nil {
		return c, err
	}
	s.mu.Lock()
	wait, lastErr := time.Until(s.retryAt), s.lastErr
	s.mu.Unlock()
	if wait > 0 {
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return nil, fmt.Errorf("%w; next restart in %s", lastErr, wait.Round(time.Millisecond))
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, s.ctxErr(ctx, "waiting to restart the server")
		}
	}
	c, err := s.start(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil { // a canceled caller is not the server's failure
			s.failLocked(err)
		}
		return nil, err
	}
	if s.closed { // closed while starting
		s.mu.Unlock()
		_ = c.cs.Close()
		killProcessGroup(c.cmd)
		s.mu.Lock()
		return nil, ErrClosed
	}
	s.conn, s.tools = c, nil
	// Started under s.mu with s.closed false, so before close() and
	// Manager.Close's wait.
	s.m.wg.Go(func() { s.watch(c) })
	return c, nil
}

// current returns the running connection, or ErrClosed.
func (s *server) current() (*conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	return s.conn, nil
}

// failLocked records a failure and schedules the next start after the
// backoff.
func (s *server) failLocked(err error) {
	s.failures++
	backoff := s.m.cfg.RestartBackoff
	for i := 1; i < s.failures && backoff < s.m.cfg.MaxRestartBackoff; i++ {
		backoff *= 2
	}
	backoff = min(backoff, s.m.cfg.MaxRestartBackoff)
	s.retryAt = time.Now().Add(backoff)
	s.lastErr = err
}

func (s *server) ctxErr(ctx context.Context, doing string) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w: timed out %s", context.DeadlineExceeded, doing)
	}
	return fmt.Errorf("%s: %w", doing, ctx.Err())
}

// start runs the process and the initialize handshake.
func (s *server) start(ctx context.Context) (*conn, error) {
	cfg := s.m.cfg
	cmd := exec.Command(s.spec.Command, s.spec.Args...) //nolint:noctx // the process outlives the call that starts it; close stops it
	cmd.Dir = cfg.Dir
	env := maps.Clone(cfg.Env)
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, s.spec.Env)
	cmd.Env = make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		cmd.Env = append(cmd.Env, k+"="+env[k])
	}
	c := &conn{cmd: cmd, stderr: newTailBuffer(stderrTail), done: make(chan struct{})}
	cmd.Stderr = c.stderr
	cmd.WaitDelay = cfg.TerminateTimeout
	setProcessGroup(cmd)

	client := sdk.NewClient(&sdk.Implementation{Name: "rath", Version: "v0"}, &sdk.ClientOptions{
		Logger: cfg.Logger,
		ToolListChangedHandler: func(_ context.Context, req *sdk.ToolListChangedRequest) {
			s.mu.Lock()
			if s.conn != nil && s.conn.cs == req.Session {
				s.tools = nil
			}
			s.mu.Unlock()
		},
	})
	ictx, cancel := context.WithTimeout(ctx, cfg.InitTimeout)
	defer cancel()
	t := &sdk.CommandTransport{Command: cmd, TerminateDuration: cfg.TerminateTimeout}
	started := time.Now()
	cs, err := client.Connect(ictx, t, nil)
	if err != nil {
		// Connect closes the session, and so reaps the process, when the
		// handshake fails; what the server left behind in its process
		// group is killed here.
		killProcessGroup(cmd)
		return nil, s.startError(ctx, ictx, c, err)
	}
	c.cs = cs
	s.m.log.Info("mcp: server started", slog.String("server", s.spec.Name),
		slog.Int("pid", cmd.Process.Pid), slog.Duration("took", time.Since(started)))
	return c, nil
}

// startError explains a failed start.
func (s *server) startError(ctx, ictx context.Context, c *conn, err error) error {
	var why string
	switch {
	case ictx.Err() != nil && ctx.Err() == nil:
		why = fmt.Sprintf("no answer to initialize within %s", s.m.cfg.InitTimeout)
	case ctx.Err() != nil:
		return s.ctxErr(ctx, "starting the server")
	case c.cmd.Process == nil:
		why = fmt.Sprintf("cannot run %q: %v", s.spec.Command, err)
	default:
		why = fmt.Sprintf("initialize failed: %v", err)
	}
	return fmt.Errorf("%w: %s%s", ErrServer, why, c.describeExit())
}

// watch waits for the session to end, for whatever reason, then closes it
// (reaping the process and its group) and forgets it, so the next call
// starts the server again.
func (s *server) watch(c *conn) {
	waitErr := c.cs.Wait()
	_ = c.cs.Close()
	killProcessGroup(c.cmd)
	c.ended = fmt.Errorf("%w: the server stopped (%w)%s", ErrServer, waitErr, c.describeExit())
	// The connection is forgotten before its end is signaled: a caller
	// woken by c.done (callError) that calls again must find no current
	// connection and start a new one, never get the dead one back.
	s.mu.Lock()
	if s.conn == c {
		s.conn, s.tools = nil, nil
		if !s.closed {
			s.failLocked(c.ended)
			s.m.log.Warn("mcp: server stopped", slog.String("server", s.spec.Name), slog.Any("error", c.ended))
		}
	}
	s.mu.Unlock()
	close(c.done)
}

// describeExit returns ": exit status N; stderr: …" when the process has
// ended, else "".
func (c *conn) describeExit() string {
	st := c.cmd.ProcessState
	if st == nil {
		return ""
	}
	msg := "; " + st.String()
	if tail := c.stderr.String(); tail != "" {
		msg += "; stderr: " + tail
	}
	return msg
}

// listTools returns the server's tools, listing them once per connection
// (again after the server reports that its list changed).
func (s *server) listTools(ctx context.Context) ([]*remoteTool, error) {
	c, err := s.session(ctx)
	if err != nil {
		return nil, err
	}
	ictx, cancel := context.WithTimeout(ctx, s.m.cfg.InitTimeout)
	defer cancel()
	s.mu.Lock()
	if s.conn == c && s.tools != nil {
		ts := s.tools
		s.mu.Unlock()
		return ts, nil
	}
	s.mu.Unlock()
	var out []*remoteTool
	for t, err := range c.cs.Tools(ictx, nil) {
		if err != nil {
			return nil, s.callError(ictx, c, "listing tools", err)
		}
		if len(out) == s.m.cfg.MaxTools {
			return nil, fmt.Errorf("%w: more than %d tools", ErrServer, s.m.cfg.MaxTools)
		}
		rt, err := newRemoteTool(t)
		if err != nil {
			return nil, fmt.Errorf("%w: tool %q: %w", ErrServer, t.Name, err)
		}
		out = append(out, rt)
	}
	s.mu.Lock()
	if s.conn == c {
		s.tools = out
	}
	s.mu.Unlock()
	return out, nil
}

// callError explains a failed request on c. An error the server sent
// (a JSON-RPC error reply) is returned as it is; any other error means the
// connection broke, and the server's end is described once the watcher has
// reaped it.
func (s *server) callError(ctx context.Context, c *conn, doing string, err error) error {
	if ctx.Err() != nil {
		return s.ctxErr(ctx, doing)
	}
	if _, ok := errors.AsType[*jsonrpc.Error](err); ok {
		return fmt.Errorf("%s: %w", doing, err)
	}
	if s.awaitEnd(ctx, c) {
		return fmt.Errorf("%s: %w", doing, c.ended)
	}
	return fmt.Errorf("%w: %s: the connection broke: %w", ErrServer, doing, err)
}

// awaitEnd waits until c's watcher has reaped the process, for as long as
// stopping a process may take, and reports whether it has.
func (s *server) awaitEnd(ctx context.Context, c *conn) bool {
	t := time.NewTimer(3*s.m.cfg.TerminateTimeout + time.Second)
	defer t.Stop()
	select {
	case <-c.done:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// close stops the server and waits for it.
func (s *server) close() {
	s.mu.Lock()
	s.closed = true
	c := s.conn
	s.mu.Unlock()
	if c != nil {
		_ = c.cs.Close()
		<-c.done
	}
}
