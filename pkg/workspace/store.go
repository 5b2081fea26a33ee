package workspace

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Store is the object store snapshots live in. Names are "blob/<hex>" and
// "manifest/<hex>". Implementations are safe for concurrent use.
type Store interface {
	// Exists reports whether the named object is stored.
	Exists(ctx context.Context, name string) (bool, error)
	// Put stores r's content under name, replacing any object of that name,
	// and returns the bytes it stored.
	Put(ctx context.Context, name string, r io.Reader) (int64, error)
	// Get opens the named object; a missing one is an error wrapping
	// [ErrNotFound]. The caller closes the reader.
	Get(ctx context.Context, name string) (io.ReadCloser, error)
	// Delete removes the named object (used to withdraw a blob whose
	// content changed while it was uploaded). Deleting a missing object is
	// not an error.
	Delete(ctx context.Context, name string) error
}

// JetStream adapts a JetStream object store bucket (the bus's
// rath-workspaces) to [Store]; js is a long-lived JetStream context on the
// same connection (the bus's). Objects are read with the object store API
// and written in its format (chunks on $O.<bucket>.C.<id>, then the meta
// message on $O.<bucket>.M.<name>), so any object store client reads them.
//
// Writes do not go through ObjectStore.Put: in nats.go v1.55.0 each Put
// makes a throwaway JetStream context whose reconnect-listener goroutine
// can start after Put has torn the context down and then block forever on
// a nil channel — a goroutine leaked per unlucky Put (about 1 in 200 under
// load here). Publishing through js's one async publisher has no such race.
func JetStream(js jetstream.JetStream, obs jetstream.ObjectStore) Store {
	return &jsStore{js: js, obs: obs}
}

// jsChunkSize is the object store's default chunk size; jsWindow bounds
// the chunks in flight per Put.
const (
	jsChunkSize = 128 << 10
	jsWindow    = 32
	// jsDrainTimeout bounds how long a failed Put waits for its chunks in
	// flight to land before it purges them.
	jsDrainTimeout = 10 * time.Second
)

type jsStore struct {
	js  jetstream.JetStream
	obs jetstream.ObjectStore

	mu     sync.Mutex
	bucket string
	stream jetstream.Stream
}

// bucketName returns the bucket's name, and caches its stream's handle.
func (s *jsStore) bucketName(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bucket == "" {
		st, err := s.obs.Status(ctx)
		if err != nil {
			return "", fmt.Errorf("object store: status: %w", err)
		}
		stream, err := s.js.Stream(ctx, "OBJ_"+st.Bucket())
		if err != nil {
			return "", fmt.Errorf("object store: stream of %s: %w", st.Bucket(), err)
		}
		s.bucket, s.stream = st.Bucket(), stream
	}
	return s.bucket, nil
}

func (s *jsStore) Put(ctx context.Context, name string, r io.Reader) (int64, error) {
	bucket, err := s.bucketName(ctx)
	if err != nil {
		return 0, err
	}
	var id [16]byte
	_, _ = rand.Read(id[:])
	info := jetstream.ObjectInfo{
		ObjectMeta: jetstream.ObjectMeta{Name: name, Opts: &jetstream.ObjectMetaOptions{ChunkSize: jsChunkSize}},
		Bucket:     bucket,
		NUID:       hex.EncodeToString(id[:]),
	}
	chunkSubj := "$O." + bucket + ".C." + info.NUID
	h := sha256.New()
	var pending []jetstream.PubAckFuture
	wait := func(ctx context.Context, f jetstream.PubAckFuture) error {
		select {
		case <-f.Ok():
			return nil
		case err := <-f.Err():
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	// The chunks, then the meta message, all published asynchronously on
	// the one connection (the server stores them in that order), then one
	// wait for their acks: an object of one chunk costs one round trip.
	metaSent := false
	err = func() error {
		for {
			// A fresh buffer per chunk (in flight until acked), sized by
			// what was read: small files cost small buffers.
			buf, rerr := io.ReadAll(io.LimitReader(r, jsChunkSize))
			if rerr != nil {
				return rerr
			}
			if len(buf) > 0 {
				h.Write(buf)
				f, err := s.js.PublishMsgAsync(&nats.Msg{Subject: chunkSubj, Data: buf})
				if err != nil {
					return err
				}
				pending = append(pending, f)
				info.Size += uint64(len(buf))
				info.Chunks++
				if len(pending) >= jsWindow {
					if err := wait(ctx, pending[0]); err != nil {
						if ctx.Err() == nil {
							pending = pending[1:] // settled: its error is the answer
						}
						return err
					}
					pending = pending[1:]
				}
			}
			if len(buf) < jsChunkSize {
				break
			}
		}
		info.Digest = jetstream.GetObjectDigestValue(h)
		m, err := metaMsg(bucket, info)
		if err != nil {
			return err
		}
		f, err := s.js.PublishMsgAsync(m)
		if err != nil {
			return err
		}
		metaSent = true
		var errs []error
		pending = append(pending, f)
		for len(pending) > 0 {
			if err := wait(ctx, pending[0]); err != nil {
				if ctx.Err() != nil {
					return err // pending[0:] are not settled
				}
				errs = append(errs, err)
			}
			pending = pending[1:]
		}
		return errors.Join(errs...)
	}()
	if err != nil {
		// Withdraw what may have been stored: a meta message without its
		// chunks must not be read as the object. Chunks still in flight
		// are let land first, or the purge would miss them.
		wctx := context.WithoutCancel(ctx)
		dctx, cancel := context.WithTimeout(wctx, jsDrainTimeout)
		for _, f := range pending { // the publishes not settled yet
			_ = wait(dctx, f)
		}
		cancel()
		if metaSent {
			if derr := s.obs.Delete(wctx, name); derr != nil && !errors.Is(derr, jetstream.ErrObjectNotFound) {
				err = errors.Join(err, fmt.Errorf("withdraw: %w", derr))
			}
		}
		if st, serr := s.js.Stream(wctx, "OBJ_"+bucket); serr == nil {
			_ = st.Purge(wctx, jetstream.WithPurgeSubject(chunkSubj))
		}
		return 0, fmt.Errorf("object store: put %s: %w", name, err)
	}
	return int64(info.Size), nil
}

// metaMsg is the object's meta message, replacing earlier ones.
func metaMsg(bucket string, info jetstream.ObjectInfo) (*nats.Msg, error) {
	b, err := json.Marshal(info)
	if err != nil {
		return nil, err
	}
	m := nats.NewMsg("$O." + bucket + ".M." + base64.URLEncoding.EncodeToString([]byte(info.Name)))
	m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	m.Data = b
	return m, nil
}

func (s *jsStore) Exists(ctx context.Context, name string) (bool, error) {
	_, err := s.obs.GetInfo(ctx, name)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, jetstream.ErrObjectNotFound):
		return false, nil
	}
	return false, fmt.Errorf("object store: stat %s: %w", name, err)
}

// Get reads an object of at most one chunk (most workspace files) with two
// direct gets, its meta and its chunk, verifying size and digest; larger
// ones through the object store API, which verifies them as it streams.
func (s *jsStore) Get(ctx context.Context, name string) (io.ReadCloser, error) {
	if _, err := s.bucketName(ctx); err != nil {
		return nil, err
	}
	info, err := s.obs.GetInfo(ctx, name)
	if err != nil {
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, name)
		}
		return nil, fmt.Errorf("object store: get %s: %w", name, err)
	}
	if info.Chunks <= 1 && (info.Opts == nil || info.Opts.Link == nil) {
		var data []byte
		if info.Chunks == 1 {
			msg, err := s.stream.GetLastMsgForSubject(ctx, "$O."+info.Bucket+".C."+info.NUID)
			if err != nil {
				return nil, fmt.Errorf("object store: get %s: %w", name, err)
			}
			data = msg.Data
		}
		h := sha256.New()
		h.Write(data)
		if uint64(len(data)) != info.Size || jetstream.GetObjectDigestValue(h) != info.Digest {
			return nil, fmt.Errorf("%w: object %s", ErrCorrupt, name)
		}
		return io.NopCloser(bytes.NewReader(data)), nil
	}
	res, err := s.obs.Get(ctx, name)
	if err != nil {
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, name)
		}
		return nil, fmt.Errorf("object store: get %s: %w", name, err)
	}
	return res, nil
}

func (s *jsStore) Delete(ctx context.Context, name string) error {
	if err := s.obs.Delete(ctx, name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return fmt.Errorf("object store: delete %s: %w", name, err)
	}
	return nil
}

// MemoryStore is an in-memory [Store], for tests and single-process use. The
// zero value is empty and ready.
type MemoryStore struct {
	mu      sync.Mutex
	objects map[string][]byte
	written int64
	puts    int
}

// Exists implements [Store].
func (m *MemoryStore) Exists(_ context.Context, name string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.objects[name]
	return ok, nil
}

// Put implements [Store].
func (m *MemoryStore) Put(ctx context.Context, name string, r io.Reader) (int64, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.objects == nil {
		m.objects = map[string][]byte{}
	}
	m.objects[name] = b
	m.written += int64(len(b))
	m.puts++
	return int64(len(b)), nil
}

// Get implements [Store].
func (m *MemoryStore) Get(_ context.Context, name string) (io.ReadCloser, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.objects[name]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

// Delete implements [Store].
func (m *MemoryStore) Delete(_ context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objects, name)
	return nil
}

// Written returns how many objects and bytes Put has stored so far.
func (m *MemoryStore) Written() (objects int, bytes int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.puts, m.written
}

// Names returns the stored object names, unsorted.
func (m *MemoryStore) Names() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	names := make([]string, 0, len(m.objects))
	for n := range m.objects {
		names = append(names, n)
	}
	return names
}
