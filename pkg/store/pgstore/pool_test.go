package pgstore_test

import (
	"context"
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/store/pgstore"
)

// TestPoolSize: the pool holds DefaultMaxConns unless the URL's
// pool_max_conns or Options.MaxConns says otherwise (Options first).
func TestPoolSize(t *testing.T) {
	u := newDB(t, true)
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	for _, c := range []struct {
		url  string
		opts pgstore.Options
		want int32
	}{
		{u, pgstore.Options{}, pgstore.DefaultMaxConns},
		{u + sep + "pool_max_conns=3", pgstore.Options{}, 3},
		{u + sep + "pool_max_conns=3", pgstore.Options{MaxConns: 5}, 5},
		{u, pgstore.Options{MaxConns: 2}, 2},
	} {
		s, err := pgstore.Open(context.Background(), c.url, c.opts)
		if err != nil {
			t.Fatalf("Open(%q, %+v): %v", c.url, c.opts, err)
		}
		got := s.Pool().Config().MaxConns
		s.Close()
		if got != c.want {
			t.Errorf("Open(%q, %+v): MaxConns %d, want %d", c.url, c.opts, got, c.want)
		}
	}
}

func TestConnURL(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u@h/db":                                      "postgres://u@h/db",
		"postgres://u@h/db?sslmode=disable":                      "postgres://u@h/db?sslmode=disable",
		"postgres://u@h/db?sslmode=disable&pool_max_conns=32":    "postgres://u@h/db?sslmode=disable",
		"postgres://u@h/db?pool_max_conns=32&pool_min_conns=2":   "postgres://u@h/db",
		"postgres://u:p%40ss@h/db?pool_max_conn_lifetime=1h&x=y": "postgres://u:p%40ss@h/db?x=y",
	} {
		if got := pgstore.ConnURL(in); got != want {
			t.Errorf("ConnURL(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]int32{"postgres://h/db?pool_max_conns=7": 7, "postgres://h/db": 0, "postgres://h/db?pool_max_conns=x": 0, "postgres://h/db?pool_max_conns=0": 0} {
		if got, _ := pgstore.URLMaxConns(in); got != want {
			t.Errorf("URLMaxConns(%q) = %d, want %d", in, got, want)
		}
	}
}
