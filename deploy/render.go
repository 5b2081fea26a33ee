package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// Object is one rendered document, decoded.
type Object struct {
	Kind, Name string
	// Value is a pointer to a k8s.io/api type, *ScaledObject or *PGCluster.
	Value any
}

// Render builds the kustomization in dir (kustomize build) and strictly
// decodes every document it produces. The error names the document and the
// offending field.
func Render(dir string) ([]Object, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	var out []Object
	for _, r := range m.Resources() {
		doc, err := r.AsYAML()
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", r.GetKind(), r.GetName(), err)
		}
		v, err := Decode(doc)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", r.GetKind(), r.GetName(), err)
		}
		out = append(out, Object{Kind: r.GetKind(), Name: r.GetName(), Value: v})
	}
	return out, nil
}

// Decode strictly decodes one YAML document: a Kubernetes kind into its
// k8s.io/api type, a ScaledObject or CloudNativePG Cluster into this
// package's structs. Unknown kinds, unknown fields and duplicate keys are
// errors.
func Decode(doc []byte) (any, error) {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return nil, err
	}
	switch head.APIVersion + " " + head.Kind {
	case "keda.sh/v1alpha1 ScaledObject":
		return decodeStrict(doc, &ScaledObject{})
	case "postgresql.cnpg.io/v1 Cluster":
		return decodeStrict(doc, &PGCluster{})
	}
	s, err := newSerializer()
	if err != nil {
		return nil, err
	}
	obj, _, err := s.Decode(doc, nil, nil)
	if err != nil {
		return nil, err
	}
	return obj, nil
}

// newSerializer returns a strict decoder of the built-in kinds the
// manifests use.
func newSerializer() (*kjson.Serializer, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, policyv1.AddToScheme,
		networkingv1.AddToScheme, autoscalingv2.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	return kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme, scheme,
		kjson.SerializerOptions{Yaml: true, Strict: true}), nil
}

func decodeStrict[T any](doc []byte, v *T) (*T, error) {
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return nil, fmt.Errorf("strict decoding error: %w", err)
	}
	return v, nil
}
