package trainset

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
)

// Pair is one preference pair in the conversational DPO format: the
// shared prompt, the chosen and the rejected continuation, as chat
// messages, with both versions' provenance.
type Pair struct {
	Prompt     []Message      `json:"prompt"`
	Chosen     []Message      `json:"chosen"`
	Rejected   []Message      `json:"rejected"`
	Provenance PairProvenance `json:"provenance"`
}

// PairProvenance says where a pair came from: the version whose transcript
// is the prompt (the branches' nearest common base) and each side's end
// version with the label that ranked it.
type PairProvenance struct {
	PromptVersion session.ID `json:"prompt_version"`
	Chosen        Provenance `json:"chosen"`
	ChosenLabel   Label      `json:"chosen_label"`
	Rejected      Provenance `json:"rejected"`
	RejectedLabel Label      `json:"rejected_label"`
}

// PairStats counts a pairs export.
type PairStats struct {
	Scanned int `json:"scanned"` // version headers read
	Labeled int `json:"labeled"` // labeled trajectory ends found
	Written int `json:"written"` // pairs written
	Skipped int `json:"skipped"` // candidate pairs that made no record
}

type labeled struct {
	info  store.Info
	label Label
}

// better reports whether a is preferred to b, and whether they are ranked
// at all: a preference beats no preference, then the higher score wins.
func better(a, b Label) (aWins, ranked bool) {
	if a.Prefer != b.Prefer {
		return a.Prefer, true
	}
	if a.Score != nil && b.Score != nil && *a.Score != *b.Score {
		return *a.Score > *b.Score, true
	}
	return false, false
}

// Pairs writes a DPO pair for every two labeled trajectory ends that
// share a prompt and are ranked apart (see [Label]). A trajectory end is
// what [Export] would export; its label is the last label version
// appended to it. Two ends pair when their nearest common base (through
// merges too: [session.Graph.CommonBase]) holds a user message and each
// continuation after it ends with an assistant reply. Only the labeled
// ends are held in memory (a few hundred bytes each), never transcripts
// beyond the two of the pair being written. Ends of different sessions
// share no base and never pair.
func Pairs(ctx context.Context, src Source, sel Selector, policy Redacted, w io.Writer) (PairStats, error) {
	var st PairStats
	if policy == "" {
		policy = DropRecord
	}
	if _, err := ParseRedacted(string(policy)); err != nil {
		return st, err
	}
	var ends []labeled
	after := ""
	for {
		page, err := src.List(ctx, store.ListParams{Limit: 500, After: after, Run: sel.Run})
		if err != nil {
			return st, fmt.Errorf("pairs: list versions: %w", err)
		}
		for _, v := range page.Versions {
			st.Scanned++
			if !sel.Match(v) {
				continue
			}
			if lbl, err := isLabelVersion(ctx, src, v.ID, v.OwnChunks); err != nil || lbl {
				if err != nil {
					return st, err
				}
				continue
			}
			end, err := isEnd(ctx, src, sel, v)
			if err != nil || !end {
				if err != nil {
					return st, err
				}
				continue
			}
			l, ok, err := labelOn(ctx, src, v.ID)
			if err != nil {
				return st, err
			}
			if ok {
				ends = append(ends, labeled{info: v, label: l})
			}
		}
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	st.Labeled = len(ends)
	bw := bufio.NewWriterSize(w, 64<<10)
	for i := range ends {
		for j := i + 1; j < len(ends); j++ {
			a, b := ends[i], ends[j]
			aWins, ranked := better(a.label, b.label)
			if !ranked {
				continue
			}
			if !aWins {
				a, b = b, a
			}
			p, ok, err := pairOf(ctx, src, a, b, policy)
			if err != nil {
				return st, err
			}
			if !ok {
				st.Skipped++
				continue
			}
			line, err := json.Marshal(p)
			if err != nil {
				return st, fmt.Errorf("pairs: encode: %w", err)
			}
			if _, err := bw.Write(append(line, '\n')); err != nil {
				return st, fmt.Errorf("pairs: write: %w", err)
			}
			st.Written++
		}
	}
	if err := bw.Flush(); err != nil {
		return st, fmt.Errorf("pairs: write: %w", err)
	}
	return st, nil
}

// labelOn returns the last label recorded on id (by a label version
// extending it).
func labelOn(ctx context.Context, src Source, id session.ID) (Label, bool, error) {
	kids, err := src.Children(ctx, id)
	if err != nil {
		return Label{}, false, fmt.Errorf("pairs: children of %s: %w", id, err)
	}
	var last Label
	found := false
	for _, k := range kids {
		if k.Base == nil || *k.Base != id || k.OwnChunks == 0 {
			continue
		}
		v, err := src.Get(ctx, k.ID)
		if err != nil {
			return Label{}, false, fmt.Errorf("pairs: get %s: %w", k.ID, err)
		}
		if !labelsOnly(v.Chunks) {
			continue
		}
		for _, c := range v.Chunks {
			l, _ := LabelOf(c)
			last, found = l, true
		}
	}
	return last, found, nil
}

func pairOf(ctx context.Context, src Source, chosen, rejected labeled, policy Redacted) (Pair, bool, error) {
	base, ok, err := src.CommonBase(ctx, chosen.info.ID, rejected.info.ID)
	if err != nil {
		return Pair{}, false, fmt.Errorf("pairs: common base of %s and %s: %w", chosen.info.ID, rejected.info.ID, err)
	}
	if !ok {
		return Pair{}, false, nil
	}
	prefix, err := src.Transcript(ctx, base)
	if err != nil {
		return Pair{}, false, fmt.Errorf("pairs: transcript of %s: %w", base, err)
	}
	ct, err := src.Transcript(ctx, chosen.info.ID)
	if err != nil {
		return Pair{}, false, fmt.Errorf("pairs: transcript of %s: %w", chosen.info.ID, err)
	}
	rt, err := src.Transcript(ctx, rejected.info.ID)
	if err != nil {
		return Pair{}, false, fmt.Errorf("pairs: transcript of %s: %w", rejected.info.ID, err)
	}
	if len(ct) < len(prefix) || len(rt) < len(prefix) {
		return Pair{}, false, nil
	}
	dc, rc := droppedCalls(ct)
	dr, rr := droppedCalls(rt)
	if (rc || rr) && policy != DropChunk {
		return Pair{}, false, nil
	}
	for k := range dr {
		dc[k] = true
	}
	prompt := convert(prefix, dc)
	hasUser := false
	for _, m := range prompt {
		hasUser = hasUser || m.Role == "user"
	}
	cm, rm := convert(ct[len(prefix):], dc), convert(rt[len(prefix):], dc)
	if !hasUser || len(cm) == 0 || len(rm) == 0 || cm[len(cm)-1].Role != "assistant" || rm[len(rm)-1].Role != "assistant" {
		return Pair{}, false, nil
	}
	return Pair{Prompt: prompt, Chosen: cm, Rejected: rm, Provenance: PairProvenance{
		PromptVersion: base,
		Chosen:        ProvenanceOf(chosen.info), ChosenLabel: chosen.label,
		Rejected: ProvenanceOf(rejected.info), RejectedLabel: rejected.label,
	}}, true, nil
}
