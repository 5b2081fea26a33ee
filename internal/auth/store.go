package auth

import (
	"context"
	"crypto/subtle"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/rath-run/rath/pkg/api"
)

// Errors of the token store and the authenticator.
var (
	// ErrUnauthenticated: no token, or one that is unknown, revoked or
	// expired. The four are one error so that a caller learns nothing about
	// tokens it does not hold.
	ErrUnauthenticated = errors.New("missing, unknown, revoked or expired bearer token")
	// ErrForbidden: the token is valid but its scope or tenant does not
	// allow the operation.
	ErrForbidden = errors.New("forbidden")
	// ErrNotFound: no token with that id (in the caller's tenant).
	ErrNotFound = errors.New("token not found")
	// ErrSingleTenant: the embedded store serves only the default tenant.
	ErrSingleTenant = errors.New("the embedded (SQLite) store serves only the default tenant; tenants need Postgres")
)

// Token is a stored token as listed: never its secret.
type Token struct {
	ID         string     `json:"id"`
	Name       string     `json:"name,omitempty"`
	Tenant     string     `json:"tenant"`
	Scope      Scope      `json:"scope"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at,omitempty"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
}

// CreateParams describes a token to create.
type CreateParams struct {
	Name string
	// Tenant defaults to [DefaultTenant].
	Tenant string
	Scope  Scope
	// TTL, when positive, makes the token expire that long after creation.
	TTL time.Duration
}

// lastUsedEvery is how stale a token's last_used_at may get before a use
// writes it again.
const lastUsedEvery = time.Minute

// Store keeps API tokens (table api_tokens, migration 00011) in the
// database/sql database of the graph store, Postgres or SQLite. It is safe
// for concurrent use.
type Store struct {
	db *sql.DB
	// multiTenant: the database is Postgres, which enforces tenants with
	// row-level security; SQLite serves only the default tenant.
	multiTenant bool
	now         func() time.Time
}

// NewStore returns a token store over db. multiTenant says the database
// is Postgres (tenants other than [DefaultTenant] are allowed).
func NewStore(db *sql.DB, multiTenant bool) *Store {
	return &Store{db: db, multiTenant: multiTenant, now: time.Now}
}

func (s *Store) ts() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// Create stores a new token and returns it with its secret, which is not
// kept anywhere and cannot be shown again.
func (s *Store) Create(ctx context.Context, p CreateParams) (Token, string, error) {
	if p.Tenant == "" {
		p.Tenant = DefaultTenant
	}
	if err := ValidTenant(p.Tenant); err != nil {
		return Token{}, "", err
	}
	if !s.multiTenant && p.Tenant != DefaultTenant {
		return Token{}, "", ErrSingleTenant
	}
	if !p.Scope.Valid() {
		return Token{}, "", fmt.Errorf("scope %q: want read, submit or admin", p.Scope)
	}
	if len(p.Name) > 200 {
		return Token{}, "", fmt.Errorf("name: %d bytes exceeds 200", len(p.Name))
	}
	if p.TTL < 0 {
		return Token{}, "", fmt.Errorf("ttl: %s is negative", p.TTL)
	}
	id, err := newID()
	if err != nil {
		return Token{}, "", err
	}
	secret, hash, err := NewToken()
	if err != nil {
		return Token{}, "", err
	}
	t := Token{ID: id, Name: p.Name, Tenant: p.Tenant, Scope: p.Scope, CreatedAt: s.ts()}
	if p.TTL > 0 {
		exp := t.CreatedAt.Add(p.TTL)
		t.ExpiresAt = &exp
	}
	if _, err := s.db.ExecContext(ctx,
		`INSERT INTO api_tokens (id, hash, name, tenant, scope, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		t.ID, hash, t.Name, t.Tenant, string(t.Scope), t.CreatedAt, t.ExpiresAt); err != nil {
		return Token{}, "", fmt.Errorf("create token: %w", err)
	}
	return t, secret, nil
}

const tokenCols = `id, name, tenant, scope, created_at, expires_at, last_used_at, revoked_at`

func scanToken(row interface{ Scan(...any) error }, extra ...any) (Token, error) {
	var t Token
	var scope string
	var exp, used, rev sql.NullTime
	dest := append([]any{&t.ID, &t.Name, &t.Tenant, &scope, &t.CreatedAt, &exp, &used, &rev}, extra...)
	if err := row.Scan(dest...); err != nil {
		return Token{}, err
	}
	t.Scope = Scope(scope)
	t.CreatedAt = t.CreatedAt.UTC()
	for _, f := range []struct {
		n   sql.NullTime
		dst **time.Time
	}{{exp, &t.ExpiresAt}, {used, &t.LastUsedAt}, {rev, &t.RevokedAt}} {
		if f.n.Valid {
			v := f.n.Time.UTC()
			*f.dst = &v
		}
	}
	return t, nil
}

// List returns the tokens of tenant ("" for every tenant), oldest first.
func (s *Store) List(ctx context.Context, tenant string) ([]Token, error) {
	rows, err := s.db.QueryContext(ctx,
		`SELECT `+tokenCols+` FROM api_tokens WHERE $1 = '' OR tenant = $1 ORDER BY created_at, id`, tenant)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	defer rows.Close()
	var out []Token
	for rows.Next() {
		t, err := scanToken(rows)
		if err != nil {
			return nil, fmt.Errorf("list tokens: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	return out, nil
}

// Revoke revokes the token with id, within tenant ("" for any tenant).
// Revoking a revoked token is a no-op; an unknown id (or one of another
// tenant) is [ErrNotFound].
func (s *Store) Revoke(ctx context.Context, id, tenant string) (Token, error) {
	res, err := s.db.ExecContext(ctx,
		`UPDATE api_tokens SET revoked_at = $2 WHERE id = $1 AND ($3 = '' OR tenant = $3) AND revoked_at IS NULL`,
		id, s.ts(), tenant)
	if err != nil {
		return Token{}, fmt.Errorf("revoke token: %w", err)
	}
	if _, err := res.RowsAffected(); err != nil {
		return Token{}, fmt.Errorf("revoke token: %w", err)
	}
	t, err := scanToken(s.db.QueryRowContext(ctx,
		`SELECT `+tokenCols+` FROM api_tokens WHERE id = $1 AND ($2 = '' OR tenant = $2)`, id, tenant))
	if errors.Is(err, sql.ErrNoRows) {
		return Token{}, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	if err != nil {
		return Token{}, fmt.Errorf("revoke token: %w", err)
	}
	return t, nil
}

// Authenticate returns the principal of a presented token, or
// [ErrUnauthenticated] when it is unknown, revoked or expired. It records
// the use at most once a minute per token.
func (s *Store) Authenticate(ctx context.Context, token string) (Principal, error) {
	if !LooksLikeToken(token) {
		return Principal{}, ErrUnauthenticated
	}
	p, _, err := s.verify(ctx, HashToken(token))
	return p, err
}

// verify is Authenticate for a token of the right shape, given by its
// hash (want), also returning when the token expires (nil: never), which
// a [Cache] needs to refuse it on time.
func (s *Store) verify(ctx context.Context, want string) (Principal, *time.Time, error) {
	var got string
	t, err := scanToken(s.db.QueryRowContext(ctx,
		`SELECT `+tokenCols+`, hash FROM api_tokens WHERE hash = $1`, want), &got)
	if errors.Is(err, sql.ErrNoRows) {
		return Principal{}, nil, ErrUnauthenticated
	}
	if err != nil {
		return Principal{}, nil, fmt.Errorf("authenticate: %w", err)
	}
	now := s.ts()
	switch {
	case subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1,
		t.RevokedAt != nil,
		t.ExpiresAt != nil && !now.Before(*t.ExpiresAt),
		!t.Scope.Valid():
		return Principal{}, nil, ErrUnauthenticated
	}
	if t.LastUsedAt == nil || now.Sub(*t.LastUsedAt) >= lastUsedEvery {
		if _, err := s.db.ExecContext(ctx, `UPDATE api_tokens SET last_used_at = $2 WHERE id = $1`, t.ID, now); err != nil {
			return Principal{}, nil, fmt.Errorf("authenticate: record use: %w", err)
		}
	}
	return Principal{TokenID: t.ID, Name: t.Name, Tenant: t.Tenant, Scope: t.Scope}, t.ExpiresAt, nil
}

// Live counts the tokens that are neither revoked nor expired.
func (s *Store) Live(ctx context.Context) (int, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT expires_at FROM api_tokens WHERE revoked_at IS NULL`)
	if err != nil {
		return 0, fmt.Errorf("count tokens: %w", err)
	}
	defer rows.Close()
	now, n := s.ts(), 0
	for rows.Next() {
		var exp sql.NullTime
		if err := rows.Scan(&exp); err != nil {
			return 0, fmt.Errorf("count tokens: %w", err)
		}
		if !exp.Valid || now.Before(exp.Time) {
			n++
		}
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("count tokens: %w", err)
	}
	return n, nil
}

// API returns the token as the HTTP API shows it (package api).
func (t Token) API() api.Token {
	return api.Token{ID: t.ID, Name: t.Name, Tenant: t.Tenant, Scope: api.Scope(t.Scope), CreatedAt: t.CreatedAt,
		ExpiresAt: t.ExpiresAt, LastUsedAt: t.LastUsedAt, RevokedAt: t.RevokedAt}
}
