package memory

import "context"

type versionKey struct{}

// WithVersion returns ctx saying that the memory calls made with it act for
// session version id (the step's input or output). A store shared by
// several tenants (the cluster workers') routes such calls to the
// version's tenant; other stores ignore it.
func WithVersion(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, versionKey{}, id)
}

// VersionFrom returns the version WithVersion put in ctx ("" when none).
func VersionFrom(ctx context.Context) string {
	id, _ := ctx.Value(versionKey{}).(string)
	return id
}
