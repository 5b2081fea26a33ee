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
	hashes, baseHash, err := linkHashes(v, parents, base)
	if err != nil {
		return err
	}
	if got := v.ComputeHash(hashes, baseHash); got != v.Hash {
		return fmt.Errorf("%w: version %s: stored %q, computed %q", ErrHashMismatch, v.ID, v.Hash, got)
	}
	return nil
}

// linkHashes checks that parents and base are the versions v names, and
// that v's length follows from its base's, and returns their hashes.
func linkHashes(v *Version, parents []*Version, base *Version) ([]string, string, error) {
	if len(parents) != len(v.Parents) {
		return nil, "", fmt.Errorf("%w: version %s: %d parents given for %d ids", ErrInvalidVersion, v.ID, len(parents), len(v.Parents))
	}
	hashes := make([]string, len(parents))
	for i, p := range parents {
		if p == nil || p.ID != v.Parents[i] {
			return nil, "", fmt.Errorf("%w: parent %s of %s", ErrNotFound, v.Parents[i], v.ID)
		}
		hashes[i] = p.Hash
	}
	switch {
	case v.Base == nil && base != nil:
		return nil, "", fmt.Errorf("%w: version %s has no base id but a base was given", ErrInvalidVersion, v.ID)
	case v.Base != nil && (base == nil || base.ID != *v.Base):
		return nil, "", fmt.Errorf("%w: base %s of %s", ErrNotFound, *v.Base, v.ID)
	case base != nil:
		if want := base.Len + len(v.Chunks); v.Len != want {
			return nil, "", fmt.Errorf("%w: version %s: len %d, want base len %d + %d own chunks", ErrInvalidVersion, v.ID, v.Len, base.Len, len(v.Chunks))
		}
		return hashes, base.Hash, nil
	}
	return hashes, "", nil
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
	if base != nil {
		v.Len += base.Len
	}
	if err := v.Validate(); err != nil {
		return err
	}
	hashes, baseHash, err := linkHashes(v, parents, base)
	if err != nil {
		return err
	}
	v.Hash = v.ComputeHash(hashes, baseHash) // once: VerifyLinks would compute it again
	return nil
}
