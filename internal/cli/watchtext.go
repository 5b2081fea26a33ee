package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/rath-run/rath/pkg/api"
)

// streamText prints the token streams of a run's steps as text lines. Steps
// that run at once (the branches of a fan-out) stream their tokens
// interleaved; printed as they come, their replies would mix mid-word. One
// step owns the line at a time: its tokens print as they arrive, the
// others' are held until the step owns the line (its next token after the
// owner ended) or ends (its held text is printed whole, before the event
// that ended it). Every other event ends the current line.
type streamText struct {
	w       io.Writer
	owner   string // the step whose tokens print as they arrive; "" for none
	midLine bool
	held    map[string]*strings.Builder
	order   []string // held steps, first held first
}

func newStreamText(w io.Writer) *streamText {
	return &streamText{w: w, held: map[string]*strings.Builder{}}
}

// token prints or holds a step.token event's text.
func (s *streamText) token(step, text string) {
	if s.owner == "" {
		s.owner = step
		if b := s.take(step); b != "" {
			fmt.Fprint(s.w, b)
			s.midLine = true
		}
	}
	if s.owner != step {
		b, ok := s.held[step]
		if !ok {
			b = &strings.Builder{}
			s.held[step] = b
			s.order = append(s.order, step)
		}
		b.WriteString(text)
		return
	}
	fmt.Fprint(s.w, text)
	s.midLine = true
}

// event ends the current line before another event's line is printed;
// when e ends a step, that step's held text is printed first.
func (s *streamText) event(e api.Event) {
	s.endLine()
	if !endsStep(e.Type) {
		return
	}
	if e.StepID == s.owner {
		s.owner = ""
		return
	}
	if b := s.take(e.StepID); b != "" {
		fmt.Fprintln(s.w, b)
	}
}

// flush prints whatever is still held, each step's text on its own line.
func (s *streamText) flush() {
	s.endLine()
	for len(s.order) > 0 {
		if b := s.take(s.order[0]); b != "" {
			fmt.Fprintln(s.w, b)
		}
	}
}

func (s *streamText) endLine() {
	if s.midLine {
		fmt.Fprintln(s.w)
		s.midLine = false
	}
}

// take removes and returns a step's held text.
func (s *streamText) take(step string) string {
	b, ok := s.held[step]
	if !ok {
		return ""
	}
	delete(s.held, step)
	for i, id := range s.order {
		if id == step {
			s.order = append(s.order[:i], s.order[i+1:]...)
			break
		}
	}
	return b.String()
}

// endsStep reports whether an event of type typ ends or pauses a step's
// stream.
func endsStep(typ string) bool {
	switch typ {
	case api.EventStepCommitted, api.EventStepFailed, api.EventStepNeedsReview, "step.waiting":
		return true
	}
	return false
}
