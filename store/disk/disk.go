package disk

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"syscall"

	crerrors "github.com/cockroachdb/errors"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cohort-dev/cohort/store"
)

// ErrStorage marks errors caused by the storage itself (an I/O error, a full
// disk, damaged files) rather than by the caller or by Close. Every such error
// returned by the Store wraps it; test with errors.Is(err, disk.ErrStorage).
var ErrStorage = errors.New("disk: storage failure")

// ErrNotStore is wrapped by Open when Dir holds files but is not a store.
var ErrNotStore = errors.New("disk: not a cohort store")

// ErrLocked is wrapped by Open when another process (or another Store in
// this process) has the directory open.
var ErrLocked = errors.New("disk: store directory is locked")

// ErrNotWritable is wrapped by Open when this process may not write in the
// directory (its permissions, or a read-only file system).
var ErrNotWritable = errors.New("disk: store directory is not writable")

// lockError explains why the lock file could not be taken. Creating the file
// fails with a *fs.PathError (permissions, a read-only file system, an I/O
// error); only a refused lock on a file that opened means another process
// (or another Store of this one) holds it.
func lockError(lockFile string, err error) error {
	var pe *fs.PathError
	switch {
	case errors.As(err, &pe) && notWritable(err):
		return fmt.Errorf("%w: %v: this process needs write access to the directory "+
			"(check its owner and permissions, and that the file system is not read-only)", ErrNotWritable, err)
	case errors.As(err, &pe):
		return fmt.Errorf("%w: %v", ErrStorage, err)
	}
	return fmt.Errorf("%w: %s: %v: another cohort process is using this store; "+
		"stop it, or give this process another directory", ErrLocked, lockFile, err)
}

// notWritable reports whether err means that writing is not allowed.
func notWritable(err error) bool {
	return errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS)
}

// Options configures Open.
type Options struct {
	// Dir is the store's directory. It is created if missing. A directory
	// that already holds files must be a store created by Open.
	Dir string

	// NoSync acknowledges Appends before they reach the disk. A crash of the
	// machine loses them. For benchmarks (it measures the ceiling without
	// fsync) and tests only; never in production.
	NoSync bool

	// Logger receives the engine's log lines and storage failures. nil
	// means slog.Default().
	Logger *slog.Logger

	// CacheSize is the block cache size in bytes; 0 means 32 MiB.
	CacheSize int64

	// fs replaces the OS filesystem (tests: crash and fault injection).
	fs vfs.FS
	// memTableSize overrides the memtable size (tests: force flushes).
	memTableSize uint64
	// noWALFill turns walFillFS off (benchmarks: its peer).
	noWALFill bool
}

const (
	markerName    = "COHORT-STORE"
	markerContent = "cohort store, format 1 (pebble)\n"
	// adviceDamaged is the operator's way out of a store that cannot be read.
	adviceDamaged = "restore the directory from a backup, or move it aside to start empty " +
		"(the groups' committed offsets and metadata stored in it are then lost)"
)

// Store is the embedded durable store.Store. It is safe for concurrent use.
type Store struct {
	db   *pebble.DB
	lock *pebble.Lock
	fs   *failStopFS
	dir  string
	log  *slog.Logger
	wo   *pebble.WriteOptions

	mu       sync.RWMutex // guards closed and inflight.Add
	closed   bool
	inflight sync.WaitGroup // pebble calls under way
	work     chan *job      // unbuffered: hands a call to an idle worker
	stop     chan struct{}  // closed by Close: idle workers exit

	failOnce sync.Once
	failed   chan struct{} // closed when failErr is set
	failErr  error
}

var (
	_ store.Store         = (*Store)(nil)
	_ store.MultiAppender = (*Store)(nil)
	_ store.Pipeliner     = (*Store)(nil)
)

// Open opens the store in opts.Dir, creating it if the directory is missing
// or empty. It fails with a clear error (wrapping ErrNotStore, ErrLocked or
// ErrStorage) rather than starting empty when the directory holds something
// else, is in use, or is damaged.
func Open(opts Options) (*Store, error) {
	if opts.Dir == "" {
		return nil, errors.New("disk: Options.Dir is empty")
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("store", opts.Dir)
	base := opts.fs
	if base == nil {
		base = vfs.Default
	}
	s := &Store{dir: opts.Dir, log: log, failed: make(chan struct{}), work: make(chan *job), stop: make(chan struct{})}
	memTableSize := uint64(32 << 20)
	if opts.memTableSize > 0 {
		memTableSize = opts.memTableSize
	}
	s.wo = pebble.Sync
	wal := base
	if opts.NoSync {
		s.wo = pebble.NoSync
	} else if !opts.noWALFill {
		wal = walFillFS{FS: base, step: int64(min(walFillMax, memTableSize))}
	}
	s.fs = &failStopFS{FS: wal, onFail: s.fail}

	if err := base.MkdirAll(opts.Dir, 0o755); err != nil {
		if notWritable(err) {
			return nil, fmt.Errorf("%w: create directory %s: %v", ErrNotWritable, opts.Dir, err)
		}
		return nil, fmt.Errorf("%w: create directory %s: %v", ErrStorage, opts.Dir, err)
	}
	lock, err := pebble.LockDirectory(opts.Dir, base)
	if err != nil {
		return nil, lockError(base.PathJoin(opts.Dir, "LOCK"), err)
	}
	s.lock = lock
	exists, err := s.prepareDir(base)
	if err != nil {
		_ = lock.Close()
		return nil, err
	}

	cacheSize := opts.CacheSize
	if cacheSize <= 0 {
		cacheSize = 32 << 20
	}
	cache := pebble.NewCache(cacheSize)
	defer cache.Unref()
	po := &pebble.Options{
		FS:                 s.fs,
		Lock:               lock,
		Cache:              cache,
		ErrorIfNotExists:   exists,
		FormatMajorVersion: pebble.FormatNewest,
		Logger:             pebbleLogger{log: log, onFail: s.fail},
		EventListener: &pebble.EventListener{
			BackgroundError: func(err error) { log.Warn("store background error (retried)", "err", err) },
			DiskSlow: func(info pebble.DiskSlowInfo) {
				log.Warn("store disk slow", "file", info.Path, "op", info.OpType.String(), "duration", info.Duration)
			},
			WriteStallBegin: func(info pebble.WriteStallBeginInfo) { log.Warn("store write stall", "reason", info.Reason) },
			// pebble's default for this event is Fatalf. The reader that hit
			// the damage gets an error naming the file (see explain).
			DataCorruption: func(info pebble.DataCorruptionInfo) {
				log.Error("store file damaged", "file", info.Path, "err", info.Details)
			},
		},
	}
	po.MemTableSize = memTableSize

	// pebble.Open runs in its own goroutine so that a fatal storage failure
	// during recovery (which parks the failing goroutine) still returns.
	type result struct {
		db  *pebble.DB
		err error
	}
	done := make(chan result, 1)
	go func() {
		db, err := pebble.Open(opts.Dir, po)
		done <- result{db, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-s.failed:
		r.err = s.failErr
	}
	if r.err != nil {
		if !errors.Is(r.err, ErrStorage) {
			_ = lock.Close()
		}
		return nil, s.openError(r.err)
	}
	s.db = r.db
	s.fs.armed.Store(true)
	log.Debug("store opened", "created", !exists)
	return s, nil
}

// prepareDir checks that the locked directory is a store (reporting whether
// the engine's files are expected to exist) or empty, in which case it makes
// it one by writing the marker first, so that an interrupted first start is
// recognised on the next Open.
func (s *Store) prepareDir(fs vfs.FS) (exists bool, err error) {
	names, err := fs.List(s.dir)
	if err != nil {
		return false, fmt.Errorf("%w: list %s: %v", ErrStorage, s.dir, err)
	}
	others := slices.DeleteFunc(names, func(n string) bool {
		return n == "LOCK" || n == markerName || n == markerName+".tmp"
	})
	slices.Sort(others)
	marker := fs.PathJoin(s.dir, markerName)
	content, err := readFile(fs, marker)
	switch {
	case err == nil && string(content) == markerContent:
		// A store. If the marker is all there is, the first Open was
		// interrupted before the engine wrote anything: create it now.
		return len(others) > 0, nil
	case err == nil:
		return false, fmt.Errorf("%w: %s has unexpected contents %.40q; it was written by another program "+
			"or another format version: %s", ErrStorage, marker, content, adviceDamaged)
	case len(others) > 0:
		hint := ""
		if slices.ContainsFunc(others, func(n string) bool { return strings.HasPrefix(n, "MANIFEST-") }) {
			hint = " (the files look like a pebble database created by another program)"
		}
		return false, fmt.Errorf("%w: %s has no %s file but contains %d other files, e.g. %q%s: "+
			"point Options.Dir at an empty or missing directory, or move the contents aside",
			ErrNotStore, s.dir, markerName, len(others), others[0], hint)
	}
	if err := writeFileDurably(fs, s.dir, markerName, []byte(markerContent)); err != nil {
		return false, fmt.Errorf("%w: write %s: %v", ErrStorage, marker, err)
	}
	return false, nil
}

func readFile(fs vfs.FS, name string) ([]byte, error) {
	f, err := fs.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 4096))
}

// writeFileDurably writes name in dir through a synced temporary file and a
// synced rename, so that it is either absent or complete after a crash.
func writeFileDurably(fs vfs.FS, dir, name string, data []byte) error {
	tmp := fs.PathJoin(dir, name+".tmp")
	f, err := fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := fs.Rename(tmp, fs.PathJoin(dir, name)); err != nil {
		return err
	}
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// openError explains an engine Open failure to the operator.
func (s *Store) openError(err error) error {
	if errors.Is(err, ErrStorage) {
		return err
	}
	what := "cannot be opened"
	if errors.Is(err, pebble.ErrCorruption) {
		what = "is damaged"
	} else if strings.Contains(err.Error(), "does not exist") {
		what = "is missing its MANIFEST/CURRENT files (they were deleted or the directory is incomplete)"
	}
	return fmt.Errorf("%w: store %s %s: %s: %s", ErrStorage, s.dir, what, explain(err), adviceDamaged)
}

// explain renders an engine error with the details pebble keeps out of its
// message, such as which file (path or WAL number) and offset it was reading.
func explain(err error) string {
	// Drop the placeholder text of pebble's corruption-detail carrier.
	msg := strings.ReplaceAll(err.Error(), "\n<corruption detail carrier>", "")
	if info := pebble.ExtractDataCorruptionInfo(err); info != nil && !strings.Contains(msg, info.Path) {
		msg += " (file " + info.Path + ")"
	}
	for _, d := range append(crerrors.GetAllHints(err), crerrors.GetAllDetails(err)...) {
		if !strings.Contains(msg, d) {
			msg += " (" + d + ")"
		}
	}
	return msg
}

// fail latches the first storage failure: from then on every operation
// returns ErrStorage until the process reopens the store.
func (s *Store) fail(err error) {
	s.failOnce.Do(func() {
		s.failErr = fmt.Errorf("%w: %v (the store refuses all operations until the process restarts; "+
			"acknowledged data is on disk and is recovered on the next Open)", ErrStorage, err)
		s.log.Error("store failed", "err", err)
		close(s.failed)
	})
}

// Failed is closed when the store has failed (fail-stop, see failStopFS):
// every operation returns ErrStorage from then on, until the process opens
// the store again. A server watches it to stop instead of refusing every
// write for as long as it runs (node does).
func (s *Store) Failed() <-chan struct{} { return s.failed }

// Err returns the failure that closed Failed (wrapping ErrStorage), or nil.
func (s *Store) Err() error {
	select {
	case <-s.failed:
		return s.failErr
	default:
		return nil
	}
}

// enter registers an operation, failing if the store is closed or failed.
func (s *Store) enter() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return store.ErrClosed
	}
	select {
	case <-s.failed:
		return s.failErr
	default:
	}
	s.inflight.Add(1)
	return nil
}

// partitionKey returns the 4-byte big-endian prefix of partition p's keys.
func partitionKey(dst []byte, p int32) []byte {
	return binary.BigEndian.AppendUint32(dst, uint32(p))
}

// partitionBounds returns the key range [lo, hi) of partition p; hi is nil
// for the last partition prefix.
func partitionBounds(p int32) (lo, hi []byte) {
	lo = partitionKey(nil, p)
	if uint32(p) != ^uint32(0) {
		hi = partitionKey(nil, int32(uint32(p)+1))
	}
	return lo, hi
}

// Append implements store.Store. Concurrent Appends (from any partitions)
// share WAL fsyncs: pebble's commit pipeline writes every batch that arrives
// while a sync is under way and covers them all with the next sync. Append
// returns nil only after the sync that covers its batch (unless NoSync).
// If ctx ends first, Append returns ctx.Err() and the records may or may not
// be durable.
func (s *Store) Append(ctx context.Context, p int32, recs []store.Record) error {
	return s.AppendMulti(ctx, []store.PartitionRecords{{Partition: p, Records: recs}})
}

// AppendMulti implements store.MultiAppender: the records of all batches go
// into one pebble batch, so they are durable together (one WAL write and
// fsync) and atomically: after a crash all of them or none are there.
func (s *Store) AppendMulti(ctx context.Context, batches []store.PartitionRecords) error {
	if err := s.enter(); err != nil {
		return err
	}
	b, err := s.batch(batches)
	if b == nil || err != nil {
		s.inflight.Done()
		return err
	}
	if err := ctx.Err(); err != nil {
		s.inflight.Done()
		_ = b.Close()
		return err
	}
	err = s.run(ctx, func() error {
		defer b.Close()
		return s.db.Apply(b, s.wo)
	})
	return s.appendError(ctx, err)
}

// StartMulti implements store.Pipeliner: the batch enters pebble's commit
// pipeline (its place in the WAL and its sequence numbers are fixed, in call
// order) and StartMulti returns; wait then blocks for the WAL sync that
// covers it. Pebble syncs whatever was written during one sync with the
// next, so a caller that starts its next round while the previous one syncs
// keeps the disk busy without waiting in between.
func (s *Store) StartMulti(ctx context.Context, batches []store.PartitionRecords) (func() error, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	b, err := s.batch(batches)
	if b == nil || err != nil {
		s.inflight.Done()
		if err != nil {
			return nil, err
		}
		return func() error { return nil }, nil
	}
	if s.wo != pebble.Sync { // NoSync: nothing to wait for
		err := s.run(ctx, func() error {
			defer b.Close()
			return s.db.Apply(b, s.wo)
		})
		if err != nil {
			return nil, s.appendError(ctx, err)
		}
		return func() error { return nil }, nil
	}
	if err := s.run(ctx, func() error { return s.db.ApplyNoSyncWait(b, s.wo) }); err != nil {
		// The batch may still be in pebble's hands (the store failed or
		// ctx ended); it is not closed so that pebble never sees it freed.
		return nil, s.appendError(ctx, err)
	}
	return func() error {
		if err := s.enter(); err != nil {
			return err
		}
		return s.appendError(ctx, s.run(ctx, func() error {
			err := b.SyncWait()
			if err == nil {
				_ = b.Close()
			}
			return err
		}))
	}, nil
}

// batch builds one pebble batch of every record in batches; nil if there
// are none.
func (s *Store) batch(batches []store.PartitionRecords) (*pebble.Batch, error) {
	size, n := 0, 0
	for _, pr := range batches {
		for _, r := range pr.Records {
			size += 4 + len(r.Key) + len(r.Value) + 16
			n++
		}
	}
	if n == 0 {
		return nil, nil
	}
	b := s.db.NewBatchWithSize(size)
	var key []byte
	for _, pr := range batches {
		for _, r := range pr.Records {
			key = append(partitionKey(key[:0], pr.Partition), r.Key...)
			var err error
			if r.Value == nil {
				err = b.Delete(key, nil)
			} else {
				err = b.Set(key, r.Value, nil)
			}
			if err != nil {
				_ = b.Close()
				return nil, fmt.Errorf("disk: append to partition %d: %w", pr.Partition, err)
			}
		}
	}
	return b, nil
}

// appendError marks an engine failure of a write as ErrStorage.
func (s *Store) appendError(ctx context.Context, err error) error {
	if err != nil && !errors.Is(err, ErrStorage) && ctx.Err() == nil {
		err = fmt.Errorf("%w: append: %v", ErrStorage, err)
	}
	return err
}

// run calls f, which must be the body of an operation registered with enter,
// on a worker goroutine, so that the caller gets an answer even when the
// store fails (the failing pebble goroutine is parked and f may never
// finish) or ctx ends. In both cases f keeps running and the operation stays
// registered until it finishes.
//
// Workers are reused rather than started per call: a fresh goroutine grows
// its stack through pebble's deep commit path on every Append, which cost
// about half the throughput at high concurrency (see BenchmarkAppend).
// There are as many workers as the most concurrent calls seen so far; they
// exit at Close.
func (s *Store) run(ctx context.Context, f func() error) error {
	j := &job{f: f, done: make(chan error, 1)}
	select {
	case s.work <- j: // an idle worker took it
	default:
		go s.worker(j)
	}
	select {
	case err := <-j.done:
		return err
	case <-s.failed:
		return s.failErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// job is one call handed to a worker.
type job struct {
	f    func() error
	done chan error // buffered: the worker never waits for the caller
}

func (s *Store) worker(j *job) {
	for {
		j.done <- j.f()
		s.inflight.Done()
		select {
		case j = <-s.work:
		case <-s.stop:
			return
		}
	}
}

// Load implements store.Store with one scan of partition p's key prefix.
// It may report records of an Append to p that has not returned yet.
func (s *Store) Load(ctx context.Context, p int32, fn func(store.Record) error) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.inflight.Done()
	lo, hi := partitionBounds(p)
	it, err := s.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return s.loadError(p, err)
	}
	n := 0
	for valid := it.First(); valid; valid = it.Next() {
		if n++; n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				_ = it.Close()
				return err
			}
		}
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return s.loadError(p, err)
		}
		if v == nil {
			v = []byte{} // a live key with an empty value, not a tombstone
		}
		if err := fn(store.Record{Key: it.Key()[4:], Value: v}); err != nil {
			_ = it.Close()
			return err
		}
	}
	if err := it.Close(); err != nil {
		return s.loadError(p, err)
	}
	select {
	case <-s.failed:
		// What was read may include writes that were never acknowledged.
		return s.failErr
	default:
	}
	return nil
}

func (s *Store) loadError(p int32, err error) error {
	what := "cannot be read"
	if errors.Is(err, pebble.ErrCorruption) {
		what = "is damaged"
	}
	return fmt.Errorf("%w: load partition %d: store %s %s: %s: %s", ErrStorage, p, s.dir, what, explain(err), adviceDamaged)
}

// Compact rewrites the whole store so that overwritten values and tombstoned
// keys are dropped from disk now. The engine also does this on its own as
// data accumulates; Compact is for tests, benchmarks and operators who want
// the space back at once. It blocks until done or ctx ends.
func (s *Store) Compact(ctx context.Context) error {
	if err := s.enter(); err != nil {
		return err
	}
	err := s.run(ctx, func() error {
		if err := s.db.Flush(); err != nil {
			return err
		}
		it, err := s.db.NewIter(nil)
		if err != nil {
			return err
		}
		var lo, hi []byte
		if it.First() {
			lo = slices.Clone(it.Key())
		}
		if it.Last() {
			hi = append(slices.Clone(it.Key()), 0)
		}
		if err := it.Close(); err != nil {
			return err
		}
		if lo == nil {
			return nil
		}
		return s.db.Compact(ctx, lo, hi, true)
	})
	if err != nil && !errors.Is(err, ErrStorage) && ctx.Err() == nil {
		err = fmt.Errorf("%w: compact %s: %v", ErrStorage, s.dir, err)
	}
	return err
}

// Close implements store.Store. It waits for operations under way, then
// closes the engine and releases the directory lock. A failed store is not
// closed cleanly (its engine is wedged); Close returns the failure and the
// lock is released when the process exits.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()

	// Wait for the operations under way, flush the memtable (so that the
	// next Open has no WAL to replay and, after a clean shutdown, no data is
	// held only by the WAL), then close the engine. Each step may never
	// finish if the store fails.
	done := make(chan error, 1)
	go func() {
		s.inflight.Wait()
		close(s.stop)
		err := s.db.Flush()
		if cerr := s.db.Close(); err == nil {
			err = cerr
		}
		if lerr := s.lock.Close(); err == nil {
			err = lerr
		}
		done <- err
	}()
	select {
	case err := <-done:
		select {
		case <-s.failed:
			return s.failErr
		default:
		}
		if err != nil {
			return fmt.Errorf("%w: close %s: %v", ErrStorage, s.dir, err)
		}
		return nil
	case <-s.failed:
		return s.failErr
	}
}
