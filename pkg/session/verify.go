package session

import "fmt"

// VerifyLinks checks v against its stored parents (in v.Parents order) and
// base (nil when v has none): the shape its op requires, the transcript
// length and the hash. Graph implementations call it in Put so every graph
// enforces the same rules.
func VerifyLinks(v *Version, parents []*Version, base *Version) error {
	if err := v.Validate(); err != nil {
		return err
	}
	if len(parents) != len(v.Parents) {
		return fmt.Errorf("%w: version %s: %d parents given for %d ids", ErrInvalidVersion, v.ID, len(parents), len(v.Parents))
	}
	hashes := make([]string, len(parents))
	for i, p := range parents {
		if p == nil || p.ID != v.Parents[i] {
			return fmt.Errorf("%w: parent %s of %s", ErrNotFound, v.Parents[i], v.ID)
		}
		hashes[i] = p.Hash
	}
	baseHash := ""
	switch {
	case v.Base == nil && base != nil:
		return fmt.Errorf("%w: version %s has no base id but a base was given", ErrInvalidVersion, v.ID)
	case v.Base != nil && (base == nil || base.ID != *v.Base):
		return fmt.Errorf("%w: base %s of %s", ErrNotFound, *v.Base, v.ID)
	case base != nil:
		if want := base.Len + len(v.Chunks); v.Len != want {
			return fmt.Errorf("%w: version %s: len %d, want base len %d + %d own chunks", ErrInvalidVersion, v.ID, v.Len, base.Len, len(v.Chunks))
		}
		baseHash = base.Hash
	}
	if got := v.ComputeHash(hashes, baseHash); got != v.Hash {
		return fmt.Errorf("%w: version %s: stored %q, computed %q", ErrHashMismatch, v.ID, v.Hash, got)
	}
	return nil
}

// Seal sets v.Len and v.Hash from its parents and base and validates it. Ops
// call it before Put; importers call it for versions whose hashes they
// recompute. It first rewrites every extra's value in canonical JSON (a new
// Extras slice; the caller's is not modified), so the hash is the one a
// store or an export reads back.
func Seal(v *Version, parents []*Version, base *Version) error {
	extras, err := canonicalExtras(v.ID, v.Extras)
	if err != nil {
		return err
	}
	v.Extras = extras
	v.Len = len(v.Chunks)
	baseHash := ""
	if base != nil {
		v.Len += base.Len
		baseHash = base.Hash
	}
	hashes := make([]string, len(parents))
	for i, p := range parents {
		hashes[i] = p.Hash
	}
	v.Hash = v.ComputeHash(hashes, baseHash)
	return VerifyLinks(v, parents, base)
}
