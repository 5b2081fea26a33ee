package mcp

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/tool"
)

// Errors a Manager returns, wrapped with the server's name. Test them with
// errors.Is.
var (
	// ErrClosed: the Manager was closed.
	ErrClosed = errors.New("rath: mcp manager closed")
	// ErrNotAllowed: the worker's operator does not allow the command.
	ErrNotAllowed = errors.New("rath: mcp server command not allowed on this worker")
	// ErrServer: a server could not be started, died, or broke the
	// protocol.
	ErrServer = errors.New("rath: mcp server failed")
)

// Config configures a Manager. Zero values take the documented defaults.
type Config struct {
	// AllowCommands lists the commands (exactly as a spec writes them) that
	// servers may run; "*" allows any. Empty allows none: MCP servers run on
	// the worker host, so an operator opts in.
	AllowCommands []string
	// Env is every server's base environment, normally PATH and HOME (see
	// [HostEnv]); each spec's env is added over it. The worker's other
	// variables never reach a server.
	Env map[string]string
	// Dir is the servers' working directory; empty means the worker's.
	// A relative command is found relative to it.
	Dir string
	// InitTimeout bounds starting a server and its initialize handshake;
	// default 10s.
	InitTimeout time.Duration
	// CallTimeout bounds one tool call unless the spec sets its own;
	// default 60s.
	CallTimeout time.Duration
	// RestartBackoff is the wait before restarting a server that failed or
	// died; it doubles while the server keeps failing, up to
	// MaxRestartBackoff, and resets after a successful call. Default 200ms.
	RestartBackoff time.Duration
	// MaxRestartBackoff caps RestartBackoff; default 30s.
	MaxRestartBackoff time.Duration
	// TerminateTimeout is how long a server may take to exit after its
	// stdin closes, and again after SIGTERM, before it is killed; default 2s.
	TerminateTimeout time.Duration
	// IdleTimeout stops servers no tool set has used for this long (checked
	// when [Manager.Tools] runs); default 10m.
	IdleTimeout time.Duration
	// MaxTools bounds the tools listed from one server; default 512.
	MaxTools int
	// Logger defaults to discarding.
	Logger *slog.Logger
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	c.InitTimeout = cmp.Or(c.InitTimeout, 10*time.Second)
	c.CallTimeout = cmp.Or(c.CallTimeout, 60*time.Second)
	c.RestartBackoff = cmp.Or(c.RestartBackoff, 200*time.Millisecond)
	c.MaxRestartBackoff = cmp.Or(c.MaxRestartBackoff, 30*time.Second)
	c.TerminateTimeout = cmp.Or(c.TerminateTimeout, 2*time.Second)
	c.IdleTimeout = cmp.Or(c.IdleTimeout, 10*time.Minute)
	c.MaxTools = cmp.Or(c.MaxTools, 512)
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.InitTimeout < 0, c.CallTimeout < 0, c.RestartBackoff < 0, c.MaxRestartBackoff < 0,
		c.TerminateTimeout < 0, c.IdleTimeout < 0:
		return errors.New("mcp: durations must not be negative")
	case c.MaxTools < 1:
		return fmt.Errorf("mcp: MaxTools must be at least 1, got %d", c.MaxTools)
	}
	for k := range c.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("mcp: Env key %q is not a valid variable name", k)
		}
	}
	return nil
}

// HostEnv returns the base environment a worker gives its servers: PATH and
// HOME as getenv reports them (unset ones are left out).
func HostEnv(getenv func(string) string) map[string]string {
	env := map[string]string{}
	for _, k := range []string{"PATH", "HOME"} {
		if v := getenv(k); v != "" {
			env[k] = v
		}
	}
	return env
}

// Manager owns a worker's MCP servers: one long-lived client session per
// distinct server spec. It is safe for concurrent use. Close it when the
// worker stops.
type Manager struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex // guards following
	closed  bool
	servers map[string]*server // by serverKey

	wg sync.WaitGroup // every goroutine a server starts
}

// NewManager returns a Manager; it starts nothing until [Manager.Tools].
func NewManager(cfg Config) (*Manager, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Manager{cfg: cfg, log: cfg.Logger, servers: map[string]*server{}}, nil
}

// Tools starts (or reuses) the servers specs name, lists their tools and
// returns them, in spec order and then sorted by name within a server. An
// error names the server (its index in specs and its name) and what went
// wrong: a command the worker does not allow, a server that fails to start,
// does not answer initialize in time, or breaks the protocol, a tool named
// in the spec's allowlist that the server does not offer.
func (m *Manager) Tools(ctx context.Context, specs []agent.MCPServer) ([]tool.Tool, error) {
	m.sweepIdle()
	type result struct {
		tools []tool.Tool
		err   error
	}
	results := make([]result, len(specs))
	var wg sync.WaitGroup
	for i, spec := range specs {
		wg.Go(func() {
			ts, err := m.serverTools(ctx, spec)
			if err != nil {
				err = fmt.Errorf("mcp[%d] %s: %w", i, spec.Name, err)
			}
			results[i] = result{ts, err}
		})
	}
	wg.Wait()
	var out []tool.Tool
	var errs []error
	for _, r := range results {
		out = append(out, r.tools...)
		if r.err != nil {
			errs = append(errs, r.err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// serverTools returns one server's tools, as its spec filters them.
func (m *Manager) serverTools(ctx context.Context, spec agent.MCPServer) ([]tool.Tool, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if !m.allowed(spec.Command) {
		return nil, fmt.Errorf("%w: command %q (the worker's operator lists allowed commands, e.g. RATH_MCP_ALLOW)", ErrNotAllowed, spec.Command)
	}
	s, err := m.acquire(spec)
	if err != nil {
		return nil, err
	}
	listed, err := s.listTools(ctx)
	s.release(err == nil)
	if err != nil {
		return nil, err
	}
	byRemote := make(map[string]*remoteTool, len(listed))
	for _, rt := range listed {
		byRemote[rt.name] = rt
	}
	pick := listed
	if len(spec.Tools) > 0 {
		pick = nil
		for i, name := range spec.Tools {
			rt, ok := byRemote[name]
			if !ok {
				return nil, fmt.Errorf("tools[%d]: the server offers no tool %q (it has: %s)",
					i, name, strings.Join(slices.Sorted(maps.Keys(byRemote)), ", "))
			}
			if !slices.Contains(pick, rt) {
				pick = append(pick, rt)
			}
		}
	}
	timeout := m.cfg.CallTimeout
	if spec.TimeoutSeconds > 0 {
		timeout = time.Duration(spec.TimeoutSeconds * float64(time.Second))
	}
	out := make([]tool.Tool, 0, len(pick))
	for _, rt := range pick {
		out = append(out, &mcpTool{m: m, spec: spec, key: s.key, remote: rt, timeout: timeout})
	}
	slices.SortFunc(out, func(a, b tool.Tool) int { return strings.Compare(a.Def().Name, b.Def().Name) })
	return out, nil
}

func (m *Manager) allowed(command string) bool { return Allowed(m.cfg.AllowCommands, command) }

// Allowed reports whether the operator's list of MCP server commands
// (Config.AllowCommands, RATH_MCP_ALLOW) lets a spec run command: listed
// exactly as the spec writes it, or "*". An empty list allows none. The
// coordinator checks specs at submit with the same rule the workers
// enforce.
func Allowed(allow []string, command string) bool {
	for _, c := range allow {
		if c == "*" || c == command {
			return true
		}
	}
	return false
}

// acquire returns the server for spec, creating it (not yet started) if
// needed, and counts a use in flight, so the idle sweep leaves it alone
// until the caller calls release.
func (m *Manager) acquire(spec agent.MCPServer) (*server, error) {
	key := serverKey(spec)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	s, ok := m.servers[key]
	if !ok {
		s = newServer(m, key, spec)
		m.servers[key] = s
	}
	s.begin()
	return s, nil
}

// sweepIdle stops servers unused for IdleTimeout with no use in flight.
// It holds m.mu while it checks, so a server being acquired is never swept.
func (m *Manager) sweepIdle() {
	now := time.Now()
	var idle []*server
	m.mu.Lock()
	for k, s := range m.servers {
		if s.idleSince(now) > m.cfg.IdleTimeout {
			delete(m.servers, k)
			idle = append(idle, s)
		}
	}
	m.mu.Unlock()
	for _, s := range idle {
		m.log.Info("mcp: stopping idle server", slog.String("server", s.spec.Name))
		s.close()
	}
}

// Close stops every server and waits for them and for every goroutine the
// Manager started. Tools and calls after Close fail with [ErrClosed]. Close
// is idempotent.
func (m *Manager) Close() error {
	m.mu.Lock()
	m.closed = true
	servers := slices.Collect(maps.Values(m.servers))
	m.servers = map[string]*server{}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Go(s.close)
	}
	wg.Wait()
	m.wg.Wait()
	return nil
}

// serverKey identifies a server process: what it runs and with which
// environment. The allowlist of tools and the call timeout are not part of
// it, so agents that share a server share its session.
func serverKey(s agent.MCPServer) string {
	b, _ := json.Marshal(struct {
		Name    string            `json:"n"`
		Command string            `json:"c"`
		Args    []string          `json:"a"`
		Env     map[string]string `json:"e"` // encoding/json sorts map keys
	}{s.Name, s.Command, s.Args, s.Env})
	return string(b)
}
