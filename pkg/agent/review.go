package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/tool"
)

// Reviews: a call that is ambiguous (see [Journal]) stops the step with an
// [*AmbiguousError]; the worker records it in the journal (JournalAmbiguous)
// and the step waits in needs_review. A human's [Review] is recorded in the
// journal too (JournalReview, keyed by the call's round and id) and the
// step is delivered again; the resumed loop reads it for that call:
//
//   - retry: the call runs again (its start and result are recorded anew);
//   - skip: the given result is the call's result, the call does not run;
//   - fail: the step fails with [*ReviewFailedError], naming the reason.
//
// A retried or skipped call's decision is kept in the transcript as a
// review chunk (session.KindReview) before the round's tool results, so
// the graph, not only the journal, says who decided what.

// Journal kinds of reviews.
const (
	// JournalAmbiguous records that the step stopped on an ambiguous call.
	// Data: the [AmbiguousError].
	JournalAmbiguous = "ambiguous"
	// JournalReview records a decision on an ambiguous call. Data: the
	// [Review].
	JournalReview = "review"
)

// Review decisions ([Review.Decision]).
const (
	ReviewRetry = "retry"
	ReviewSkip  = "skip"
	ReviewFail  = "fail"
)

// maxReviewResult bounds a skip's result, as a tool result is bounded.
const maxReviewResult = 1 << 20

// Review is a human's decision on an ambiguous tool call.
type Review struct {
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	Round  int    `json:"round"`
	// Decision is ReviewRetry, ReviewSkip or ReviewFail.
	Decision string `json:"decision"`
	// Result is the tool result to use instead of running the call (skip
	// only): a JSON value.
	Result json.RawMessage `json:"result,omitempty"`
	// Reason says why (fail: required).
	Reason string `json:"reason,omitempty"`
	By     string `json:"by,omitempty"`
}

// Validate checks the review, naming the bad field.
func (r Review) Validate() error {
	switch {
	case r.CallID == "" || len(r.CallID) > maxCallIDBytes:
		return fmt.Errorf("call_id: must be 1..%d bytes", maxCallIDBytes)
	case r.Tool == "":
		return errors.New("tool: required")
	case r.Round < 1:
		return fmt.Errorf("round: must be 1 or more, got %d", r.Round)
	case r.Decision != ReviewRetry && r.Decision != ReviewSkip && r.Decision != ReviewFail:
		return fmt.Errorf("decision: must be %q, %q or %q, got %q", ReviewRetry, ReviewSkip, ReviewFail, r.Decision)
	case r.Decision == ReviewSkip && len(r.Result) == 0:
		return errors.New("result: required to skip (the JSON the tool would have returned)")
	case r.Decision != ReviewSkip && len(r.Result) > 0:
		return fmt.Errorf("result: only a skip takes a result, not a %s", r.Decision)
	case len(r.Result) > maxReviewResult:
		return fmt.Errorf("result: %d bytes, limit %d", len(r.Result), maxReviewResult)
	case len(r.Result) > 0 && !json.Valid(r.Result):
		return errors.New("result: not valid JSON")
	case r.Decision == ReviewFail && r.Reason == "":
		return errors.New("reason: required to fail")
	case len(r.Reason) > maxReasonBytes:
		return fmt.Errorf("reason: %d bytes, limit %d", len(r.Reason), maxReasonBytes)
	case len(r.By) > maxByBytes:
		return fmt.Errorf("by: %d bytes, limit %d", len(r.By), maxByBytes)
	}
	return nil
}

// ReviewChunk returns the review chunk recording r.
func ReviewChunk(r Review) (session.Chunk, error) {
	if err := r.Validate(); err != nil {
		return session.Chunk{}, fmt.Errorf("%w: review: %w", session.ErrInvalidChunk, err)
	}
	return session.Evidence(session.KindReview, r)
}

// ParseReview decodes a review (a journal entry's data or a review
// chunk's payload) strictly.
func ParseReview(raw []byte) (Review, error) {
	var r Review
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Review{}, fmt.Errorf("review: %w", err)
	}
	if dec.More() {
		return Review{}, errors.New("review: trailing data")
	}
	if err := r.Validate(); err != nil {
		return Review{}, fmt.Errorf("review: %w", err)
	}
	return r, nil
}

// ErrReviewFailed is wrapped by [*ReviewFailedError].
var ErrReviewFailed = errors.New("review failed the step")

// ReviewFailedError is the error of a step whose ambiguous call a review
// decided to fail.
type ReviewFailedError struct{ Review Review }

func (e *ReviewFailedError) Error() string {
	by := "a review"
	if e.Review.By != "" {
		by = e.Review.By
	}
	return fmt.Sprintf("tool call %s (%s, round %d) was ambiguous and %s failed the step: %s",
		e.Review.CallID, e.Review.Tool, e.Review.Round, by, e.Review.Reason)
}

// Unwrap returns ErrReviewFailed.
func (e *ReviewFailedError) Unwrap() error { return ErrReviewFailed }

// reviewed applies a recorded review to an ambiguous call: run reports
// that the call runs again (retry); otherwise body is its result (skip),
// or err stops the step (fail). ok is false when no review was recorded.
func (rp *replay) reviewed(round int, id string, t tool.Tool) (body string, run, ok bool, err error) {
	if rp == nil {
		return "", false, false, nil
	}
	r, ok := rp.reviews[callKey{round, id}]
	if !ok || r.Tool != t.Def().Name {
		return "", false, false, nil
	}
	c, err := ReviewChunk(r)
	if err != nil {
		return "", false, true, err
	}
	switch r.Decision {
	case ReviewFail:
		return "", false, true, &ReviewFailedError{Review: r}
	case ReviewRetry:
		rp.addChunk(c)
		return "", true, true, nil
	default:
		rp.addChunk(c)
		return string(r.Result), false, true, nil
	}
}

func (rp *replay) addChunk(c session.Chunk) {
	rp.mu.Lock()
	rp.chunks = append(rp.chunks, c)
	rp.mu.Unlock()
}

// takeChunks returns the review chunks of the round and forgets them.
func (rp *replay) takeChunks() []session.Chunk {
	if rp == nil {
		return nil
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	cs := rp.chunks
	rp.chunks = nil
	return cs
}
