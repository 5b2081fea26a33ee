package auth_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/auth"
)

// rejectAll is a token store that knows no token.
type rejectAll struct{ calls int }

func (r *rejectAll) Authenticate(context.Context, string) (auth.Principal, error) {
	r.calls++
	return auth.Principal{}, auth.ErrUnauthenticated
}

// FuzzAuthenticate feeds arbitrary Authorization headers to the
// authenticator: only the exact bootstrap bearer header authenticates,
// nothing panics, and only token-shaped values reach the token store.
func FuzzAuthenticate(f *testing.F) {
	const boot = "bootstrap-token"
	for _, s := range []string{"", "Bearer ", "Bearer " + boot, "bearer " + boot, "Bearer " + boot + " ", "Bearer  " + boot,
		"Basic dXNlcjpwYXNz", "Bearer rath_" + strings.Repeat("A", 43), "Bearer rath_\x00", boot} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		store := &rejectAll{}
		a := &auth.Authenticator{Bootstrap: boot, Tokens: store}
		p, err := a.Authenticate(context.Background(), header)
		if header == "Bearer "+boot {
			if err != nil || p.Scope != auth.ScopeAdmin || p.TokenID != auth.BootstrapTokenID {
				t.Fatalf("bootstrap header: %+v, %v", p, err)
			}
			return
		}
		if !errors.Is(err, auth.ErrUnauthenticated) {
			t.Fatalf("Authenticate(%q) = %+v, %v; want ErrUnauthenticated", header, p, err)
		}
	})
}

// FuzzLooksLikeToken: the shape check accepts exactly the prefix and 43
// base62 characters, and every fresh token passes it.
func FuzzLooksLikeToken(f *testing.F) {
	tok, _, err := auth.NewToken()
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{tok, "", "rath_", tok[:len(tok)-1], tok + "A", strings.Replace(tok, "rath_", "RATH_", 1), "rath_" + strings.Repeat("é", 43)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := auth.LooksLikeToken(s)
		body, ok := strings.CutPrefix(s, auth.TokenPrefix)
		want := ok && len(body) == 43 && strings.Trim(body, "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz") == ""
		if got != want {
			t.Fatalf("LooksLikeToken(%q) = %v, want %v", s, got, want)
		}
	})
}

// FuzzParseScope: only the three scopes parse, and a parsed scope allows
// read.
func FuzzParseScope(f *testing.F) {
	for _, s := range []string{"read", "submit", "admin", "", "ADMIN", "root", "admin "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sc, err := auth.ParseScope(s)
		valid := s == "read" || s == "submit" || s == "admin"
		if (err == nil) != valid {
			t.Fatalf("ParseScope(%q) = %q, %v", s, sc, err)
		}
		if valid && !sc.Allows(auth.ScopeRead) {
			t.Fatalf("%s does not allow read", sc)
		}
		if !valid && auth.Scope(s).Allows(auth.ScopeRead) {
			t.Fatalf("invalid scope %q allows read", s)
		}
	})
}
