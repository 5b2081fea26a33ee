package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// tracerKey carries a pgx.QueryTracer for the pools opened under a context.
type tracerKey struct{}

// WithQueryTracer returns a context under which [Open] (and the run store's
// Postgres connections, which use [ConfigFromContext]) install tr on every
// connection: `rathctl bench` counts the statements a step makes with it.
func WithQueryTracer(ctx context.Context, tr pgx.QueryTracer) context.Context {
	return context.WithValue(ctx, tracerKey{}, tr)
}

// queryTracer returns the tracer [WithQueryTracer] set, and whether there
// was one.
func queryTracer(ctx context.Context) (pgx.QueryTracer, bool) {
	tr, ok := ctx.Value(tracerKey{}).(pgx.QueryTracer)
	return tr, ok && tr != nil
}

// ConfigFromContext applies what the context carries for connections (a
// query tracer) to cfg.
func ConfigFromContext(ctx context.Context, cfg *pgx.ConnConfig) {
	if tr, ok := queryTracer(ctx); ok {
		cfg.Tracer = tr
	}
}
