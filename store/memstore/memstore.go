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
	mu      sync.Mutex
	parts   map[int32]map[string][]byte
	closed  bool
	fail    error
	appends int
}

// New returns an empty in-memory store.
func New() *Store { return &Store{parts: make(map[int32]map[string][]byte)} }

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
		m = make(map[string][]byte)
		s.parts[p] = m
	}
	for _, r := range recs {
		if r.Value == nil {
			delete(m, string(r.Key))
			continue
		}
		m[string(r.Key)] = append([]byte(nil), r.Value...)
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
	recs := make([]store.Record, 0, len(s.parts[p]))
	for k, v := range s.parts[p] {
		recs = append(recs, store.Record{Key: []byte(k), Value: v})
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
