package pgstore_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store/pgstore"
)

// TestVersionAndTranscriptIsGetThenTranscript: for a root and a chain,
// with the cache and without, cold and warm, one call returns what Get and
// Transcript return; an unknown id is not found.
func TestVersionAndTranscriptIsGetThenTranscript(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, opts := range map[string]pgstore.Options{
		"cached":   {},
		"uncached": {CachedVersions: -1, CachedTranscripts: -1},
	} {
		t.Run(name, func(t *testing.T) {
			st := openStore(t, opts)
			root, err := session.New(ctx, st, session.System("be brief"), session.User("hi"))
			if err != nil {
				t.Fatal(err)
			}
			top := root
			for range 3 {
				if top, err = top.Append(ctx, session.Assistant("ok"), session.User("more")); err != nil {
					t.Fatal(err)
				}
			}
			for _, id := range []session.ID{root.ID(), top.ID()} {
				for _, pass := range []string{"first", "second"} {
					v, tr, err := st.VersionAndTranscript(ctx, id)
					if err != nil {
						t.Fatalf("%s %s: %v", id, pass, err)
					}
					wantV, err := st.Get(ctx, id)
					if err != nil {
						t.Fatal(err)
					}
					wantT, err := st.Transcript(ctx, id)
					if err != nil {
						t.Fatal(err)
					}
					if v.ID != wantV.ID || v.Hash != wantV.Hash || v.Len != wantV.Len || len(tr) != v.Len {
						t.Errorf("%s %s: version %s len %d with %d chunks; want %s len %d", id, pass, v.ID, v.Len, len(tr), wantV.ID, wantV.Len)
					}
					if !slices.EqualFunc(tr, wantT, func(a, b session.Chunk) bool { return a.Hash() == b.Hash() }) {
						t.Errorf("%s %s: the transcript differs from Transcript's", id, pass)
					}
				}
			}
			if _, _, err := st.VersionAndTranscript(ctx, session.NewID()); !errors.Is(err, session.ErrNotFound) {
				t.Errorf("unknown id: %v, want session.ErrNotFound", err)
			}
		})
	}
}
