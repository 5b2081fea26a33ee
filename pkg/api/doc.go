// Package api holds the wire types of the coordinator's HTTP API
// (docs/api.md): every request and response body, and the typed run and
// step statuses. The coordinator's handlers encode them and pkg/client
// decodes them, so the two cannot drift.
//
// It is a leaf: it imports only the standard library and value types
// (pkg/session; pkg/store's Info, Page and Relative; pkg/lineage;
// pkg/memory's items and hits), never the coordinator, a store
// implementation, the workspace store or a transport. Nothing outside the
// coordinator imports the coordinator for a type; it imports this package.
//
// Files are grouped by the API's areas: runs, sessions, lineage, admin,
// memory, tokens. A field's JSON name is its documented name in
// docs/api.md; renaming one is a breaking change of the API.
package api
