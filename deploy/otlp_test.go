package deploy

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// otlpPorts are the OTLP receiver ports and the protocol each speaks
// (OTLP's registered ports: 4317 gRPC, 4318 HTTP).
var otlpPorts = map[int]string{4317: "grpc", 4318: "http/protobuf"}

// otlpTarget checks one process's OTLP settings (get reads its
// environment) and returns the endpoint's host and port, or ok false
// when it exports no traces.
func otlpTarget(get func(string) (string, bool)) (host string, port int, ok bool, err error) {
	endpoint, set := get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if !set {
		endpoint, set = get("OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	if !set || endpoint == "" {
		return "", 0, false, nil
	}
	protocol, set := get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if !set {
		protocol, set = get("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if !set {
		protocol = "http/protobuf" // the SDK's default, and Rath's
	}
	u, perr := url.Parse(endpoint)
	if perr != nil || u.Hostname() == "" || u.Port() == "" {
		return "", 0, false, fmt.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT %q: want scheme://host:port", endpoint)
	}
	port, _ = strconv.Atoi(u.Port())
	want, known := otlpPorts[port]
	switch {
	case !known:
		return "", 0, false, fmt.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT %q: port %d is not an OTLP port (4317 gRPC, 4318 HTTP)", endpoint, port)
	case protocol != want:
		return "", 0, false, fmt.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT %q speaks %s on port %d, but OTEL_EXPORTER_OTLP_PROTOCOL is %q", endpoint, want, port, protocol)
	}
	return u.Hostname(), port, true, nil
}

func TestOTLPTargetRefusesMismatches(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		fail bool
	}{
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://j:4317"}, true}, // the bug of issue 23
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://j:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://j:4318"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://j:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://j:4318", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc",
			"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://j:9999"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "j"}, true},
		{map[string]string{}, false},
	} {
		_, _, _, err := otlpTarget(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
		if (err != nil) != tc.fail {
			t.Errorf("%v: err = %v, want failure %v", tc.env, err, tc.fail)
		}
	}
}

// TestOverlaysOTLP renders every overlay and checks every container that
// exports traces: its endpoint's port agrees with its protocol, the
// endpoint names a Service of the overlay that exposes that port, the
// Service's pods admit the container's pods on it (NetworkPolicy ingress),
// and a container whose egress is restricted may send there.
func TestOverlaysOTLP(t *testing.T) {
	for _, o := range overlays {
		t.Run(o, func(t *testing.T) {
			objs := render(t, o)
			pods := podTemplates(objs)
			policies := all[networkingv1.NetworkPolicy](objs)
			exporters := 0
			for name, pod := range pods {
				for _, c := range pod.Spec.Containers {
					host, port, ok, err := otlpTarget(func(k string) (string, bool) {
						if e := env(c, k); e != nil {
							return e.Value, true
						}
						return "", false
					})
					if err != nil {
						t.Errorf("%s/%s: %v", name, c.Name, err)
						continue
					}
					if !ok {
						continue
					}
					exporters++
					svc := find[corev1.Service](objs, host)
					if svc == nil {
						t.Errorf("%s/%s: OTLP endpoint host %q is no Service of the overlay", name, c.Name, host)
						continue
					}
					if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return int(p.Port) == port }) {
						t.Errorf("%s/%s: Service %s exposes no port %d", name, c.Name, host, port)
					}
					var target *corev1.PodTemplateSpec
					for _, p := range pods {
						if labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(p.Labels)) {
							target = p
						}
					}
					if target == nil {
						t.Errorf("%s/%s: Service %s selects no pods", name, c.Name, host)
						continue
					}
					if !admits(policies, pod.Labels, target.Labels, port, networkingv1.PolicyTypeIngress) {
						t.Errorf("%s/%s: no NetworkPolicy admits its traces into %s on port %d", name, c.Name, host, port)
					}
					if !admits(policies, pod.Labels, target.Labels, port, networkingv1.PolicyTypeEgress) {
						t.Errorf("%s/%s: its NetworkPolicy egress does not allow %s port %d", name, c.Name, host, port)
					}
				}
			}
			if exporters < 2 {
				t.Errorf("%d containers export traces, want the coordinator's and the worker's", exporters)
			}
		})
	}
}

// admits reports whether the policies of one direction let traffic from
// pods labeled from to pods labeled to on TCP port: true when no policy
// of that direction selects the side it restricts (the default allows),
// else when one of them has a rule that matches.
func admits(policies []*networkingv1.NetworkPolicy, from, to map[string]string, port int, dir networkingv1.PolicyType) bool {
	side, peer := to, from
	if dir == networkingv1.PolicyTypeEgress {
		side, peer = from, to
	}
	selected := false
	for _, np := range policies {
		if !slices.Contains(np.Spec.PolicyTypes, dir) {
			continue
		}
		sel := labels.SelectorFromSet(np.Spec.PodSelector.MatchLabels)
		if !sel.Matches(labels.Set(side)) {
			continue
		}
		selected = true
		type rule struct {
			peers []networkingv1.NetworkPolicyPeer
			ports []networkingv1.NetworkPolicyPort
		}
		var rules []rule
		for _, r := range np.Spec.Ingress {
			if dir == networkingv1.PolicyTypeIngress {
				rules = append(rules, rule{r.From, r.Ports})
			}
		}
		for _, r := range np.Spec.Egress {
			if dir == networkingv1.PolicyTypeEgress {
				rules = append(rules, rule{r.To, r.Ports})
			}
		}
		for _, r := range rules {
			portOK := len(r.ports) == 0 || slices.ContainsFunc(r.ports, func(p networkingv1.NetworkPolicyPort) bool {
				return p.Port != nil && p.Port.IntValue() == port
			})
			peerOK := len(r.peers) == 0 || slices.ContainsFunc(r.peers, func(p networkingv1.NetworkPolicyPeer) bool {
				return p.PodSelector != nil && p.NamespaceSelector == nil && p.IPBlock == nil &&
					labels.SelectorFromSet(p.PodSelector.MatchLabels).Matches(labels.Set(peer))
			})
			if portOK && peerOK {
				return true
			}
		}
	}
	return !selected
}

// TestComposeOTLP: every service of docker-compose.yml that exports
// traces sends them to a port that speaks its protocol.
func TestComposeOTLP(t *testing.T) {
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
	exporters := 0
	for _, s := range p.Services {
		host, _, ok, err := otlpTarget(func(k string) (string, bool) {
			v, ok := s.Environment[k]
			if !ok || v == nil {
				return "", false
			}
			return *v, true
		})
		if err != nil {
			t.Errorf("service %s: %v", s.Name, err)
			continue
		}
		if !ok {
			continue
		}
		exporters++
		if _, err := p.GetService(host); err != nil {
			t.Errorf("service %s: OTLP endpoint host %q is no service: %v", s.Name, host, err)
		}
	}
	if exporters < 2 {
		t.Errorf("%d services export traces, want the coordinator and the worker at least", exporters)
	}
}

// TestOverlaysStartupAndPostgres: the worker has a startup probe long
// enough for its dependencies' waits at start (up to a minute each for the
// store and NATS) before its liveness probe counts; the Postgres
// NetworkPolicy admits what CloudNativePG documents: the operator's
// namespace and the instances themselves on 8000 and 5432.
func TestOverlaysStartupAndPostgres(t *testing.T) {
	for _, o := range overlays {
		t.Run(o, func(t *testing.T) {
			objs := render(t, o)
			w := podTemplates(objs)["rath-worker"]
			if w == nil {
				t.Fatal("no rath-worker")
			}
			for _, c := range w.Spec.Containers {
				sp := c.StartupProbe
				if sp == nil || sp.HTTPGet == nil || sp.HTTPGet.Path != "/healthz" {
					t.Errorf("worker/%s: startup probe %+v, want GET /healthz", c.Name, sp)
					continue
				}
				if d := time.Duration(sp.PeriodSeconds*sp.FailureThreshold) * time.Second; d < 2*time.Minute {
					t.Errorf("worker/%s: startup probe gives %s, want at least 2m (a minute each for the store and NATS)", c.Name, d)
				}
			}
			pg := find[networkingv1.NetworkPolicy](objs, "rath-pg")
			if pg == nil {
				t.Fatal("no NetworkPolicy rath-pg")
			}
			instance := map[string]string{"cnpg.io/cluster": "rath-pg"}
			for _, port := range []int{5432, 8000} {
				if !admits([]*networkingv1.NetworkPolicy{pg}, instance, instance, port, networkingv1.PolicyTypeIngress) {
					t.Errorf("rath-pg: instances cannot reach each other on %d", port)
				}
				if !admitsNamespace(pg, "cnpg-system", port) {
					t.Errorf("rath-pg: the operator (namespace cnpg-system) cannot reach the instances on %d", port)
				}
			}
			worker := map[string]string{"app.kubernetes.io/name": "rath-worker"}
			if admits([]*networkingv1.NetworkPolicy{pg}, worker, instance, 8000, networkingv1.PolicyTypeIngress) {
				t.Error("rath-pg: workers reach the instance manager on 8000")
			}
		})
	}
}

// admitsNamespace reports whether np admits pods of namespace ns on port.
func admitsNamespace(np *networkingv1.NetworkPolicy, ns string, port int) bool {
	for _, r := range np.Spec.Ingress {
		portOK := len(r.Ports) == 0 || slices.ContainsFunc(r.Ports, func(p networkingv1.NetworkPolicyPort) bool {
			return p.Port != nil && p.Port.IntValue() == port
		})
		peerOK := slices.ContainsFunc(r.From, func(p networkingv1.NetworkPolicyPeer) bool {
			return p.NamespaceSelector != nil && p.PodSelector == nil &&
				labels.SelectorFromSet(p.NamespaceSelector.MatchLabels).Matches(labels.Set{"kubernetes.io/metadata.name": ns})
		})
		if portOK && peerOK {
			return true
		}
	}
	return false
}
