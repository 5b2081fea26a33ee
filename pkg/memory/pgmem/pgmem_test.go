package pgmem_test

import (
	"context"
	"testing"

	"github.com/rath-run/rath/internal/testdb"
	"github.com/rath-run/rath/pkg/memory"
	"github.com/rath-run/rath/pkg/memory/memorytest"
	"github.com/rath-run/rath/pkg/memory/pgmem"
)

func TestConformance(t *testing.T) {
	memorytest.Run(t, func(t *testing.T) memory.Store {
		s, err := pgmem.Open(context.Background(), testdb.Postgres(t))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
