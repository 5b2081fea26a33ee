package deploy

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
)

var overlays = []string{"dev", "prod", "prod-hpa"}

func render(t *testing.T, overlay string) []Object {
	t.Helper()
	objs, err := Render("k8s/overlays/" + overlay)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func find[T any](objs []Object, name string) *T {
	for _, o := range objs {
		if v, ok := o.Value.(*T); ok && o.Name == name {
			return v
		}
	}
	return nil
}

func all[T any](objs []Object) []*T {
	var out []*T
	for _, o := range objs {
		if v, ok := o.Value.(*T); ok {
			out = append(out, v)
		}
	}
	return out
}

// podTemplates returns the pod templates of the Deployments and
// StatefulSets by workload name.
func podTemplates(objs []Object) map[string]*corev1.PodTemplateSpec {
	out := map[string]*corev1.PodTemplateSpec{}
	for _, d := range all[appsv1.Deployment](objs) {
		out[d.Name] = &d.Spec.Template
	}
	for _, s := range all[appsv1.StatefulSet](objs) {
		out[s.Name] = &s.Spec.Template
	}
	return out
}

func env(c corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

func arg(c corev1.Container, flag string) string {
	for i, a := range c.Args {
		if a == flag && i+1 < len(c.Args) {
			return c.Args[i+1]
		}
	}
	return ""
}

// TestStrictDecodingRejectsTypos shows the decoder is strict: a misspelled
// field in a built-in kind and in a custom resource, and an unknown kind,
// all fail, naming what is wrong.
func TestStrictDecodingRejectsTypos(t *testing.T) {
	for name, tc := range map[string]struct{ doc, want string }{
		"deployment": {"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  replicas: 1\n  template:\n    spec:\n      containers: [{name: c, image: i, porrts: []}]\n", `unknown field "spec.template.spec.containers[0].porrts"`},
		"duplicate":  {"apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec:\n  type: ClusterIP\n  type: NodePort\n", `"type" already set`},
		"keda":       {"apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: x}\nspec:\n  scaleTargetRef: {name: w}\n  maxReplicas: 3\n  triggers: []\n", `unknown field "maxReplicas"`},
		"cnpg":       {"apiVersion: postgresql.cnpg.io/v1\nkind: Cluster\nmetadata: {name: x}\nspec:\n  instances: 3\n  storage: {size: 1Gi}\n  postgres: {}\n", `unknown field "postgres"`},
		"kind":       {"apiVersion: v1\nkind: Bogus\nmetadata: {name: x}\n", `no kind "Bogus"`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Decode([]byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Decode: error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestOverlaysRender renders every overlay, decodes every document
// strictly, and checks what the deployment relies on across documents.
func TestOverlaysRender(t *testing.T) {
	for _, o := range overlays {
		t.Run(o, func(t *testing.T) {
			objs := render(t, o)
			pods := podTemplates(objs)
			for _, name := range []string{"rath-coordinator", "rath-worker", "rath-jaeger"} {
				if find[appsv1.Deployment](objs, name) == nil {
					t.Errorf("no Deployment %s", name)
				}
			}
			if find[appsv1.StatefulSet](objs, "rath-nats") == nil || find[PGCluster](objs, "rath-pg") == nil {
				t.Fatal("no NATS StatefulSet or CloudNativePG Cluster")
			}
			for _, o := range objs {
				if ns := namespaceOf(o.Value); o.Kind != "Namespace" && ns != "rath" {
					t.Errorf("%s %s in namespace %q, want rath", o.Kind, o.Name, ns)
				}
			}
			checkWorkloads(t, objs)
			checkSelectors(t, objs, pods)
			checkSecrets(t, objs, pods, o)
			checkWorker(t, objs, o)
			checkGoMaxProcs(t, pods)
			checkGoMemLimit(t, pods)
		})
	}
}

// checkGoMaxProcs: every Go process of the cluster (coordinator, worker,
// NATS) runs as many scheduler threads as its pod asks for cores, the CPU
// request rounded up, not one per core of its node (docs/deploy.md, "Go's
// scheduler").
func checkGoMaxProcs(t *testing.T, pods map[string]*corev1.PodTemplateSpec) {
	t.Helper()
	for _, name := range []string{"rath-coordinator", "rath-worker", "rath-nats"} {
		c, ok := mainContainer(t, pods, name)
		if !ok {
			continue
		}
		e := env(c, "GOMAXPROCS")
		if e == nil || e.ValueFrom == nil || e.ValueFrom.ResourceFieldRef == nil {
			t.Errorf("%s: GOMAXPROCS = %v, want it from the container's CPU request", name, e)
			continue
		}
		ref := e.ValueFrom.ResourceFieldRef
		if ref.Resource != "requests.cpu" || (ref.ContainerName != "" && ref.ContainerName != c.Name) || ref.Divisor.String() != "1" {
			t.Errorf("%s: GOMAXPROCS from %+v, want requests.cpu of %s, divisor 1 (whole cores, rounded up)", name, ref, c.Name)
		}
		if cpu, ok := c.Resources.Requests[corev1.ResourceCPU]; !ok || cpu.IsZero() {
			t.Errorf("%s: no CPU request, so GOMAXPROCS would fall to the node's default", name)
		}
	}
}

// checkGoMemLimit: the worker and NATS pods set GOMEMLIMIT below their
// memory limit, so the Go collector works harder before the kernel kills
// the container (NATS' image sets none of its own; docs/deploy.md).
func checkGoMemLimit(t *testing.T, pods map[string]*corev1.PodTemplateSpec) {
	t.Helper()
	for _, name := range []string{"rath-worker", "rath-nats"} {
		c, ok := mainContainer(t, pods, name)
		if !ok {
			continue
		}
		e := env(c, "GOMEMLIMIT")
		if e == nil || e.Value == "" {
			t.Errorf("%s: no GOMEMLIMIT", name)
			continue
		}
		// Go writes MiB where Kubernetes writes Mi.
		soft, err := resource.ParseQuantity(strings.TrimSuffix(e.Value, "B"))
		if err != nil {
			t.Errorf("%s: GOMEMLIMIT %q: %v", name, e.Value, err)
			continue
		}
		limit, ok := c.Resources.Limits[corev1.ResourceMemory]
		if !ok || soft.Cmp(limit) >= 0 {
			t.Errorf("%s: GOMEMLIMIT %s, memory limit %s: want the soft limit below the hard one", name, e.Value, limit.String())
		}
	}
}

// mainContainer returns the first container of pod template name, or
// reports that there is none.
func mainContainer(t *testing.T, pods map[string]*corev1.PodTemplateSpec, name string) (corev1.Container, bool) {
	t.Helper()
	pod := pods[name]
	if pod == nil || len(pod.Spec.Containers) == 0 {
		t.Errorf("no pod template %s with a container", name)
		return corev1.Container{}, false
	}
	return pod.Spec.Containers[0], true
}

func namespaceOf(v any) string {
	switch o := v.(type) {
	case interface{ GetNamespace() string }:
		return o.GetNamespace()
	case *ScaledObject:
		return o.Metadata.Namespace
	case *PGCluster:
		return o.Metadata.Namespace
	}
	return ""
}

// checkWorkloads: selectors select their own templates; every container
// runs as non-root without privilege escalation, with requests, a memory
// limit and a readiness probe.
func checkWorkloads(t *testing.T, objs []Object) {
	t.Helper()
	type workload struct {
		name     string
		selector map[string]string
		tmpl     corev1.PodTemplateSpec
	}
	var ws []workload
	for _, d := range all[appsv1.Deployment](objs) {
		ws = append(ws, workload{d.Name, d.Spec.Selector.MatchLabels, d.Spec.Template})
	}
	for _, s := range all[appsv1.StatefulSet](objs) {
		ws = append(ws, workload{s.Name, s.Spec.Selector.MatchLabels, s.Spec.Template})
	}
	for _, w := range ws {
		if len(w.selector) == 0 || !labels.SelectorFromSet(w.selector).Matches(labels.Set(w.tmpl.Labels)) {
			t.Errorf("%s: selector %v does not match its pod labels %v", w.name, w.selector, w.tmpl.Labels)
		}
		psc := w.tmpl.Spec.SecurityContext
		if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
			t.Errorf("%s: pod securityContext.runAsNonRoot is not true", w.name)
		}
		for _, c := range w.tmpl.Spec.Containers {
			sc := c.SecurityContext
			switch {
			case sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
				t.Errorf("%s/%s: allowPrivilegeEscalation is not false", w.name, c.Name)
			case sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL"):
				t.Errorf("%s/%s: capabilities do not drop ALL", w.name, c.Name)
			case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
				t.Errorf("%s/%s: root filesystem is writable", w.name, c.Name)
			}
			if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
				t.Errorf("%s/%s: want cpu and memory requests and a memory limit, got %v", w.name, c.Name, c.Resources)
			}
			if c.ReadinessProbe == nil {
				t.Errorf("%s/%s: no readiness probe", w.name, c.Name)
			}
		}
	}
	// PodDisruptionBudgets cover the coordinator, workers and NATS.
	for _, name := range []string{"rath-coordinator", "rath-worker", "rath-nats"} {
		if find[policyv1.PodDisruptionBudget](objs, name) == nil {
			t.Errorf("no PodDisruptionBudget %s", name)
		}
	}
}

// checkSelectors: every Service, PDB and NetworkPolicy selects pods that
// exist (a typo in a label would silently select nothing).
func checkSelectors(t *testing.T, objs []Object, pods map[string]*corev1.PodTemplateSpec) {
	t.Helper()
	cnpg := labels.Set{"cnpg.io/cluster": "rath-pg"} // CloudNativePG labels its instances so
	selects := func(sel map[string]string) bool {
		s := labels.SelectorFromSet(sel)
		if s.Matches(cnpg) {
			return true
		}
		for _, p := range pods {
			if s.Matches(labels.Set(p.Labels)) {
				return true
			}
		}
		return false
	}
	for _, s := range all[corev1.Service](objs) {
		if !selects(s.Spec.Selector) {
			t.Errorf("Service %s selects no pods: %v", s.Name, s.Spec.Selector)
		}
	}
	for _, p := range all[policyv1.PodDisruptionBudget](objs) {
		if !selects(p.Spec.Selector.MatchLabels) {
			t.Errorf("PodDisruptionBudget %s selects no pods", p.Name)
		}
	}
	for _, np := range all[networkingv1.NetworkPolicy](objs) {
		if len(np.Spec.PodSelector.MatchLabels) > 0 && !selects(np.Spec.PodSelector.MatchLabels) {
			t.Errorf("NetworkPolicy %s selects no pods", np.Name)
		}
		for _, r := range np.Spec.Ingress {
			for _, peer := range r.From {
				if peer.PodSelector != nil && peer.NamespaceSelector == nil && !selects(peer.PodSelector.MatchLabels) {
					t.Errorf("NetworkPolicy %s admits pods %v that do not exist", np.Name, peer.PodSelector.MatchLabels)
				}
			}
		}
	}
	if find[networkingv1.NetworkPolicy](objs, "default-deny-ingress") == nil {
		t.Error("no default-deny NetworkPolicy")
	}
}

// checkSecrets: the Secrets the pods read are CloudNativePG's app Secret,
// optional ones, or one the overlay generates or its docs ask for.
func checkSecrets(t *testing.T, objs []Object, pods map[string]*corev1.PodTemplateSpec, overlay string) {
	t.Helper()
	known := map[string]bool{"rath-pg-app": true} // written by CloudNativePG
	for _, s := range all[corev1.Secret](objs) {
		known[s.Name] = true
	}
	if overlay != "dev" {
		// created by the operator (overlays/prod/kustomization.yaml)
		known["rath-model"], known["rath-pg-worker"] = true, true
	}
	for name, p := range pods {
		for _, c := range p.Spec.Containers {
			for _, e := range c.Env {
				ref := e.ValueFrom
				if ref == nil || ref.SecretKeyRef == nil {
					continue
				}
				if !known[ref.SecretKeyRef.Name] && (ref.SecretKeyRef.Optional == nil || !*ref.SecretKeyRef.Optional) {
					t.Errorf("%s: %s reads Secret %s, which nothing provides", name, e.Name, ref.SecretKeyRef.Name)
				}
			}
		}
	}
}

// checkWorker: the drain fits the grace period, the autoscaler is the
// overlay's, and KEDA watches the consumer the workers pull from.
func checkWorker(t *testing.T, objs []Object, overlay string) {
	t.Helper()
	d := find[appsv1.Deployment](objs, "rath-worker")
	c := d.Spec.Template.Spec.Containers[0]
	drain, err := time.ParseDuration(arg(c, "--shutdown-timeout"))
	if err != nil {
		t.Fatalf("worker --shutdown-timeout: %v", err)
	}
	// The drain, the NATS drain bound (5s, app.NATSOptions) and slack.
	grace := time.Duration(*d.Spec.Template.Spec.TerminationGracePeriodSeconds) * time.Second
	if grace < drain+5*time.Second+5*time.Second {
		t.Errorf("worker terminationGracePeriodSeconds %s is too short for --shutdown-timeout %s", grace, drain)
	}
	// Workers log in as rath_worker_login, which the Postgres cluster keeps
	// a plain member of rath_worker, never as the owner (issue #19).
	if e := env(c, "RATH_STORE"); e == nil || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != "rath-pg-worker" {
		t.Errorf("worker RATH_STORE %+v: want the Secret rath-pg-worker", e)
	}
	pg := find[PGCluster](objs, "rath-pg")
	var role *PGRole
	if pg.Spec.Managed != nil {
		for i := range pg.Spec.Managed.Roles {
			if pg.Spec.Managed.Roles[i].Name == "rath_worker_login" {
				role = &pg.Spec.Managed.Roles[i]
			}
		}
	}
	if role == nil || !role.Login || role.Superuser || role.BypassRLS || !slices.Equal(role.InRoles, []string{"rath_worker"}) ||
		role.PasswordSecret == nil || role.PasswordSecret.Name != "rath-pg-worker" {
		t.Errorf("rath-pg managed role rath_worker_login = %+v: want a login in rath_worker only, password from rath-pg-worker", role)
	}
	coord := find[appsv1.Deployment](objs, "rath-coordinator")
	wantReplicas := map[string]string{"dev": "1", "prod": "3", "prod-hpa": "3"}[overlay]
	for _, dep := range []*appsv1.Deployment{d, coord} {
		if e := env(dep.Spec.Template.Spec.Containers[0], "RATH_NATS_REPLICAS"); e == nil || e.Value != wantReplicas {
			t.Errorf("%s: RATH_NATS_REPLICAS = %v, want %s", dep.Name, e, wantReplicas)
		}
	}
	// Both read the operator's sandbox policy from the ConfigMap.
	for _, dep := range []*appsv1.Deployment{d, coord} {
		c := dep.Spec.Template.Spec.Containers[0]
		e := env(c, "RATH_SANDBOX_POLICY")
		mounted := slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
			return e != nil && strings.HasPrefix(e.Value, m.MountPath+"/") && m.Name == "sandbox-policy"
		})
		cm := slices.ContainsFunc(dep.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
			return v.Name == "sandbox-policy" && v.ConfigMap != nil && strings.HasPrefix(v.ConfigMap.Name, "rath-sandbox-policy")
		})
		if !mounted || !cm {
			t.Errorf("%s: RATH_SANDBOX_POLICY = %v, mounted %v from the rath-sandbox-policy ConfigMap %v; want the operator's policy file", dep.Name, e, mounted, cm)
		}
	}
	var policy string
	for _, o := range all[corev1.ConfigMap](objs) {
		if strings.HasPrefix(o.Name, "rath-sandbox-policy") {
			policy = o.Data["sandbox-policy.yaml"]
		}
	}
	if !regexp.MustCompile(`(?m)^backends: \[local\]$`).MatchString(policy) {
		t.Errorf("rath-sandbox-policy states no backends: [local]:\n%s", policy)
	}
	nats := find[appsv1.StatefulSet](objs, "rath-nats")
	if got := *nats.Spec.Replicas; got != map[string]int32{"dev": 1, "prod": 3, "prod-hpa": 3}[overlay] {
		t.Errorf("NATS replicas %d", got)
	}
	conf := find[corev1.ConfigMap](objs, "rath-nats").Data["nats.conf"]
	if !regexp.MustCompile(`(?m)^\s*sync_interval:\s*always\s*$`).MatchString(conf) || !strings.Contains(conf, "max_payload: 2MB") {
		t.Errorf("nats.conf lacks sync_interval: always or max_payload: 2MB:\n%s", conf)
	}
	if overlay == "dev" && (coord.Spec.Replicas == nil || *coord.Spec.Replicas != 1) {
		t.Errorf("dev coordinator replicas %v, want 1", coord.Spec.Replicas)
	}
	if overlay != "dev" && (coord.Spec.Replicas == nil || *coord.Spec.Replicas != 2) {
		t.Errorf("coordinator replicas %v, want 2", coord.Spec.Replicas)
	}

	so := find[ScaledObject](objs, "rath-worker")
	hpa := find[autoscalingv2.HorizontalPodAutoscaler](objs, "rath-worker")
	switch overlay {
	case "prod":
		if so == nil || hpa != nil {
			t.Fatalf("prod: ScaledObject %v, HPA %v; want KEDA only", so != nil, hpa != nil)
		}
		if so.Spec.ScaleTargetRef.Name != d.Name || len(so.Spec.Triggers) != 1 {
			t.Fatalf("ScaledObject targets %q with %d triggers", so.Spec.ScaleTargetRef.Name, len(so.Spec.Triggers))
		}
		tr := so.Spec.Triggers[0]
		stream, consumer := busNames(t)
		if tr.Type != "nats-jetstream" || tr.Metadata["stream"] != stream || tr.Metadata["consumer"] != consumer {
			t.Errorf("KEDA trigger %s on %s/%s, want nats-jetstream on %s/%s (internal/bus)", tr.Type,
				tr.Metadata["stream"], tr.Metadata["consumer"], stream, consumer)
		}
		if d.Spec.Replicas != nil {
			t.Error("worker Deployment sets replicas under KEDA: every apply would reset the scale")
		}
	case "prod-hpa":
		if so != nil || hpa == nil {
			t.Fatalf("prod-hpa: ScaledObject %v, HPA %v; want the HPA only", so != nil, hpa != nil)
		}
		if hpa.Spec.ScaleTargetRef.Name != d.Name || d.Spec.Replicas != nil {
			t.Errorf("HPA targets %q; worker replicas %v", hpa.Spec.ScaleTargetRef.Name, d.Spec.Replicas)
		}
	case "dev":
		if so != nil || hpa != nil {
			t.Error("dev has an autoscaler")
		}
	}
}

// busNames reads the job stream's name and the default queue's consumer
// name from internal/bus, the code the workers run (this module cannot
// import it).
func busNames(t *testing.T) (stream, consumer string) {
	t.Helper()
	src, err := os.ReadFile("../internal/bus/bus.go")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`JobsStream\s*=\s*"([^"]+)"`).FindSubmatch(src)
	cons, err := os.ReadFile("../internal/bus/consumer.go")
	if err != nil {
		t.Fatal(err)
	}
	c := regexp.MustCompile(`func ConsumerName\(queue string\) string \{ return "([^"]+)" \+ queue \}`).FindSubmatch(cons)
	if m == nil || c == nil {
		t.Fatal("internal/bus no longer declares JobsStream or ConsumerName as this test expects; update both")
	}
	return string(m[1]), string(c[1]) + "default"
}
