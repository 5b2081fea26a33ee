package flow

import (
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

// stepDigestInput is what a step digest covers: the input version and the
// whole call (the agent spec, a selector's candidates, a compressor's
// instruction and spec).
type stepDigestInput struct {
	Input  session.ID `json:"input"`
	Target Call       `json:"target"`
}

// StepDigest returns the digest of a step's input: "sha256:" and the hex
// SHA-256 of the JSON of the input version id and the call. Two
// executions of a step key with the same digest forward the same version
// through the same target; a different digest is a changed workflow.
func StepDigest(call Call, input session.ID) (string, error) {
	b, err := json.Marshal(stepDigestInput{Input: input, Target: call})
	if err != nil {
		return "", fmt.Errorf("step digest: %w", err)
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
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
