package trainset_test

import (
	"context"
	"testing"

	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/trainset"
)

func label(t *testing.T, s session.Session, l trainset.Label) {
	t.Helper()
	c := must[session.Chunk](t)(trainset.LabelChunk(l))
	must[session.Session](t)(s.Append(context.Background(), c))
}

func score(x float64) *float64 { return &x }

func TestLabelChunkRoundTrip(t *testing.T) {
	if _, err := trainset.LabelChunk(trainset.Label{}); err == nil {
		t.Error("an empty label was accepted")
	}
	c := must[session.Chunk](t)(trainset.LabelChunk(trainset.Label{Score: score(0.25), By: "v"}))
	l, ok := trainset.LabelOf(c)
	if !ok || *l.Score != 0.25 || l.By != "v" {
		t.Errorf("LabelOf: %+v %v", l, ok)
	}
	if _, ok := trainset.LabelOf(must[session.Chunk](t)(session.Evidence(session.KindNote, map[string]any{"rath_label": "x"}))); ok {
		t.Error("a malformed label note read as a label")
	}
}
