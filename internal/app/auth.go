package app

import (
	"context"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/rath-run/rath/internal/auth"
	"github.com/rath-run/rath/internal/natsauth"
	"github.com/rath-run/rath/pkg/lineage"
	"github.com/rath-run/rath/pkg/store/sqlitestore"
)

// TokenStore returns the API token store in the backend's database: the run
// store's connections on Postgres, the embedded store's on SQLite (which
// serves only the default tenant).
func (b *Backend) TokenStore() (*auth.Store, error) {
	if sq, ok := b.Store.(*sqlitestore.Store); ok {
		return auth.NewStore(sq.DB(), false), nil
	}
	if b.runsDB == nil {
		return nil, fmt.Errorf("token store: the backend has no run store database")
	}
	return auth.NewStore(b.runsDB, true), nil
}

// TenantPools returns per-tenant confined stores for a Postgres store URL
// (nil for SQLite, which serves only the default tenant). The caller
// closes them.
func TenantPools(storeURL string) (*auth.TenantPools, error) {
	if !strings.HasPrefix(storeURL, "postgres://") && !strings.HasPrefix(storeURL, "postgresql://") {
		return nil, nil
	}
	return auth.NewTenantPools(storeURL, 0)
}

// AuthMode resolves the coordinator's --auth setting: "required", "off",
// or "auto" (""), which is required when a bootstrap token is set or the
// token store holds a live token, off otherwise.
func AuthMode(ctx context.Context, mode, bootstrap string, tokens *auth.Store) (bool, error) {
	switch mode {
	case "required":
		return true, nil
	case "off":
		if bootstrap != "" {
			return false, fmt.Errorf("--auth off with RATH_TOKEN set: unset one")
		}
		return false, nil
	case "", "auto":
		if bootstrap != "" {
			return true, nil
		}
		live, err := tokens.Live(ctx)
		if err != nil {
			return false, err
		}
		return live > 0, nil
	}
	return false, fmt.Errorf("--auth %q: want required, off or auto", mode)
}

// NATSConnectorAs is [NATSConnector] presenting the NATS credentials getenv
// names (RATH_NATS_USER and RATH_NATS_PASSWORD or RATH_NATS_PASSWORD_FILE,
// or RATH_NATS_CREDS; see package natsauth) for role. Without credentials
// it connects as NATSConnector does.
func NATSConnectorAs(url, name string, role natsauth.Role, getenv func(string) string) (func() (*nats.Conn, error), error) {
	creds, err := natsauth.ClientOptions(role, getenv)
	if err != nil {
		return nil, err
	}
	return func() (*nats.Conn, error) {
		opts := append(NATSOptions(name), creds...)
		return nats.Connect(url, opts...)
	}, nil
}

// Retention returns gc, pins and redaction over the backend's database
// (coordinator.Config.Retention, for requests bound to no tenant's pools):
// the embedded store's connection on SQLite, the run store's on Postgres.
func (b *Backend) Retention() (*lineage.Retention, error) {
	if sq, ok := b.Store.(*sqlitestore.Store); ok {
		return &lineage.Retention{DB: sq.DB(), Dialect: lineage.SQLite}, nil
	}
	if b.runsDB == nil {
		return nil, fmt.Errorf("retention: the backend has no run store database")
	}
	return &lineage.Retention{DB: b.runsDB, Dialect: lineage.Postgres}, nil
}
