package flow

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rath-run/rath/pkg/sandbox"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/trainset"
)

// Verifier limits.
const (
	// MaxVerifierCommandBytes bounds a verifier's command.
	MaxVerifierCommandBytes = 16 << 10
	// MaxVerifierTimeoutSeconds bounds a verifier's timeout.
	MaxVerifierTimeoutSeconds = 3600
	// maxVerifierStdout caps the stdout a verifier's score is read from.
	maxVerifierStdout = 64 << 10
)

// VerifierBy is the label's "by" of every score a verifier records: the
// label chunk says it came from a verifier, not a person.
const VerifierBy = trainset.VerifierBy

// ErrBadVerifierOutput means a verifier printed a JSON object that is not
// {"score": N} with N a finite number. Running it again will not help.
var ErrBadVerifierOutput = errors.New("rath: unusable verifier output")

// Verifier scores a branch: Command runs with /bin/sh -c at the root of
// the branch's workspace, in the sandbox its session is placed on (the
// same sandbox, and the same operator policy, as the branch agent's
// tools). Its score is its stdout when that is a JSON object {"score": N},
// else 1.0 for exit code 0 and 0.0 for any other exit or a timeout.
type Verifier struct {
	Command string `json:"command"`
	// TimeoutSeconds bounds the command; 0 is the sandbox's default.
	TimeoutSeconds float64 `json:"timeout_seconds,omitempty"`
}

// Validate checks the verifier, naming the bad field.
func (v *Verifier) Validate() error {
	switch {
	case strings.TrimSpace(v.Command) == "":
		return errors.New("command: required (run with /bin/sh -c in the branch's workspace)")
	case len(v.Command) > MaxVerifierCommandBytes:
		return fmt.Errorf("command: %d bytes, limit %d", len(v.Command), MaxVerifierCommandBytes)
	case !utf8.ValidString(v.Command):
		return errors.New("command: not valid UTF-8")
	case math.IsNaN(v.TimeoutSeconds) || v.TimeoutSeconds < 0 || v.TimeoutSeconds > MaxVerifierTimeoutSeconds:
		return fmt.Errorf("timeout_seconds: %v is outside 0..%d", v.TimeoutSeconds, MaxVerifierTimeoutSeconds)
	}
	return nil
}

// VerifierScore returns the score of a verifier's run: its stdout when
// that (trimmed) is a JSON object {"score": N} with N finite, else 1 for
// exit code 0 and 0 otherwise (a timeout is 0). A JSON object of another
// shape is [ErrBadVerifierOutput].
func VerifierScore(res sandbox.ExecResult) (float64, error) {
	out := bytes.TrimSpace(res.Stdout)
	if scoredByStdout(res) {
		var body struct {
			Score *float64 `json:"score"`
		}
		dec := json.NewDecoder(bytes.NewReader(out))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&body); err != nil || dec.More() {
			return 0, fmt.Errorf("%w: stdout is a JSON object but not {\"score\": N}: %.200s", ErrBadVerifierOutput, out)
		}
		if body.Score == nil {
			return 0, fmt.Errorf("%w: stdout has no \"score\"", ErrBadVerifierOutput)
		}
		if math.IsNaN(*body.Score) || math.IsInf(*body.Score, 0) {
			return 0, fmt.Errorf("%w: score %v is not a finite number", ErrBadVerifierOutput, *body.Score)
		}
		return *body.Score, nil
	}
	if res.ExitCode == 0 && !res.TimedOut {
		return 1, nil
	}
	return 0, nil
}

// scoredByStdout reports whether the score is read from res's stdout: a
// whole (not truncated) JSON object.
func scoredByStdout(res sandbox.ExecResult) bool {
	out := bytes.TrimSpace(res.Stdout)
	return len(out) > 0 && out[0] == '{' && !res.StdoutTruncated
}

// ScoreOf returns the score the verify step that committed s recorded.
func ScoreOf(s session.Session) (float64, error) {
	if s.IsZero() {
		return 0, errors.New("flow: score of a zero session")
	}
	for _, c := range s.Version().Chunks {
		if l, ok := trainset.LabelOf(c); ok && l.Score != nil {
			return *l.Score, nil
		}
	}
	return 0, fmt.Errorf("flow: version %s records no score", s.ID())
}

func executeVerify(ctx context.Context, env Env, key string, call Call, prod session.Producer, in session.Session) (session.Session, error) {
	if env.Workspace == nil {
		return session.Session{}, fmt.Errorf("verify %s: this runtime opens no sandbox, and a verifier runs in one", call.Agent.Name)
	}
	sb, done, err := env.Workspace(ctx, in.Version())
	if err != nil {
		return session.Session{}, fmt.Errorf("verify %s: open workspace: %w", call.Agent.Name, err)
	}
	// The verifier reads the branch's workspace; what it writes there is
	// not kept (the score version keeps the branch's placement).
	defer func() { _, _ = done(context.WithoutCancel(ctx), false) }()
	v := call.Verifier
	res, err := sb.Exec(ctx, sandbox.ExecRequest{
		Shell:     v.Command,
		Timeout:   time.Duration(v.TimeoutSeconds * float64(time.Second)),
		MaxOutput: maxVerifierStdout,
	})
	if err != nil {
		return session.Session{}, fmt.Errorf("verify %s: run the verifier: %w", call.Agent.Name, err)
	}
	score, err := VerifierScore(res)
	if err != nil {
		return session.Session{}, fmt.Errorf("verify %s: %w", call.Agent.Name, err)
	}
	note := fmt.Sprintf("exit %d", res.ExitCode)
	switch {
	case res.TimedOut:
		note = "timed out"
	case scoredByStdout(res):
		note += ", score from stdout"
	}
	chunk, err := trainset.LabelChunk(trainset.Label{Score: &score, By: VerifierBy, Note: note})
	if err != nil {
		return session.Session{}, fmt.Errorf("verify %s: %w", call.Agent.Name, err)
	}
	prod.Agent = call.Agent.Name
	return in.Extend(ctx, session.Extension{
		Op: session.OpStep, Chunks: []session.Chunk{chunk}, Producer: prod, Key: key,
		Extras: []session.Extra{rawExtra("verify.exit_code", res.ExitCode), rawExtra("verify.timed_out", res.TimedOut)},
	})
}
