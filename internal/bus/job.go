package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rath-run/rath/pkg/session"
)

// JobVersion is the envelope version of [Job] this package writes and reads.
const JobVersion = 1

// Limits.
const (
	// MaxJobSize is the largest encoded Job envelope Publish accepts, in bytes.
	MaxJobSize = 1 << 20
	// MaxStepIDLen is the longest StepID (it is also the Nats-Msg-Id header).
	MaxStepIDLen = 256
	// MaxRunIDLen is the longest RunID (it is also an event subject token).
	MaxRunIDLen = 128
	// MaxQueueLen is the longest queue name.
	MaxQueueLen = 64
	// DefaultQueue is the queue of a Job whose Queue is empty.
	DefaultQueue = "default"
)

// Header names set on every job message.
const (
	// HeaderMsgID is JetStream's de-duplication header; it carries StepID.
	HeaderMsgID = nats.MsgIdHdr
	// HeaderJobVersion carries the envelope version (JobVersion).
	HeaderJobVersion = "Rath-Job-Version"
)

// Job is the versioned envelope of one step: "forward version Input through
// Target". It is the payload of a message on rath.jobs.<queue>.
type Job struct {
	// V is the envelope version; 0 means JobVersion on Publish. A delivery
	// with any other version is reported as ErrMalformedJob.
	V int `json:"v"`
	// StepID identifies the step; it is also the Nats-Msg-Id (unless the
	// caller sets one, see [Bus.Publish]), so publishing the same step twice
	// within the dedupe window stores it once (even if the rest of the job
	// differs: the first one wins). Printable ASCII
	// without spaces, at most MaxStepIDLen bytes.
	StepID string `json:"step_id"`
	// RunID is the run the step belongs to: [A-Za-z0-9_-], at most
	// MaxRunIDLen bytes (it names event subjects).
	RunID string `json:"run_id"`
	// Queue is the subject token of the job: [a-z0-9_-], at most MaxQueueLen
	// bytes. Empty means DefaultQueue.
	Queue string `json:"queue"`
	// Input is the session version id (a UUID) the step starts from.
	Input string `json:"input"`
	// Target is the agent spec etc.; opaque to the bus, but it must be valid
	// JSON.
	Target json.RawMessage `json:"target"`
	// CreatedAt is when the job was made; zero means now on Publish.
	CreatedAt time.Time `json:"created_at"`
	// Budget is the run's budget and what its earlier steps used; nil
	// means unlimited.
	Budget *Budget `json:"budget,omitempty"`
	// Conversation is the id of the root version the run's session
	// descends from (gen_ai.conversation.id on the step's spans); empty
	// when unknown (a run recorded before runs carried it).
	Conversation string `json:"conversation,omitempty"`
}

// Budget is a run's spending limit as a step sees it. Zero limits are
// unlimited; Used* is what the run's committed steps spent before this one.
type Budget struct {
	MaxTokens   int64   `json:"max_tokens,omitempty"`
	UsedTokens  int64   `json:"used_tokens,omitempty"`
	MaxCostUSD  float64 `json:"max_cost_usd,omitempty"`
	UsedCostUSD float64 `json:"used_cost_usd,omitempty"`
}

// JobSubject returns the subject of a queue's jobs: rath.jobs.<queue>.
func JobSubject(queue string) string { return "rath.jobs." + queue }

// ValidQueue reports whether queue is a valid queue name (not empty).
func ValidQueue(queue string) error {
	if queue == "" || len(queue) > MaxQueueLen {
		return fmt.Errorf("%w: %q: want 1..%d bytes of [a-z0-9_-]", ErrInvalidQueue, queue, MaxQueueLen)
	}
	for i := range len(queue) {
		c := queue[i]
		if !isQueueByte(c) {
			return fmt.Errorf("%w: %q: byte %d (%q) is not in [a-z0-9_-]", ErrInvalidQueue, queue, i, c)
		}
	}
	return nil
}

func isQueueByte(c byte) bool {
	return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}

func isRunIDByte(c byte) bool { return isQueueByte(c) || 'A' <= c && c <= 'Z' }

// validRunID checks a run id: a subject token of [A-Za-z0-9_-].
func validRunID(id string) error {
	if id == "" {
		return fmt.Errorf("run_id is empty")
	}
	if len(id) > MaxRunIDLen {
		return fmt.Errorf("run_id is %d bytes, limit %d", len(id), MaxRunIDLen)
	}
	for i := range len(id) {
		c := id[i]
		if !isRunIDByte(c) {
			return fmt.Errorf("run_id %q: byte %d (%q) is not in [A-Za-z0-9_-]", id, i, c)
		}
	}
	return nil
}

// validStepID checks a step id (or message id): printable ASCII without
// spaces, 1..MaxStepIDLen bytes.
func validStepID(id string) error {
	if id == "" {
		return errors.New("empty")
	}
	if len(id) > MaxStepIDLen {
		return fmt.Errorf("%d bytes, limit %d", len(id), MaxStepIDLen)
	}
	for i := range len(id) {
		if c := id[i]; c <= ' ' || c > '~' {
			return fmt.Errorf("%q: byte %d (%q) is not printable ASCII without spaces", id, i, c)
		}
	}
	return nil
}

// validate checks a job whose defaults have been filled.
func (j *Job) validate() error {
	if j.V != JobVersion {
		return fmt.Errorf("%w: v = %d, want %d", ErrInvalidJob, j.V, JobVersion)
	}
	if err := validStepID(j.StepID); err != nil {
		return fmt.Errorf("%w: step_id: %w", ErrInvalidJob, err)
	}
	if err := validRunID(j.RunID); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidJob, err)
	}
	if err := ValidQueue(j.Queue); err != nil {
		return fmt.Errorf("%w: queue: %w", ErrInvalidJob, err)
	}
	if j.Input == "" {
		return fmt.Errorf("%w: input is empty (want a session version id)", ErrInvalidJob)
	}
	if _, err := session.ParseID(j.Input); err != nil {
		return fmt.Errorf("%w: input: %w", ErrInvalidJob, err)
	}
	if j.Conversation != "" {
		if _, err := session.ParseID(j.Conversation); err != nil {
			return fmt.Errorf("%w: conversation: %w", ErrInvalidJob, err)
		}
	}
	if len(j.Target) == 0 {
		return fmt.Errorf("%w: target is empty", ErrInvalidJob)
	}
	if !json.Valid(j.Target) {
		return fmt.Errorf("%w: target is not valid JSON", ErrInvalidJob)
	}
	if j.CreatedAt.IsZero() {
		return fmt.Errorf("%w: created_at is zero", ErrInvalidJob)
	}
	return nil
}

// validHeader checks caller-supplied headers: keys are non-empty tokens
// without ':', spaces or control bytes; values have no CR or LF.
func validHeader(hdr nats.Header) error {
	if id := hdr.Get(HeaderMsgID); id != "" {
		if err := validStepID(id); err != nil {
			return fmt.Errorf("%w: header %s: %w", ErrInvalidJob, HeaderMsgID, err)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(hdr)) {
		if k == "" {
			return fmt.Errorf("%w: header with empty name", ErrInvalidJob)
		}
		for i := range len(k) {
			if c := k[i]; c <= ' ' || c > '~' || c == ':' {
				return fmt.Errorf("%w: header name %q: byte %d (%q) not allowed", ErrInvalidJob, k, i, c)
			}
		}
		for _, v := range hdr[k] {
			for i := range len(v) {
				if c := v[i]; c == '\r' || c == '\n' {
					return fmt.Errorf("%w: header %s: value contains CR or LF", ErrInvalidJob, k)
				}
			}
		}
	}
	return nil
}

// Publish validates job, fills its defaults (V, Queue, CreatedAt), and
// publishes it on rath.jobs.<queue>, waiting for the server's PubAck. The
// message carries a copy of every header in hdr (trace context: W3C
// traceparent/tracestate via [HeaderCarrier]; hdr may be nil),
// Rath-Job-Version, and Nats-Msg-Id = StepID unless hdr sets Nats-Msg-Id
// itself: a reconciler that must re-send a step whose message was lost
// inside the dedupe window passes a fresh id (e.g. StepID + "/again"); the
// commit, keyed by StepID, still makes the step run once. duplicate is true
// when the server already held a message with that id in its dedupe
// window: nothing new was stored, which is success.
//
// Errors: ErrInvalidJob (the message names the field), ErrTooLarge (encoded
// envelope over MaxJobSize), ErrUnavailable (no server, timeout, ctx
// deadline while waiting for the PubAck), or context.Canceled. After
// ErrUnavailable the job may still have been stored (a publish made while
// disconnected is sent on reconnect): retry with the same StepID, the
// dedupe window makes that safe.
func (b *Bus) Publish(ctx context.Context, job Job, hdr nats.Header) (duplicate bool, err error) {
	if job.V == 0 {
		job.V = JobVersion
	}
	if job.Queue == "" {
		job.Queue = DefaultQueue
	}
	if job.CreatedAt.IsZero() {
		job.CreatedAt = b.now().UTC()
	}
	if err := job.validate(); err != nil {
		return false, err
	}
	if err := validHeader(hdr); err != nil {
		return false, err
	}
	data, err := json.Marshal(job)
	if err != nil {
		return false, fmt.Errorf("%w: encode: %w", ErrInvalidJob, err)
	}
	if len(data) > MaxJobSize {
		return false, fmt.Errorf("%w: job %s is %d bytes encoded, limit %d", ErrTooLarge, job.StepID, len(data), MaxJobSize)
	}
	msg := nats.NewMsg(JobSubject(job.Queue))
	msg.Data = data
	for k, v := range hdr {
		msg.Header[k] = slices.Clone(v)
	}
	// A caller-set message id is kept: the reconciler republishes a lost
	// step under a fresh id to get past the dedupe window.
	if msg.Header.Get(HeaderMsgID) == "" {
		msg.Header.Set(HeaderMsgID, job.StepID)
	}
	msg.Header.Set(HeaderJobVersion, strconv.Itoa(JobVersion))
	ack, err := b.js.PublishMsg(ctx, msg)
	if err != nil {
		return false, fmt.Errorf("publish job %s: %w", job.StepID, translate(ctx, err))
	}
	if ack.Duplicate {
		b.cfg.Logger.DebugContext(ctx, "bus: duplicate job", "step_id", job.StepID, "queue", job.Queue)
	}
	return ack.Duplicate, nil
}

// decodeJob parses a delivered message. The returned Job holds whatever
// could be decoded even when err is non-nil.
func decodeJob(hdr nats.Header, data []byte) (Job, error) {
	var job Job
	if v := hdr.Get(HeaderJobVersion); v != "" && v != strconv.Itoa(JobVersion) {
		return job, fmt.Errorf("%w: header %s = %q, want %d", ErrMalformedJob, HeaderJobVersion, v, JobVersion)
	}
	if len(data) > MaxJobSize {
		// Publish refuses these; the stream's limit leaves room for headers.
		return job, fmt.Errorf("%w: body is %d bytes, over the %d-byte limit (MaxJobSize)", ErrMalformedJob, len(data), MaxJobSize)
	}
	if err := json.Unmarshal(data, &job); err != nil {
		return job, fmt.Errorf("%w: decode %d bytes: %w", ErrMalformedJob, len(data), err)
	}
	if err := job.validate(); err != nil {
		return job, fmt.Errorf("%w: %w", ErrMalformedJob, err)
	}
	return job, nil
}
