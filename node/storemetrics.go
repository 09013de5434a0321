package node

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cohort-dev/cohort/store"
)

// storeMetrics times the coordinator's writes and loads at the boundary
// between the coordinator and its store, whichever store it is (embedded,
// etcd, memory).
type storeMetrics struct {
	append, multi prometheus.Observer // until durable, by operation
	sync          prometheus.Observer // pipelined stores: ordered to durable
	load          prometheus.Observer
	errors        prometheus.Counter
}

func newStoreMetrics(reg prometheus.Registerer) *storeMetrics {
	dur := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "cohort", Subsystem: "store", Name: "append_duration_seconds",
		Help:    "Time from handing records to the store to their being durable, by operation (append: one partition; append_multi: one group-commit round of several partitions).",
		Buckets: storeBuckets,
	}, []string{"op"})
	sync := prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "cohort", Subsystem: "store", Name: "sync_duration_seconds",
		Help:    "Pipelined stores (the embedded store): time from a round's records being ordered in the log to their being synced to disk.",
		Buckets: storeBuckets,
	})
	load := prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "cohort", Subsystem: "store", Name: "load_duration_seconds",
		Help:    "Time to read one coordinator partition's state from the store.",
		Buckets: prometheus.ExponentialBuckets(1e-3, 4, 10),
	})
	errs := prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "cohort", Subsystem: "store", Name: "append_errors_total",
		Help: "Appends the store failed (clients were answered a retriable error).",
	})
	reg.MustRegister(dur, sync, load, errs)
	return &storeMetrics{append: dur.WithLabelValues("append"), multi: dur.WithLabelValues("append_multi"),
		sync: sync, load: load, errors: errs}
}

// storeBuckets resolve an in-memory append (µs), an fsync (ms) and a slow
// etcd transaction (s).
var storeBuckets = []float64{10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6,
	1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

func (m *storeMetrics) done(o prometheus.Observer, start time.Time, err error) {
	o.Observe(time.Since(start).Seconds())
	if err != nil {
		m.errors.Inc()
	}
}

// meteredStore wraps a store with storeMetrics, keeping the optional
// interfaces (store.MultiAppender, store.Pipeliner, store.OwnerTokens) the
// wrapped store has.
type meteredStore struct {
	store.Store
	m *storeMetrics
}

func (s meteredStore) Append(ctx context.Context, p int32, recs []store.Record) error {
	start := time.Now()
	err := s.Store.Append(ctx, p, recs)
	s.m.done(s.m.append, start, err)
	return err
}

func (s meteredStore) Load(ctx context.Context, p int32, fn func(store.Record) error) error {
	start := time.Now()
	err := s.Store.Load(ctx, p, fn)
	if err == nil {
		s.m.load.Observe(time.Since(start).Seconds())
	}
	return err
}

// OwnerToken passes store.OwnerTokens through (0 for a store without it),
// so that the coordinator's batches carry the ownership they were made
// under.
func (s meteredStore) OwnerToken(p int32) int64 {
	if ot, ok := s.Store.(store.OwnerTokens); ok {
		return ot.OwnerToken(p)
	}
	return 0
}

// AppendOwned passes store.OwnerTokens through, timed as Append.
func (s meteredStore) AppendOwned(ctx context.Context, p int32, owner int64, recs []store.Record) error {
	ot, ok := s.Store.(store.OwnerTokens)
	if !ok {
		return s.Append(ctx, p, recs)
	}
	start := time.Now()
	err := ot.AppendOwned(ctx, p, owner, recs)
	s.m.done(s.m.append, start, err)
	return err
}

type meteredMulti struct {
	meteredStore
	ma store.MultiAppender
}

func (s meteredMulti) AppendMulti(ctx context.Context, b []store.PartitionRecords) error {
	start := time.Now()
	err := s.ma.AppendMulti(ctx, b)
	s.m.done(s.m.multi, start, err)
	return err
}

type meteredPipe struct {
	meteredMulti
	pl store.Pipeliner
}

func (s meteredPipe) StartMulti(ctx context.Context, b []store.PartitionRecords) (func() error, error) {
	start := time.Now()
	wait, err := s.pl.StartMulti(ctx, b)
	if err != nil {
		s.m.done(s.m.multi, start, err)
		return nil, err
	}
	ordered := time.Now()
	return func() error {
		err := wait()
		s.m.sync.Observe(time.Since(ordered).Seconds())
		s.m.done(s.m.multi, start, err)
		return err
	}, nil
}

// meter wraps st with m (st itself when m is nil).
func (m *storeMetrics) meter(st store.Store) store.Store {
	if m == nil {
		return st
	}
	base := meteredStore{st, m}
	ma, ok := st.(store.MultiAppender)
	if !ok {
		return base
	}
	multi := meteredMulti{base, ma}
	if pl, ok := st.(store.Pipeliner); ok {
		return meteredPipe{multi, pl}
	}
	return multi
}
