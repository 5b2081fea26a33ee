package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// QueuedSteps returns the step ids of the jobs a queue holds now: jobs
// waiting for delivery and jobs delivered but not yet acknowledged (the
// work-queue stream deletes a job when it is acked, and keeps a job whose
// deliveries ran out). It reads at most limit messages, one request each,
// in stream order; complete is false when the queue held more, and then
// steps lists only the first limit. The reconciler uses it to republish
// only steps whose job is really gone, not steps waiting behind a backlog.
func (b *Bus) QueuedSteps(ctx context.Context, queue string, limit int) (steps map[string]bool, complete bool, err error) {
	if queue == "" {
		queue = DefaultQueue
	}
	if err := ValidQueue(queue); err != nil {
		return nil, false, err
	}
	if limit < 1 {
		return nil, false, fmt.Errorf("%w: queued steps limit = %d, want >= 1", ErrInvalidConfig, limit)
	}
	stream, err := b.js.Stream(ctx, JobsStream)
	if err != nil {
		return nil, false, fmt.Errorf("stream %s: %w", JobsStream, translate(ctx, err))
	}
	steps = make(map[string]bool)
	subject := JobSubject(queue)
	seq := stream.CachedInfo().State.FirstSeq
	for n := 0; ; n++ {
		m, err := stream.GetMsg(ctx, max(seq, 1), jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return steps, true, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("read %s at seq %d: %w", subject, seq, translate(ctx, err))
		}
		if n == limit {
			return steps, false, nil
		}
		var job struct {
			StepID string `json:"step_id"`
		}
		if json.Unmarshal(m.Data, &job) == nil && job.StepID != "" {
			steps[job.StepID] = true
		}
		seq = m.Sequence + 1
	}
}
