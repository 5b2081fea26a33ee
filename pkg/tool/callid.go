package tool

import "context"

type callIDKey struct{}

// WithCallID returns ctx carrying the model's id of the tool call being
// run; the agent loop sets it before [Tool.Call], so wrappers (tracing,
// metrics) can name the call.
func WithCallID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, callIDKey{}, id)
}

// CallID returns the tool call id [WithCallID] stored in ctx, or "".
func CallID(ctx context.Context) string {
	id, _ := ctx.Value(callIDKey{}).(string)
	return id
}
