package session

import (
	"fmt"
	"slices"
)

// KeyedReplay checks a keyed put of v against stored, the version that
// already holds v's key, and returns stored when v replays the same
// commit: the same version (hash), or the same step executed again — the
// same op on the same base and parents by the same run and step, whose
// content may differ (a model answers anew). Anything else is
// [ErrConflict]: a key is never answered with another commit's version.
// Graphs call it when a put finds its key taken; on Postgres the equal
// parents also mean the same tenant (a version's tenant is its parents').
func KeyedReplay(stored, v *Version) (*Version, error) {
	if stored.Hash == v.Hash {
		return stored, nil
	}
	sameBase := (stored.Base == nil) == (v.Base == nil) && (stored.Base == nil || *stored.Base == *v.Base)
	if sameBase && stored.Op == v.Op && slices.Equal(stored.Parents, v.Parents) &&
		stored.Producer.Run == v.Producer.Run && stored.Producer.Step == v.Producer.Step {
		return stored, nil
	}
	return nil, fmt.Errorf("put %s: %w: key %q is held by version %s, which is not a replay of this commit (other parents, op or producer)",
		v.ID, ErrConflict, v.Key, stored.ID)
}
