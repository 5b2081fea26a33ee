package graphrow

import (
	"testing"

	"github.com/rath-run/rath/pkg/session"
)

// TestCacheEpoch checks the redaction-epoch contract: Sync with a new epoch
// drops every entry, and an add whose epoch token was taken before a purge
// (a load that raced a redaction) is dropped instead of restoring the old
// content.
func TestCacheEpoch(t *testing.T) {
	t.Parallel()
	c := NewCache(0, 0)
	id := session.NewID()
	old := []session.Chunk{session.User("the secret")}

	c.Sync(1)
	c.AddTranscript(id, old, c.Epoch())
	c.Sync(1) // the same epoch keeps entries
	if _, ok := c.Transcript(id); !ok {
		t.Fatal("an unchanged epoch dropped the entry")
	}

	racing := c.Epoch() // a load starts before the redaction commits
	c.Sync(2)           // a reader saw the redaction's epoch
	if _, ok := c.Transcript(id); ok {
		t.Fatal("a new epoch kept the old entry")
	}
	c.AddTranscript(id, old, racing) // the racing load finishes
	c.AddVersion(&session.Version{ID: id, Len: 1, Chunks: old}, racing)
	if _, ok := c.Transcript(id); ok {
		t.Error("an add started before the new epoch was cached")
	}
	if _, ok := c.Version(id); ok {
		t.Error("a version read before the new epoch was cached")
	}

	c.AddTranscript(id, old, c.Epoch())
	if _, ok := c.Transcript(id); !ok {
		t.Error("an add at the current epoch was dropped")
	}
	before := c.Epoch()
	c.Purge()
	c.AddTranscript(id, old, before)
	if _, ok := c.Transcript(id); ok {
		t.Error("an add started before Purge was cached")
	}
}
