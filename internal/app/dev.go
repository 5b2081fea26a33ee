package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/bus/embedded"
	"github.com/rath-run/rath/internal/coordinator"
	"github.com/rath-run/rath/internal/service"
	"github.com/rath-run/rath/internal/telemetry"
	"github.com/rath-run/rath/internal/worker"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/tool/builtin"
)

// DevConfig configures the single-process stack.
type DevConfig struct {
	// Dir holds the state: rath.db (the embedded store) and nats/ (JetStream).
	// Default ".rath".
	Dir string
	// Addr is the coordinator API's listen address; default 127.0.0.1:7420.
	// Port 0 picks a free port.
	Addr string
	// StoreURL overrides the embedded store (e.g. a postgres:// URL).
	StoreURL string
	// Workers is the number of in-process workers; 0 means 2, negative none.
	Workers int
	// Slots per worker; default 4.
	Slots int
	// Bus overrides stream and consumer settings.
	Bus    bus.Config
	Getenv func(string) string
	Logger *slog.Logger
	// TracerProvider traces the API, jobs and steps; nil means none.
	TracerProvider trace.TracerProvider
	// Registry receives the stack's metrics, served at GET /metrics; nil
	// means a new one (Dev.Registry).
	Registry *prometheus.Registry
	// JaegerURL is the base of the web UI's trace links (RATH_JAEGER_URL).
	JaegerURL string
}

// Dev is a running single-process stack.
type Dev struct {
	// URL is the coordinator API's base URL.
	URL     string
	Backend *Backend
	// Registry holds the stack's metrics (coordinator and workers).
	Registry    *prometheus.Registry
	Coordinator *coordinator.Coordinator

	nats *embedded.Server
	srv  *http.Server
	// services are the coordinator's (event feed, workflow driver,
	// reconciler), started after the API and stopped after it drained.
	services service.Group
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	log      *slog.Logger
	closing  sync.Once
}

// StartDev starts embedded NATS with JetStream, the store, the coordinator
// API and in-process workers. Stop it with [Dev.Close].
func StartDev(ctx context.Context, cfg DevConfig) (*Dev, error) {
	cfg.Dir = cmp.Or(cfg.Dir, ".rath")
	cfg.Addr = cmp.Or(cfg.Addr, "127.0.0.1:7420")
	cfg.Workers = cmp.Or(cfg.Workers, 2)
	if cfg.Getenv == nil {
		cfg.Getenv = func(string) string { return "" }
	}
	log := cmp.Or(cfg.Logger, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	storeURL := cmp.Or(cfg.StoreURL, "sqlite:"+filepath.Join(cfg.Dir, "rath.db"))

	ns, err := embedded.Start(ctx, embedded.Options{StoreDir: filepath.Join(cfg.Dir, "nats"), Port: -1, InProcess: true})
	if err != nil {
		return nil, fmt.Errorf("embedded NATS: %w", err)
	}
	d := &Dev{nats: ns, log: log, Registry: cmp.Or(cfg.Registry, telemetry.NewRegistry())}
	metrics := telemetry.NewMetrics(d.Registry)
	metrics.KnownModels(llm.ConfiguredModels(cfg.Getenv)...)
	d.Backend, err = OpenBackend(ctx, BackendConfig{
		StoreURL: storeURL,
		Connect:  func() (*nats.Conn, error) { return ns.Connect(nats.Name("rath-dev")) },
		Bus:      cfg.Bus,
		Migrate:  true,
		Logger:   log,
	})
	if err != nil {
		ns.Shutdown()
		return nil, err
	}
	pol, err := SandboxPolicy("", d.Backend, cfg.Getenv)
	if err != nil {
		d.Close()
		return nil, err
	}
	ret, err := d.Backend.Retention()
	if err != nil {
		d.Close()
		return nil, err
	}
	d.Coordinator, err = coordinator.New(d.Backend.Store, d.Backend.Runs, d.Backend.Bus, coordinator.Config{Logger: log, SameDatabase: d.Backend.SubmitInOneTx(), RunReads: d.Backend.RunReads,
		TracerProvider: cfg.TracerProvider, Metrics: metrics, Gatherer: d.Registry, JaegerURL: cfg.JaegerURL, Memory: d.Backend.Memory,
		SandboxPolicy: pol, Retention: ret,
		// The dev workers offer the built-in tools (worker.Config.Tools
		// unset) and run the MCP commands below: a spec naming another
		// tool or command is refused at submit.
		Tools: builtin.NewRegistry(), MCP: MCPOffer(cmp.Or(cfg.Getenv("RATH_MCP_ALLOW"), "*"))})
	if err != nil {
		d.Close()
		return nil, err
	}
	if err := RegisterBackendMetrics(ctx, d.Registry, d.Backend, true, bus.DefaultQueue); err != nil {
		d.Close()
		return nil, err
	}
	// The API server's default limits (HTTPLimits): slow clients are cut
	// off and connections capped here too.
	ln, err := HTTPLimits{}.Listen(ctx, cfg.Addr)
	if err != nil {
		d.Close()
		return nil, err
	}
	d.URL = "http://" + ln.Addr().String()
	d.srv = HTTPLimits{}.Server(d.Coordinator.Handler())

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	d.cancel = cancel
	d.goRun(func() {
		if err := d.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("coordinator API stopped", slog.Any("error", err))
		}
	})
	services := d.Coordinator.Services()
	if err := services.Start(runCtx); err != nil {
		d.Close()
		return nil, err
	}
	d.services = services
	// On a laptop the spec's author runs the workers, and the local sandbox
	// already runs their commands: MCP servers may run any command unless
	// RATH_MCP_ALLOW says otherwise.
	getenv := func(k string) string {
		if k == "RATH_MCP_ALLOW" {
			return cmp.Or(cfg.Getenv(k), "*")
		}
		return cfg.Getenv(k)
	}
	for i := range max(cfg.Workers, 0) {
		w, err := NewWorker(runCtx, d.Backend, getenv, worker.Config{
			Name: fmt.Sprintf("dev-worker-%d", i+1), Slots: cfg.Slots, Logger: log, ShutdownTimeout: 10 * time.Second,
			TracerProvider: cfg.TracerProvider, Metrics: metrics, SandboxPolicy: pol,
		})
		if err != nil {
			d.Close()
			return nil, err
		}
		d.goRun(func() { _ = w.Run(runCtx) })
	}
	return d, nil
}

func (d *Dev) goRun(fn func()) {
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		fn()
	}()
}

// Close stops the API (letting its requests finish), then the
// coordinator's services (the workflow driver hands its runs back), lets
// workers finish their steps, and shuts the embedded NATS server down.
// Every goroutine the stack started has returned when Close does; a
// second Close does nothing.
func (d *Dev) Close() { d.closing.Do(d.close) }

func (d *Dev) close() {
	if d.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = d.srv.Shutdown(ctx)
		cancel()
	}
	d.services.Stop()
	if d.cancel != nil {
		d.cancel()
	}
	d.wg.Wait()
	if d.Backend != nil {
		_ = d.Backend.Close()
	}
	d.nats.Shutdown()
}
