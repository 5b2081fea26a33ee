package trainset

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

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

// PairProvenance says where a pair came from: the decision that ranked it
// (Source), the version whose transcript is the prompt (the branches'
// nearest common base) and each side's end version with the label or the
// approval verdict that ranked it.
type PairProvenance struct {
	Source        PairSource `json:"source"`
	PromptVersion session.ID `json:"prompt_version"`
	Chosen        Provenance `json:"chosen"`
	ChosenLabel   *Label     `json:"chosen_label,omitempty"`
	// ChosenApproval and RejectedApproval are the verdicts of a pair from
	// approvals: "approved" or "rejected".
	ChosenApproval   string     `json:"chosen_approval,omitempty"`
	Rejected         Provenance `json:"rejected"`
	RejectedLabel    *Label     `json:"rejected_label,omitempty"`
	RejectedApproval string     `json:"rejected_approval,omitempty"`
	// SelectorDecision is the version holding the selector_decision of a
	// pair from a selector.
	SelectorDecision *session.ID `json:"selector_decision,omitempty"`
}

// PairSource names what ranked a pair's two branches.
type PairSource string

// Pair sources.
const (
	// FromLabels ranks by the last label a person recorded (rathctl label:
	// a preference first, then the higher score).
	FromLabels PairSource = "labels"
	// FromScores ranks by the last score a verifier recorded (a rollout
	// step's verify step: the label chunk by [VerifierBy]); higher wins.
	FromScores PairSource = "scores"
	// FromApproval ranks a branch whose continuation holds only approved
	// tool calls over one whose continuation holds a rejected call.
	FromApproval PairSource = "approval"
	// FromSelector ranks the branch a rollout's selector chose over the
	// other branches it chose among (a selector_decision that records its
	// branches; a selector loop's decisions record none: the candidates
	// it did not choose never ran).
	FromSelector PairSource = "selector"
)

// VerifierBy is the "by" of the labels a verifier records (package flow's
// verify steps); a label by anyone else is a person's.
const VerifierBy = "verifier"

// PairSources lists every pair source, in the order pairs are made.
func PairSources() []PairSource {
	return []PairSource{FromLabels, FromScores, FromApproval, FromSelector}
}

// ParsePairSources parses a --from list ("labels,scores"); empty is every
// source. Unknown or repeated names are errors naming the name.
func ParsePairSources(list []string) ([]PairSource, error) {
	if len(list) == 0 {
		return PairSources(), nil
	}
	var out []PairSource
	for _, name := range list {
		src := PairSource(strings.TrimSpace(name))
		if !slices.Contains(PairSources(), src) {
			return nil, fmt.Errorf("pair source %q: want %s", name, joinSources(PairSources()))
		}
		if slices.Contains(out, src) {
			return nil, fmt.Errorf("pair source %q given twice", name)
		}
		out = append(out, src)
	}
	return out, nil
}

func joinSources(ss []PairSource) string {
	names := make([]string, len(ss))
	for i, s := range ss {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// PairOptions tune a pairs export.
type PairOptions struct {
	// Redacted is what a redacted chunk drops ("" is [DropRecord]).
	Redacted Redacted
	// From are the sources pairs are made from; nil is every source.
	From []PairSource
}

// PairStats counts a pairs export.
type PairStats struct {
	Scanned int `json:"scanned"` // version headers read
	Labeled int `json:"labeled"` // judged trajectory ends found (a label, a score or an approval decision)
	Written int `json:"written"` // pairs written
	Skipped int `json:"skipped"` // candidate pairs that made no record
	// Decisions counts the selector decisions among branches found.
	Decisions int `json:"decisions"`
}

// judged is a trajectory end with what judged it: its last label by a
// person, its last score by a verifier, and whether its transcript holds
// approval decisions.
type judged struct {
	info      store.Info
	label     *Label
	score     *Label
	approvals bool
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

// Pairs writes a DPO pair for every two judged trajectory ends that share
// a prompt and are ranked apart by a source of opts.From, one pair per
// source that ranks them (so two branches both labeled and scored can make
// two pairs, each naming its source):
//
//   - [FromLabels]: the last label a person recorded on each end (a
//     preference beats none, then the higher score);
//   - [FromScores]: the last score a verifier recorded on each (higher
//     wins);
//   - [FromApproval]: an end whose continuation after the shared prompt
//     holds an approved tool call and no rejected one beats one whose
//     continuation holds a rejected call;
//   - [FromSelector]: a rollout selector's decision (a selector_decision
//     that records the branches it chose among): the chosen branch beats
//     each other one. These pair the branch versions the decision names
//     (ends or not), so they come after the others.
//
// A trajectory end is what [Export] would export. Two ends pair when
// their nearest common base (through merges too:
// [session.Graph.CommonBase]) holds a user message and each continuation
// after it ends with an assistant reply. Only the judged ends are held in
// memory (a few hundred bytes each), never transcripts beyond the two of
// the pair being written. Ends of different sessions share no base and
// never pair.
func Pairs(ctx context.Context, src Source, sel Selector, opts PairOptions, w io.Writer) (PairStats, error) {
	var st PairStats
	policy := opts.Redacted
	if policy == "" {
		policy = DropRecord
	}
	if _, err := ParseRedacted(string(policy)); err != nil {
		return st, err
	}
	from := opts.From
	if len(from) == 0 {
		from = PairSources()
	}
	for _, f := range from {
		if !slices.Contains(PairSources(), f) {
			return st, fmt.Errorf("pairs: unknown source %q (want %s)", f, joinSources(PairSources()))
		}
	}
	var ends []judged
	var decisions []branchDecision
	wantSel := slices.Contains(from, FromSelector)
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
			if wantSel && v.OwnChunks == 1 && v.Op == session.OpStep {
				d, ok, err := decisionIn(ctx, src, v.ID)
				if err != nil {
					return st, err
				}
				if ok {
					decisions = append(decisions, d)
				}
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
			j, err := judge(ctx, src, v, from)
			if err != nil {
				return st, err
			}
			if j.label != nil || j.score != nil || j.approvals {
				ends = append(ends, j)
			}
		}
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	st.Labeled, st.Decisions = len(ends), len(decisions)
	bw := bufio.NewWriterSize(w, 64<<10)
	write := func(p *Pair) error {
		line, err := json.Marshal(p)
		if err != nil {
			return fmt.Errorf("pairs: encode: %w", err)
		}
		if _, err := bw.Write(append(line, '\n')); err != nil {
			return fmt.Errorf("pairs: write: %w", err)
		}
		st.Written++
		return nil
	}
	for i := range ends {
		for j := i + 1; j < len(ends); j++ {
			for _, source := range from {
				p, ok, err := rankPair(ctx, src, source, ends[i], ends[j], policy)
				if err != nil {
					return st, err
				}
				if !ok {
					continue
				}
				if p == nil {
					st.Skipped++
					continue
				}
				if err := write(p); err != nil {
					return st, err
				}
			}
		}
	}
	for _, d := range decisions {
		for j, rej := range d.branches {
			if j == d.choice || rej == d.branches[d.choice] {
				continue
			}
			p, ok, err := selectorPair(ctx, src, sel, d, rej, policy)
			if err != nil {
				return st, err
			}
			if !ok {
				st.Skipped++
				continue
			}
			if err := write(p); err != nil {
				return st, err
			}
		}
	}
	if err := bw.Flush(); err != nil {
		return st, fmt.Errorf("pairs: write: %w", err)
	}
	return st, nil
}

// judge reads what judged end v for the sources asked.
func judge(ctx context.Context, src Source, v store.Info, from []PairSource) (judged, error) {
	j := judged{info: v}
	if slices.Contains(from, FromLabels) || slices.Contains(from, FromScores) {
		var err error
		if j.label, j.score, err = labelsOn(ctx, src, v.ID); err != nil {
			return j, err
		}
		if !slices.Contains(from, FromLabels) {
			j.label = nil
		}
		if !slices.Contains(from, FromScores) {
			j.score = nil
		}
	}
	if slices.Contains(from, FromApproval) {
		chunks, err := src.Transcript(ctx, v.ID)
		if err != nil {
			return j, fmt.Errorf("pairs: transcript of %s: %w", v.ID, err)
		}
		j.approvals = verdict(chunks) != ""
	}
	return j, nil
}

// rankPair makes the pair source ranks a and b into: ok false when the
// source does not rank them apart, a nil pair (ok true) when they rank
// apart but make no record (no shared prompt, no reply at an end, a
// redaction).
func rankPair(ctx context.Context, src Source, source PairSource, a, b judged, policy Redacted) (*Pair, bool, error) {
	switch source {
	case FromLabels, FromScores:
		la, lb := a.label, b.label
		if source == FromScores {
			la, lb = a.score, b.score
		}
		if la == nil || lb == nil {
			return nil, false, nil
		}
		aWins, ranked := better(*la, *lb)
		if source == FromScores {
			aWins, ranked = false, false
			if la.Score != nil && lb.Score != nil && *la.Score != *lb.Score {
				aWins, ranked = *la.Score > *lb.Score, true
			}
		}
		if !ranked {
			return nil, false, nil
		}
		if !aWins {
			a, b, la, lb = b, a, lb, la
		}
		p, ok, err := pairOf(ctx, src, a.info, b.info, policy, nil)
		if err != nil || !ok {
			return nil, err == nil, err
		}
		p.Provenance.Source, p.Provenance.ChosenLabel, p.Provenance.RejectedLabel = source, la, lb
		return &p, true, nil
	case FromApproval:
		if !a.approvals || !b.approvals {
			return nil, false, nil
		}
		rankedApart := false
		p, ok, err := pairOf(ctx, src, a.info, b.info, policy, func(ca, cb []session.Chunk) (bool, bool) {
			va, vb := verdict(ca), verdict(cb)
			if va == vb || va == "" || vb == "" {
				return false, false
			}
			rankedApart = true
			return va == approvalApproved, true
		})
		switch {
		case err != nil:
			return nil, false, err
		case !rankedApart:
			return nil, false, nil
		case !ok:
			return nil, true, nil
		}
		p.Provenance.Source = FromApproval
		p.Provenance.ChosenApproval, p.Provenance.RejectedApproval = approvalApproved, approvalRejected
		return &p, true, nil
	case FromSelector:
		return nil, false, nil // from the decisions, after the ends
	}
	return nil, false, fmt.Errorf("pairs: unknown source %q", source)
}

// branchDecision is a selector's choice among a rollout's branches.
type branchDecision struct {
	version  session.ID
	branches []session.ID
	choice   int
}

// decisionIn returns the decision among branches that version id records,
// if its one chunk is a selector_decision naming its branches and choosing
// one of them.
func decisionIn(ctx context.Context, src Source, id session.ID) (branchDecision, bool, error) {
	v, err := src.Get(ctx, id)
	if err != nil {
		return branchDecision{}, false, fmt.Errorf("pairs: get %s: %w", id, err)
	}
	if len(v.Chunks) != 1 || v.Chunks[0].Kind() != session.KindSelectorDecision || v.Chunks[0].Redacted() {
		return branchDecision{}, false, nil
	}
	var d struct {
		Branches []session.ID `json:"branches"`
		Choice   int          `json:"choice"`
	}
	// A decision that does not parse, or names no branches (a selector
	// loop's), ranks nothing: it is no error of the export.
	ok := json.Unmarshal(v.Chunks[0].Payload(), &d) == nil
	if !ok || len(d.Branches) < 2 || d.Choice < 0 || d.Choice >= len(d.Branches) {
		return branchDecision{}, false, nil
	}
	return branchDecision{version: id, branches: d.Branches, choice: d.Choice}, true, nil
}

// selectorPair is the pair of d's chosen branch over branch rej: ok false
// when it makes no record (a branch outside the selection, no shared
// prompt, a redaction, no reply at an end).
func selectorPair(ctx context.Context, src Source, sel Selector, d branchDecision, rej session.ID, policy Redacted) (*Pair, bool, error) {
	infos := make([]store.Info, 2)
	for i, id := range []session.ID{d.branches[d.choice], rej} {
		v, err := src.Get(ctx, id)
		if errors.Is(err, session.ErrNotFound) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("pairs: get %s: %w", id, err)
		}
		if infos[i] = store.InfoOf(v); !sel.Match(infos[i]) {
			return nil, false, nil
		}
	}
	p, ok, err := pairOf(ctx, src, infos[0], infos[1], policy, nil)
	if err != nil || !ok {
		return nil, false, err
	}
	dv := d.version
	p.Provenance.Source, p.Provenance.SelectorDecision = FromSelector, &dv
	return &p, true, nil
}

// The verdicts of a continuation's approval decisions.
const (
	approvalApproved = "approved"
	approvalRejected = "rejected"
)

// verdict is what the approval decisions among chunks say: "rejected"
// when any tool call was rejected, else "approved" when any was approved,
// else "" (no decision).
func verdict(chunks []session.Chunk) string {
	out := ""
	for _, c := range chunks {
		if c.Kind() != session.KindApproval || c.Redacted() {
			continue
		}
		var d struct {
			Decision string `json:"decision"`
		}
		if json.Unmarshal(c.Payload(), &d) != nil {
			continue
		}
		switch d.Decision {
		case approvalRejected:
			return approvalRejected
		case approvalApproved:
			out = approvalApproved
		}
	}
	return out
}

// labelsOn returns the last label a person and the last score a verifier
// recorded on id (by label versions extending it).
func labelsOn(ctx context.Context, src Source, id session.ID) (human, verifier *Label, err error) {
	kids, err := src.Children(ctx, id)
	if err != nil {
		return nil, nil, fmt.Errorf("pairs: children of %s: %w", id, err)
	}
	for _, k := range kids {
		if k.Base == nil || *k.Base != id || k.OwnChunks == 0 {
			continue
		}
		v, err := src.Get(ctx, k.ID)
		if err != nil {
			return nil, nil, fmt.Errorf("pairs: get %s: %w", k.ID, err)
		}
		if !labelsOnly(v.Chunks) {
			continue
		}
		for _, c := range v.Chunks {
			l, _ := LabelOf(c)
			if l.By == VerifierBy {
				if l.Score != nil {
					verifier = &l
				}
			} else {
				human = &l
			}
		}
	}
	return human, verifier, nil
}

// pairOf builds the pair of chosen over rejected. rank, when set, decides
// on the two continuations after the shared prompt instead: whether they
// are ranked apart and whether the first (chosen's) wins; the pair is then
// ordered by it. ok is false when the two make no record (no shared
// prompt, a redaction, no user message in the prompt, no reply at an
// end, or rank did not rank them apart).
func pairOf(ctx context.Context, src Source, chosen, rejected store.Info, policy Redacted,
	rank func(chosen, rejected []session.Chunk) (firstWins, ranked bool),
) (Pair, bool, error) {
	base, ok, err := src.CommonBase(ctx, chosen.ID, rejected.ID)
	if err != nil {
		return Pair{}, false, fmt.Errorf("pairs: common base of %s and %s: %w", chosen.ID, rejected.ID, err)
	}
	if !ok {
		return Pair{}, false, nil
	}
	prefix, err := src.Transcript(ctx, base)
	if err != nil {
		return Pair{}, false, fmt.Errorf("pairs: transcript of %s: %w", base, err)
	}
	ct, err := src.Transcript(ctx, chosen.ID)
	if err != nil {
		return Pair{}, false, fmt.Errorf("pairs: transcript of %s: %w", chosen.ID, err)
	}
	rt, err := src.Transcript(ctx, rejected.ID)
	if err != nil {
		return Pair{}, false, fmt.Errorf("pairs: transcript of %s: %w", rejected.ID, err)
	}
	if len(ct) < len(prefix) || len(rt) < len(prefix) {
		return Pair{}, false, nil
	}
	if rank != nil {
		firstWins, ranked := rank(ct[len(prefix):], rt[len(prefix):])
		if !ranked {
			return Pair{}, false, nil
		}
		if !firstWins {
			chosen, rejected, ct, rt = rejected, chosen, rt, ct
		}
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
		PromptVersion: base, Chosen: ProvenanceOf(chosen), Rejected: ProvenanceOf(rejected),
	}}, true, nil
}
