// Package memstore is an in-memory store.Store for tests. Nothing survives the
// process; Append can be made to fail to exercise error paths.
package memstore

import (
	"context"
	"sync"

	"github.com/cohort-dev/cohort/store"
)

// Store is an in-memory store.Store.
type Store struct {
	mu sync.Mutex
	// parts holds each partition's latest value per key. A value is
	// overwritten in place when the new one fits its array: a commit of
	// the same offsets again (the common case) allocates nothing.
	parts   map[int32]map[string]*[]byte
	closed  bool
	fail    error
	appends int
}

// New returns an empty in-memory store.
func New() *Store { return &Store{parts: make(map[int32]map[string]*[]byte)} }

// FailWith makes every later Append return err (nil restores success).
func (s *Store) FailWith(err error) {
	s.mu.Lock()
	s.fail = err
	s.mu.Unlock()
}

// Appends reports how many successful Append calls were made.
func (s *Store) Appends() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.appends
}

// Len reports the number of live keys in partition p.
func (s *Store) Len(p int32) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.parts[p])
}

// Append implements store.Store.
func (s *Store) Append(_ context.Context, p int32, recs []store.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	if s.fail != nil {
		return s.fail
	}
	s.apply(p, recs)
	s.appends++
	return nil
}

func (s *Store) apply(p int32, recs []store.Record) {
	m := s.parts[p]
	if m == nil {
		m = make(map[string]*[]byte)
		s.parts[p] = m
	}
	for _, r := range recs {
		if r.Value == nil {
			delete(m, string(r.Key))
			continue
		}
		if v, ok := m[string(r.Key)]; ok {
			*v = append((*v)[:0], r.Value...)
			continue
		}
		v := append([]byte{}, r.Value...)
		m[string(r.Key)] = &v
	}
}

// AppendMulti implements store.MultiAppender: all batches or none.
func (s *Store) AppendMulti(ctx context.Context, batches []store.PartitionRecords) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	if s.fail != nil {
		return s.fail
	}
	for _, b := range batches {
		s.apply(b.Partition, b.Records)
	}
	s.appends++
	return nil
}

// Load implements store.Store.
func (s *Store) Load(_ context.Context, p int32, fn func(store.Record) error) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return store.ErrClosed
	}
	// Copied under the lock into one buffer: values are overwritten in
	// place by later appends, which may run while fn does.
	m := s.parts[p]
	size := 0
	for k, v := range m {
		size += len(k) + len(*v)
	}
	buf := make([]byte, 0, size)
	recs := make([]store.Record, 0, len(m))
	for k, v := range m {
		buf = append(buf, k...)
		key := buf[len(buf)-len(k) : len(buf) : len(buf)]
		buf = append(buf, *v...)
		recs = append(recs, store.Record{Key: key, Value: buf[len(buf)-len(*v) : len(buf) : len(buf)]})
	}
	s.mu.Unlock()
	for _, r := range recs {
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

// Close implements store.Store.
func (s *Store) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return nil
}
