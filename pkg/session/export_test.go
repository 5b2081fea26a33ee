package session

import (
	"context"
	"io"
)

// ImportInBatches imports r into g as [Import] does into a [BulkGraph],
// streaming batches of n versions, but writing each batch with Put (no
// transaction): it checks that batch boundaries change no result.
func ImportInBatches(ctx context.Context, g Graph, r io.Reader, n int) (Session, error) {
	head, err := newImporter(r, graphSink{g}, n, 1<<30).run(ctx)
	if err != nil {
		return Session{}, err
	}
	return Session{g: g, v: head}, nil
}
