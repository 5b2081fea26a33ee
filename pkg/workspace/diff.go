package workspace

// ChangeKind says how a path differs between two manifests.
type ChangeKind string

// Change kinds.
const (
	Added   ChangeKind = "added"
	Removed ChangeKind = "removed"
	// Changed: the content, mode, type or symlink target differs.
	Changed ChangeKind = "changed"
)

// Change is one path that differs. Before is nil for an added path, After
// for a removed one.
type Change struct {
	Path   string     `json:"path"`
	Kind   ChangeKind `json:"kind"`
	Before *Entry     `json:"before,omitempty"`
	After  *Entry     `json:"after,omitempty"`
}

// Diff returns the paths that differ from a to b, in path order. A nil
// manifest is the empty workspace.
func Diff(a, b *Manifest) []Change {
	var ae, be []Entry
	if a != nil {
		ae = a.Entries
	}
	if b != nil {
		be = b.Entries
	}
	var out []Change
	i, j := 0, 0
	for i < len(ae) || j < len(be) {
		switch {
		case j == len(be) || (i < len(ae) && ae[i].Path < be[j].Path):
			out = append(out, Change{Path: ae[i].Path, Kind: Removed, Before: &ae[i]})
			i++
		case i == len(ae) || be[j].Path < ae[i].Path:
			out = append(out, Change{Path: be[j].Path, Kind: Added, After: &be[j]})
			j++
		default:
			if ae[i] != be[j] {
				out = append(out, Change{Path: ae[i].Path, Kind: Changed, Before: &ae[i], After: &be[j]})
			}
			i++
			j++
		}
	}
	return out
}
