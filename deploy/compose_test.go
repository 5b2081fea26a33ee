package deploy

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

// TestComposeFile loads ../docker-compose.yml with compose-go (the Compose
// specification's reference loader, schema-validated) and checks what a
// first run relies on: start order by health, a scalable worker, the drain
// fitting the stop grace period, and NATS' durability settings. The e2e
// package runs the machine's Compose CLI on the same file.
func TestComposeFile(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts, err := cli.NewProjectOptions([]string{"../docker-compose.yml"},
		cli.WithName("rath"), cli.WithWorkingDirectory(".."), cli.WithEnv([]string{}))
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(ctx)
	if err != nil {
		t.Fatalf("load docker-compose.yml: %v", err)
	}
	for _, name := range []string{"postgres", "nats", "jaeger", "migrate", "coordinator", "worker"} {
		if _, err := p.GetService(name); err != nil {
			t.Fatalf("service %s: %v", name, err)
		}
	}
	svc := func(name string) types.ServiceConfig { s, _ := p.GetService(name); return s }
	for _, name := range []string{"postgres", "nats", "coordinator", "worker"} {
		if hc := svc(name).HealthCheck; hc == nil || len(hc.Test) == 0 {
			t.Errorf("%s has no health check", name)
		}
	}
	dep := func(from, to, cond string) {
		t.Helper()
		d, ok := svc(from).DependsOn[to]
		if !ok || d.Condition != cond {
			t.Errorf("%s depends on %s with %+v, want condition %s", from, to, d, cond)
		}
	}
	dep("migrate", "postgres", types.ServiceConditionHealthy)
	dep("migrate", "nats", types.ServiceConditionHealthy)
	dep("coordinator", "migrate", types.ServiceConditionCompletedSuccessfully)
	dep("worker", "coordinator", types.ServiceConditionHealthy)
	if m := svc("migrate"); !slices.Equal(m.Command, types.ShellCommand{"migrate"}) {
		t.Errorf("migrate service runs %v", m.Command)
	}

	// `docker compose up --scale worker=N` needs a worker without a fixed
	// name or host port.
	w := svc("worker")
	if w.ContainerName != "" || len(w.Ports) > 0 {
		t.Errorf("worker has container_name %q or ports %v: it cannot scale", w.ContainerName, w.Ports)
	}
	if w.StopGracePeriod == nil || time.Duration(*w.StopGracePeriod) < 35*time.Second {
		t.Errorf("worker stop_grace_period %v: want ≥ 35s (30s drain + 5s NATS drain)", w.StopGracePeriod)
	}
	if w.Environment["RATH_STORE_FILE"] == nil || w.Environment["NATS_URL"] == nil || *w.Environment["NATS_URL"] != "nats://nats:4222" {
		t.Errorf("worker environment: %v", w.Environment)
	}
	// The coordinator and the workers load the same operator's sandbox
	// policy, which the repository ships.
	for _, name := range []string{"coordinator", "worker"} {
		s := svc(name)
		e := s.Environment["RATH_SANDBOX_POLICY"]
		mounted := slices.ContainsFunc(s.Volumes, func(v types.ServiceVolumeConfig) bool {
			return e != nil && v.Target == *e && v.ReadOnly && filepath.Base(v.Source) == "sandbox-policy.yaml"
		})
		if !mounted {
			t.Errorf("%s: RATH_SANDBOX_POLICY = %v, not mounted read-only from deploy/compose/sandbox-policy.yaml", name, e)
		}
	}
	// The worker's database login is rath_worker_login, from a secret file,
	// never the owner's URL (issue #19).
	if w.Environment["RATH_STORE"] != nil {
		t.Errorf("worker has RATH_STORE in its environment: want RATH_STORE_FILE")
	}
	if f := w.Environment["RATH_STORE_FILE"]; f == nil || *f != "/run/secrets/rath-worker-store" ||
		!slices.ContainsFunc(w.Secrets, func(s types.ServiceSecretConfig) bool { return s.Source == "rath-worker-store" }) {
		t.Errorf("worker RATH_STORE_FILE %v, secrets %v: want the rath-worker-store secret", f, w.Secrets)
	}
	url, err := os.ReadFile(p.Secrets["rath-worker-store"].File)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^postgres://rath_worker_login:[^@]+@postgres:5432/rath\?`).Match(url) {
		t.Errorf("worker-store.url = %q: want rath_worker_login", url)
	}
	dep("worker-role", "migrate", types.ServiceConditionCompletedSuccessfully)
	dep("worker", "worker-role", types.ServiceConditionCompletedSuccessfully)
	role := strings.Join(svc("worker-role").Command, " ")
	for _, want := range []string{"IN ROLE rath_worker", "NOSUPERUSER NOBYPASSRLS PASSWORD", `pw=$(sed -E`} {
		if !strings.Contains(role, want) {
			t.Errorf("worker-role command lacks %q:\n%s", want, role)
		}
	}
	if !slices.ContainsFunc(svc("postgres").Command, func(s string) bool { return s == "synchronous_commit=on" }) {
		t.Errorf("postgres command %v does not pin synchronous_commit=on", svc("postgres").Command)
	}

	conf, err := os.ReadFile("compose/nats.conf")
	if err != nil {
		t.Fatal(err)
	}
	for _, re := range []string{`(?m)^\s*sync_interval:\s*always\s*$`, `(?m)^max_payload:\s*2MB\s*$`, `(?m)^\s*store_dir:\s*/data\s*$`} {
		if !regexp.MustCompile(re).Match(conf) {
			t.Errorf("deploy/compose/nats.conf does not match %s", re)
		}
	}
}
