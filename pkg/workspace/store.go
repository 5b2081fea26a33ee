package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

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
// rath-workspaces) to [Store].
func JetStream(obs jetstream.ObjectStore) Store { return jsStore{obs: obs} }

type jsStore struct{ obs jetstream.ObjectStore }

func (s jsStore) Exists(ctx context.Context, name string) (bool, error) {
	_, err := s.obs.GetInfo(ctx, name)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, jetstream.ErrObjectNotFound):
		return false, nil
	}
	return false, fmt.Errorf("object store: stat %s: %w", name, err)
}

func (s jsStore) Put(ctx context.Context, name string, r io.Reader) (int64, error) {
	info, err := s.obs.Put(ctx, jetstream.ObjectMeta{Name: name}, r)
	if err != nil {
		return 0, fmt.Errorf("object store: put %s: %w", name, err)
	}
	return int64(info.Size), nil
}

func (s jsStore) Get(ctx context.Context, name string) (io.ReadCloser, error) {
	res, err := s.obs.Get(ctx, name)
	if err != nil {
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, name)
		}
		return nil, fmt.Errorf("object store: get %s: %w", name, err)
	}
	return res, nil
}

func (s jsStore) Delete(ctx context.Context, name string) error {
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
