// Package deploy holds the tests of Rath's deployment files: the
// Kubernetes manifests under k8s/ (kustomize base, components and
// overlays) and the root docker-compose.yml. It is a module of its own so
// the Kubernetes and Compose libraries the tests need stay out of Rath's
// main module; scripts/test.sh runs it.
//
// The manifests are rendered with kustomize's own library (krusty) and
// every document is decoded strictly: the Kubernetes kinds into the
// k8s.io/api types (unknown or duplicate fields fail), the custom
// resources (KEDA's ScaledObject, CloudNativePG's Cluster) into the
// structs in this package, which reject fields they do not declare.
package deploy
