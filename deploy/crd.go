package deploy

// The custom resources the manifests use, with the fields Rath sets: a
// strict decode into them rejects a misspelled or misplaced field, as the
// CRDs' OpenAPI schemas would on apply.

// Meta is the object metadata the manifests set.
type Meta struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ScaledObject is KEDA's keda.sh/v1alpha1 ScaledObject.
type ScaledObject struct {
	APIVersion string           `json:"apiVersion"`
	Kind       string           `json:"kind"`
	Metadata   Meta             `json:"metadata"`
	Spec       ScaledObjectSpec `json:"spec"`
}

// ScaledObjectSpec is a ScaledObject's spec.
type ScaledObjectSpec struct {
	ScaleTargetRef struct {
		APIVersion string `json:"apiVersion,omitempty"`
		Kind       string `json:"kind,omitempty"`
		Name       string `json:"name"`
	} `json:"scaleTargetRef"`
	MinReplicaCount *int32 `json:"minReplicaCount,omitempty"`
	MaxReplicaCount *int32 `json:"maxReplicaCount,omitempty"`
	PollingInterval *int32 `json:"pollingInterval,omitempty"`
	CooldownPeriod  *int32 `json:"cooldownPeriod,omitempty"`
	Advanced        *struct {
		HorizontalPodAutoscalerConfig *struct {
			Behavior *HPABehavior `json:"behavior,omitempty"`
		} `json:"horizontalPodAutoscalerConfig,omitempty"`
	} `json:"advanced,omitempty"`
	Triggers []struct {
		Type     string            `json:"type"`
		Metadata map[string]string `json:"metadata"`
	} `json:"triggers"`
}

// HPABehavior is the part of autoscaling/v2's behavior the manifests set.
type HPABehavior struct {
	ScaleDown *struct {
		StabilizationWindowSeconds *int32 `json:"stabilizationWindowSeconds,omitempty"`
		Policies                   []struct {
			Type          string `json:"type"`
			Value         int32  `json:"value"`
			PeriodSeconds int32  `json:"periodSeconds"`
		} `json:"policies,omitempty"`
	} `json:"scaleDown,omitempty"`
}

// PGCluster is CloudNativePG's postgresql.cnpg.io/v1 Cluster.
type PGCluster struct {
	APIVersion string        `json:"apiVersion"`
	Kind       string        `json:"kind"`
	Metadata   Meta          `json:"metadata"`
	Spec       PGClusterSpec `json:"spec"`
}

// PGClusterSpec is a Cluster's spec.
type PGClusterSpec struct {
	Instances             int    `json:"instances"`
	ImageName             string `json:"imageName,omitempty"`
	PrimaryUpdateStrategy string `json:"primaryUpdateStrategy,omitempty"`
	PostgreSQL            *struct {
		Parameters  map[string]string `json:"parameters,omitempty"`
		Synchronous *struct {
			Method         string `json:"method"`
			Number         int    `json:"number"`
			DataDurability string `json:"dataDurability,omitempty"`
		} `json:"synchronous,omitempty"`
	} `json:"postgresql,omitempty"`
	Bootstrap *struct {
		InitDB *struct {
			Database string `json:"database"`
			Owner    string `json:"owner"`
		} `json:"initdb,omitempty"`
	} `json:"bootstrap,omitempty"`
	Storage struct {
		Size         string `json:"size"`
		StorageClass string `json:"storageClass,omitempty"`
	} `json:"storage"`
	Resources *struct {
		Requests map[string]string `json:"requests,omitempty"`
		Limits   map[string]string `json:"limits,omitempty"`
	} `json:"resources,omitempty"`
	Monitoring *struct {
		EnablePodMonitor bool `json:"enablePodMonitor"`
	} `json:"monitoring,omitempty"`
	Managed *struct {
		Roles []PGRole `json:"roles,omitempty"`
	} `json:"managed,omitempty"`
}

// PGRole is a role CloudNativePG keeps in the database (spec.managed.roles).
type PGRole struct {
	Name           string   `json:"name"`
	Comment        string   `json:"comment,omitempty"`
	Ensure         string   `json:"ensure,omitempty"`
	Login          bool     `json:"login,omitempty"`
	Superuser      bool     `json:"superuser"`
	BypassRLS      bool     `json:"bypassrls"`
	InRoles        []string `json:"inRoles,omitempty"`
	PasswordSecret *struct {
		Name string `json:"name"`
	} `json:"passwordSecret,omitempty"`
}
