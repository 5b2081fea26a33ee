package local_test

import (
	"testing"

	"github.com/rath-run/rath/pkg/sandbox"
	"github.com/rath-run/rath/pkg/sandbox/local"
	"github.com/rath-run/rath/pkg/sandbox/sandboxtest"
	"github.com/rath-run/rath/pkg/session"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	b := local.New(local.Config{})
	sandboxtest.Run(t, func(t *testing.T) (sandbox.Sandbox, string) {
		dir := sandboxtest.Dir(t)
		sb, err := b.Open(t.Context(), session.Spec{}, dir)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return sb, dir
	})
}
