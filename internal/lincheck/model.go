// Package lincheck holds a sequential model of the Session Graph for
// checking recorded histories of concurrent operations for
// linearizability with github.com/anishathalye/porcupine.
//
// The model's state is the set of versions created so far under one root
// session, each with its transcript, first parent and base. Operations:
//
//   - Fork(p) returns a new id whose transcript is p's;
//   - Append(p, text) returns a new id whose transcript is p's plus text;
//   - Merge(a, b) returns a new id whose transcript is a's followed by the
//     chunks of b's that a's does not contain, in b's order, where a chunk
//     is identified by its origin (the version that first recorded it and
//     its index there, carried through forks and merges: Rath's merge
//     rule, pkg/session "Merge"), not by its text;
//   - Run(p) returns the output of a run forwarding p through an agent
//     that answers RunReply: p's transcript plus that answer;
//   - Read(id) returns id's transcript;
//   - Descendants returns every version created under the root.
//
// A new id must not exist yet; a read must return exactly what the state
// holds. Descendants is what gives the check teeth: a version whose
// creation returned before a Descendants call began must be in its result,
// and one created after it returned must not.
package lincheck

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"
)

// Kind names an operation.
type Kind string

// Operations.
const (
	Fork        Kind = "fork"
	Append      Kind = "append"
	Merge       Kind = "merge"
	Run         Kind = "run"
	Read        Kind = "read"
	Descendants Kind = "descendants"
)

// Input is an operation's call.
type Input struct {
	Kind Kind
	// ID is the version operated on (the first for a merge).
	ID string
	// Other is the merge's second version.
	Other string
	// Text is the appended user message.
	Text string
}

// Output is an operation's result.
type Output struct {
	// ID is the version created (fork, append, merge, run).
	ID string
	// Transcript is the created or read version's transcript, one string
	// per chunk ("role: text").
	Transcript []string
	// IDs are the versions Descendants returned.
	IDs []string
	// Failed marks an operation that returned an error; it must not have
	// changed the state.
	Failed bool
}

type version struct {
	id         string
	transcript []string
	// origins are the transcript's chunks' origins ("version#index"), one
	// per chunk.
	origins []string
	// base is the version whose transcript this one extends ("" for the
	// root).
	base string
}

// State is the model's state: the versions in creation order. It is never
// mutated; Step returns a new State.
type State struct {
	vs []version
}

func (s State) find(id string) (version, bool) {
	for _, v := range s.vs {
		if v.id == id {
			return v, true
		}
	}
	return version{}, false
}

func (s State) with(v version) State {
	return State{vs: append(s.vs[:len(s.vs):len(s.vs)], v)}
}

// Model returns the porcupine model of the Session Graph under root, whose
// transcript is rootTranscript; runReply is the chunk a run appends.
func Model(root string, rootTranscript []string, runReply string) porcupine.Model {
	return porcupine.Model{
		Init: func() any {
			origins := make([]string, len(rootTranscript))
			for i := range origins {
				origins[i] = fmt.Sprintf("%s#%d", root, i)
			}
			return State{vs: []version{{id: root, transcript: rootTranscript, origins: origins}}}
		},
		Step: func(state, input, output any) (bool, any) {
			return step(state.(State), input.(Input), output.(Output), root, runReply)
		},
		Equal: func(a, b any) bool {
			x, y := a.(State), b.(State)
			if len(x.vs) != len(y.vs) {
				return false
			}
			for _, v := range x.vs {
				if _, ok := y.find(v.id); !ok {
					return false
				}
			}
			return true
		},
		Hash: func(state any) uint64 {
			var sum uint64
			for _, v := range state.(State).vs {
				h := fnv.New64a()
				_, _ = h.Write([]byte(v.id))
				sum += h.Sum64()
			}
			return sum
		},
		DescribeOperation: func(input, output any) string {
			in, out := input.(Input), output.(Output)
			return fmt.Sprintf("%s(%s %s %s) → %s %d chunks %d ids failed=%v", in.Kind, in.ID, in.Other, in.Text, out.ID, len(out.Transcript), len(out.IDs), out.Failed)
		},
	}
}

func step(s State, in Input, out Output, root, runReply string) (bool, any) {
	if out.Failed {
		// A failed call changed nothing (every operation is one
		// transaction).
		return true, s
	}
	create := func(base string, want, origins []string) (bool, any) {
		if out.ID == "" || !slices.Equal(out.Transcript, want) {
			return false, s
		}
		if _, exists := s.find(out.ID); exists {
			return false, s
		}
		return true, s.with(version{id: out.ID, transcript: want, origins: origins, base: base})
	}
	switch in.Kind {
	case Fork, Append, Run:
		p, ok := s.find(in.ID)
		if !ok {
			return false, s
		}
		want, origins := slices.Clone(p.transcript), slices.Clone(p.origins)
		switch in.Kind {
		case Append:
			want = append(want, "user: "+in.Text)
		case Run:
			want = append(want, "assistant: "+runReply)
		}
		if in.Kind != Fork {
			// The new chunk's origin is the version being created, whose
			// id only the output names.
			origins = append(origins, out.ID+"#0")
		}
		return create(p.id, want, origins)
	case Merge:
		a, okA := s.find(in.ID)
		b, okB := s.find(in.Other)
		if !okA || !okB {
			return false, s
		}
		want, origins := slices.Clone(a.transcript), slices.Clone(a.origins)
		for i, o := range b.origins {
			if !slices.Contains(a.origins, o) {
				want, origins = append(want, b.transcript[i]), append(origins, o)
			}
		}
		return create(a.id, want, origins)
	case Read:
		v, ok := s.find(in.ID)
		return ok && slices.Equal(v.transcript, out.Transcript), s
	case Descendants:
		want := make([]string, 0, len(s.vs)-1)
		for _, v := range s.vs {
			if v.id != root {
				want = append(want, v.id)
			}
		}
		got := slices.Clone(out.IDs)
		slices.Sort(want)
		slices.Sort(got)
		return slices.Equal(want, got), s
	}
	return false, s
}

// Describe renders a transcript for failure messages.
func Describe(transcript []string) string { return strings.Join(transcript, " | ") }
