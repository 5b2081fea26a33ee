package flow

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/rath-run/rath/pkg/session"
)

// ErrNondeterministic reports a durable run re-executed with a step whose
// input changed: the step key committed (or was recorded) with one input
// and target, and the re-executed workflow now gives it another (its code
// or its workflow file changed). The recorded step is not returned in its
// place unless the run accepts changes (POST /v1/runs/{id}/accept-changes,
// `rathctl runs resume RUN --accept-changes`).
var ErrNondeterministic = errors.New("rath: nondeterministic workflow")

// NondeterministicError names the step whose input changed, with the
// digest recorded for it and the digest it gets now ([StepDigest]). It
// matches [ErrNondeterministic] through errors.Is.
type NondeterministicError struct {
	Key      string
	Recorded string
	New      string
}

func (e *NondeterministicError) Error() string {
	return fmt.Sprintf("step %s: its input changed since it was recorded (recorded %s, now %s): %v; resume with --accept-changes to keep the recorded step",
		e.Key, e.Recorded, e.New, ErrNondeterministic)
}

// Is reports whether target is ErrNondeterministic.
func (e *NondeterministicError) Is(target error) bool { return target == ErrNondeterministic }

// stepDigestInput is what a step digest covers: the input's identity
// ([InputIdentity]) and the whole call (the agent spec, a selector's
// candidates, a compressor's instruction and spec).
type stepDigestInput struct {
	Input  string `json:"input"`
	Target Call   `json:"target"`
}

// StepDigest returns the digest of a step's input: "sha256:" and the hex
// SHA-256 of the JSON of the input's identity ([InputIdentity]) and the
// call. Two executions of a step key with the same digest forward the
// same transcript through the same target; a different digest is a
// changed workflow.
func StepDigest(call Call, input string) (string, error) {
	b, err := json.Marshal(stepDigestInput{Input: input, Target: call})
	if err != nil {
		return "", fmt.Errorf("step digest: %w", err)
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// maxIdentityHops bounds the unkeyed versions [InputIdentity] walks.
const maxIdentityHops = 64

// InputIdentity returns what a step's input version id stands for across
// re-executions of a workflow. A keyed version (a step's output, a fan-in
// merge) is committed again as the same version, so its id is its
// identity. An unkeyed one — a fork of a fan-out branch, a message the
// workflow's code appended, a detach — gets a new id each time the
// workflow runs, so its identity is its content instead: the identity of
// its base and the hashes of the chunks it appends, walked up to the
// nearest keyed version or root (at most 64 versions; past that, the id).
func InputIdentity(ctx context.Context, g session.Graph, id session.ID) (string, error) {
	v, err := g.Get(ctx, id)
	if err != nil {
		return "", fmt.Errorf("input identity of %s: %w", id, err)
	}
	var chain []*session.Version
	anchor := ""
	for {
		if v.Key != "" {
			anchor = "version:" + v.ID.String()
			break
		}
		chain = append(chain, v)
		if v.Base == nil {
			break
		}
		if len(chain) > maxIdentityHops {
			anchor = "version:" + v.ID.String()
			chain = chain[:len(chain)-1]
			break
		}
		if v, err = g.Get(ctx, *v.Base); err != nil {
			return "", fmt.Errorf("input identity of %s: %w", id, err)
		}
	}
	if len(chain) == 0 {
		return anchor, nil
	}
	h := sha256.New()
	h.Write([]byte(anchor))
	for i := len(chain) - 1; i >= 0; i-- {
		h.Write([]byte{0})
		for _, c := range chain[i].Chunks {
			h.Write([]byte(c.Hash()))
			h.Write([]byte{1})
		}
		p, err := json.Marshal(chain[i].Placement)
		if err != nil {
			return "", fmt.Errorf("input identity of %s: %w", id, err)
		}
		h.Write(p)
	}
	return "content:" + hex.EncodeToString(h.Sum(nil)), nil
}

// CheckDigest compares the digest recorded for step key with the one it
// gets now: nil when they are equal or nothing was recorded (a step from
// before digests were kept), else a *[NondeterministicError].
func CheckDigest(key, recorded, now string) error {
	if recorded == "" || recorded == now {
		return nil
	}
	return &NondeterministicError{Key: key, Recorded: recorded, New: now}
}
