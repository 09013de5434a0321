package disk

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	crerrors "github.com/cockroachdb/errors"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cohort-dev/cohort/internal/shellarg"
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

	// MaxRecordBytes is the largest record (key and value) the coordinator
	// hands the store (store.RecordLimiter); 0 means DefaultMaxRecordBytes,
	// negative no limit.
	MaxRecordBytes int

	// fs replaces the OS filesystem (tests: crash and fault injection).
	fs vfs.FS
	// memTableSize overrides the memtable size (tests: force flushes).
	memTableSize uint64
	// noWALFill turns walFillFS off (benchmarks: its peer).
	noWALFill bool
	// foldAt overrides the log size that starts a fold (tests).
	foldAt int
}

// DefaultMaxRecordBytes bounds a record on disk. The only record that grows
// with its clients' input is a classic group's metadata (every member's
// protocols and assignment, written at each SyncGroup): without a bound, six
// members joining with 40 MB of metadata each wrote a 240 MB record, took a
// node to 2.4 GB and made its restart ten times slower. Kafka bounds the same
// record at its offsets topic's message size (1 MiB by default) and answers
// UNKNOWN_SERVER_ERROR; cohort does the same over 16 MiB, room for a group of
// 10,000 members or 2,000 members sharing a million partitions.
const DefaultMaxRecordBytes = 16 << 20

const (
	markerName    = "COHORT-STORE"
	markerContent = "cohort store, format 2 (pebble, record log)\n"
	// markerFormat1 marks a store written before the record log: the same
	// layout without log entries. Open upgrades its marker, so that an older
	// cohort (which would ignore the log) refuses the store.
	markerFormat1 = "cohort store, format 1 (pebble)\n"
	// foldAtMax is the size of the record log that starts a fold.
	foldAtMax = 4 << 20
	// tableBlockSize is the target size of the engine's table blocks.
	tableBlockSize = 32 << 10
	// adviceDamaged is the operator's way out of a store that cannot be read.
	adviceDamaged = "restore the directory from a backup (cohort serve --backup-dir, then SIGUSR1, writes one), or move it aside to start empty " +
		"(the groups' committed offsets and metadata stored in it are then lost)"
)

// Store is the embedded durable store.Store. It is safe for concurrent use.
type Store struct {
	db   *pebble.DB
	lock *pebble.Lock
	fs   *failStopFS
	base vfs.FS // the file system under fs's wrappers
	dir  string
	log  *slog.Logger
	wo   *pebble.WriteOptions

	maxRecord int // MaxRecordBytes; negative: none

	mu       sync.RWMutex // guards closed and inflight.Add
	closed   bool
	inflight sync.WaitGroup // pebble calls under way, and Open's prefetch
	work     chan *job      // unbuffered: hands a call to an idle worker
	stop     chan struct{}  // closed by Close: idle workers exit

	// The record log (log.go). seqMu orders the log: an entry's sequence
	// number is fixed and the entry enters the engine's commit pipeline
	// under it, so entries are in the engine in sequence order.
	seqMu    sync.Mutex
	seq      uint64 // the next entry's sequence number
	pending  int    // bytes logged since the last fold started
	foldAt   int
	folding  bool          // a background fold is under way
	foldDone chan struct{} // closed when it ends
	foldMu   sync.Mutex    // one fold at a time
	// foldKeys is, per partition, how many distinct keys the last fold
	// found: the next fold sizes its maps with it (under foldMu).
	foldKeys map[int32]int
	folded   atomic.Uint64 // entries below it are folded (and deleted)

	failOnce sync.Once
	failed   chan struct{} // closed when failErr is set
	failErr  error
}

// MaxRecordBytes is the largest record the store is handed (Options.
// MaxRecordBytes; 0: no limit), for store.RecordLimiter.
func (s *Store) MaxRecordBytes() int { return max(s.maxRecord, 0) }

var (
	_ store.RecordLimiter = (*Store)(nil)
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
	s := &Store{dir: opts.Dir, log: log, failed: make(chan struct{}), work: make(chan *job), stop: make(chan struct{}),
		maxRecord: opts.MaxRecordBytes}
	if s.maxRecord == 0 {
		s.maxRecord = DefaultMaxRecordBytes
	}
	memTableSize := uint64(32 << 20)
	if opts.memTableSize > 0 {
		memTableSize = opts.memTableSize
	}
	s.foldAt = min(foldAtMax, int(memTableSize/4))
	if opts.foldAt > 0 {
		s.foldAt = opts.foldAt
	}
	s.wo = pebble.Sync
	wal := base
	if opts.NoSync {
		s.wo = pebble.NoSync
	} else if !opts.noWALFill {
		wal = walFillFS{FS: base, step: int64(min(walFillMax, memTableSize)), dir: filepath.Clean(opts.Dir)}
	}
	s.fs = &failStopFS{FS: wal, dir: filepath.Clean(opts.Dir), onFail: s.failRefusedWrite}
	s.base = base

	// Private: the store holds SCRAM credentials (salted keys) and the
	// secret behind unknown users' fake ones. An existing directory keeps
	// the mode the operator gave it.
	if err := base.MkdirAll(opts.Dir, 0o700); err != nil {
		if notWritable(err) {
			return nil, fmt.Errorf("%w: create directory %s: %v", ErrNotWritable, opts.Dir, err)
		}
		return nil, fmt.Errorf("%w: create directory %s: %v", ErrStorage, opts.Dir, err)
	}
	lockFile := base.PathJoin(opts.Dir, "LOCK")
	_, statErr := base.Stat(lockFile)
	lock, err := pebble.LockDirectory(opts.Dir, base)
	if err != nil {
		return nil, lockError(lockFile, err)
	}
	s.lock = lock
	exists, err := s.prepareDir(base)
	if err != nil {
		if errors.Is(err, ErrNotStore) && errors.Is(statErr, os.ErrNotExist) {
			// Not a store: leave the directory as it was, without
			// the lock file this Open created. Removed while still
			// locked: once let go, another process could lock the
			// file about to be unlinked, and a third a new one.
			_ = base.Remove(lockFile)
		}
		_ = lock.Close()
		return nil, err
	}
	if exists && base == vfs.Default {
		// Close waits for it (inflight), so it never touches the
		// directory of a closed store.
		s.inflight.Add(1)
		go func() {
			defer s.inflight.Done()
			prefetchTables(opts.Dir)
		}()
	}

	bgWarn := &rateLimited{log: log, msg: "store background error (retried)", every: 10 * time.Second}
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
			BackgroundError: func(err error) {
				if !s.fs.armed.Load() && (writeFailure(err) || s.fs.refused() != nil) {
					// During Open (the recovered log's flush, the fold):
					// pebble retries a failed table write for ever, so an
					// Open on a disk that is still full neither served
					// nor returned, burning a core. Fail it instead: the
					// operator (or supervisor) gets an error and a restart.
					// Any refused write counts, whatever its error number
					// (a file over RLIMIT_FSIZE fails with EFBIG, a file
					// not writable with EACCES). Other background errors
					// (a table's statistics, the disk usage, damage, which
					// the read that meets it reports with the way out)
					// stay warnings.
					s.fail(fmt.Errorf("writing while opening the store: %w", err))
					return
				}
				bgWarn.warn(err)
			},
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
	// Larger table blocks than pebble's 4 KiB: the store is read by
	// scanning (a partition's load, the fold), never by point lookups, and
	// each block read costs a system call, a cache allocation and a
	// checksum whatever its size. Loading 10M offsets after a restart took
	// a third less CPU with 32 KiB blocks (docs/benchmarks.md, "Load after
	// restart"); 64 KiB measured no better.
	po.Levels[0].BlockSize = tableBlockSize // the other levels inherit it
	// No read sampling: pebble samples iterator reads to schedule
	// compactions of key ranges that are read often, but this store is only
	// ever read by whole-partition scans (a load) and by the fold, once each,
	// so the sampling was pure cost: about 2% of a load's CPU in a profile.
	po.Experimental.ReadSamplingMultiplier = -1

	// pebble.Open runs in its own goroutine so that a fatal storage failure
	// during recovery (which parks the failing goroutine) still returns.
	type result struct {
		db  *pebble.DB
		err error
	}
	done := make(chan result, 1)
	go func() {
		db, err := pebble.Open(opts.Dir, po)
		if err == nil {
			// Fold what a crash left in the record log now, once, rather
			// than in every partition's Load (each would read the tail).
			s.db = db
			if err = s.openLog(); err == nil {
				err = s.fold()
			}
			if err == nil && s.wo == pebble.Sync {
				// The fold is written to the WAL without waiting for it;
				// wait now, while a refused write is still an error of
				// the Open: a refusal the engine met in the background
				// would otherwise stay in its WAL writer, failing every
				// Append without failing the store.
				err = db.LogData(nil, pebble.Sync)
			}
			if refused := s.fs.refused(); refused != nil && err == nil {
				err = refused
			}
			if err != nil && s.fs.refused() == nil {
				_ = db.Close()
				db = nil
			} else if err != nil {
				// Not closed: the engine panics closing a WAL whose
				// write failed. The process exits on this error.
				db = nil
			}
		}
		done <- result{db, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-s.failed:
		select {
		case r = <-done: // the Open's own outcome, when it has one
		default:
			r.err = s.failErr
		}
	}
	if r.err != nil {
		// A failed store keeps the lock: its engine is wedged, not closed.
		if !errors.Is(r.err, ErrStorage) && s.fs.refused() == nil {
			_ = lock.Close()
		}
		return nil, s.openError(r.err, base)
	}
	s.db = r.db
	s.fs.armed.Store(true)
	log.Debug("store opened", "created", !exists)
	return s, nil
}

// writeFailure reports whether a background error of the engine is the
// disk refusing a write (full, over quota, a file over the size limit,
// read-only, an I/O error), which its retries cannot get past. The store's
// own files are covered whatever the error (failStopFS.refused); this
// catches the errors of files the engine writes around it.
func writeFailure(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) ||
		errors.Is(err, syscall.EFBIG) || errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.EIO)
}

// rateLimited logs a warning at most once per interval, counting the ones
// it leaves out: pebble reports every retry of a failing background write,
// thousands a second on a full disk.
type rateLimited struct {
	log     *slog.Logger
	msg     string
	every   time.Duration
	mu      sync.Mutex
	last    time.Time
	skipped int
}

func (r *rateLimited) warn(err error) {
	r.mu.Lock()
	now := time.Now()
	if !r.last.IsZero() && now.Sub(r.last) < r.every {
		r.skipped++
		r.mu.Unlock()
		return
	}
	skipped := r.skipped
	r.last, r.skipped = now, 0
	r.mu.Unlock()
	r.log.Warn(r.msg, "err", err, "unlogged_before", skipped)
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
	case err == nil && string(content) == markerFormat1:
		if err := writeFileDurably(fs, s.dir, markerName, []byte(markerContent)); err != nil {
			return false, fmt.Errorf("%w: upgrade %s: %v", ErrStorage, marker, err)
		}
		return len(others) > 0, nil
	case err == nil:
		return false, fmt.Errorf("%w: %s has unexpected contents %.40q; it was written by another program "+
			"or another format version: %s", ErrStorage, marker, content, adviceDamaged)
	case len(others) > 0:
		if stores := storesIn(fs, s.dir, others); len(stores) > 0 {
			// The --backup-dir, say, given as the data directory:
			// its backups are stores, restored by copying one.
			return false, fmt.Errorf("%w: %s has no %s file: it is not a store, but holds stores in %d of its subdirectories, e.g. %q "+
				"(as the --backup-dir of cohort serve holds its backups): to restore one, copy it (cp -a %s NEWDIR) and "+
				"start cohort with --data-dir NEWDIR, not on the backup itself, which a node writes to when it opens it",
				ErrNotStore, s.dir, markerName, len(stores), stores[0], shellarg.Arg(fs.PathJoin(s.dir, stores[0])))
		}
		hint := ""
		if slices.ContainsFunc(others, enginesFile) {
			// A backup (Checkpoint) writes its marker last: one cut
			// short at any point is the engine's files alone.
			hint = " (the files look like a pebble database without cohort's marker: a cohort backup cut short " +
				"before its marker was written, which is incomplete (take the backup again, or restore an earlier " +
				"one), or a database created by another program)"
		}
		return false, fmt.Errorf("%w: %s has no %s file but contains %d other files, e.g. %q%s: "+
			"point the store (cohort serve --data-dir) at an empty or missing directory, or move the contents aside",
			ErrNotStore, s.dir, markerName, len(others), others[0], hint)
	}
	if err := writeFileDurably(fs, s.dir, markerName, []byte(markerContent)); err != nil {
		return false, fmt.Errorf("%w: write %s: %v", ErrStorage, marker, err)
	}
	return false, nil
}

// storesIn returns those of names, entries of dir, that are directories
// holding a cohort store (a backup written by Checkpoint, say): their marker
// file says so.
func storesIn(fs vfs.FS, dir string, names []string) []string {
	var out []string
	for _, n := range names {
		c, err := readFile(fs, fs.PathJoin(dir, n, markerName))
		if err == nil && (string(c) == markerContent || string(c) == markerFormat1) {
			out = append(out, n)
		}
	}
	return out
}

// enginesFile reports whether name is one the engine writes in a store's
// directory (and so in a backup's): its MANIFEST, OPTIONS and marker files,
// tables, logs and blob files.
func enginesFile(name string) bool {
	for _, p := range []string{"MANIFEST-", "OPTIONS-", "marker."} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	for _, x := range []string{".sst", ".log", ".blob"} {
		if strings.HasSuffix(name, x) {
			return true
		}
	}
	return false
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
func (s *Store) openError(err error, fs vfs.FS) error {
	if refused := s.fs.refused(); refused != nil && notWritable(refused) {
		return fmt.Errorf("%w: store %s cannot be opened: %v: %s", ErrNotWritable, s.dir, refused, adviceNotWritable)
	} else if refused != nil {
		// The disk refused a write (full, a quota, the file size limit, an
		// I/O error), whichever way the engine reported it (an error of
		// its Open, a fatal error, a background one). That does not damage
		// what the store holds: the way out is to let it write, not the
		// advice for damage, which would drop the store for a full disk.
		return fmt.Errorf("%w: store %s cannot be opened: the disk refused a write (%v): %s", ErrStorage, s.dir, refused,
			adviceRefusedWrite)
	}
	if errors.Is(err, ErrStorage) {
		return err
	}
	what := "cannot be opened"
	switch {
	case errors.Is(err, pebble.ErrCorruption):
		what = "is damaged"
	case strings.Contains(err.Error(), "unknown to the objstorage provider"):
		// The engine's list of tables names one that is not there: the
		// list (the MANIFEST) is damaged, its damage read as its end, so
		// an older list was taken, or tables were deleted.
		what = "is missing tables that " + manifestNames(fs, s.dir) +
			" lists (that file is damaged, or tables were deleted, or the directory is incomplete)"
	case strings.Contains(err.Error(), "does not exist"):
		what = "is missing its MANIFEST/CURRENT files (they were deleted or the directory is incomplete)"
	case strings.Contains(err.Error(), "unknown format major version"):
		// Not damage: a newer cohort (its engine) wrote it, and this one
		// cannot read it. Moving it aside would lose it for nothing.
		return fmt.Errorf("%w: store %s was written by a newer version of cohort (%s): run that version, or restore a "+
			"backup this version wrote; an upgrade raises the store's format, so a downgrade needs such a backup",
			ErrStorage, s.dir, explain(err))
	}
	return fmt.Errorf("%w: store %s %s: %s: %s", ErrStorage, s.dir, what, explain(err), adviceDamaged)
}

// explain renders an engine error with the details pebble keeps out of its
// message, such as which file (path or WAL number) and offset it was reading.
// manifestNames names the engine's MANIFEST files in dir (the list of its
// tables), for an error message; "its MANIFEST" if none can be listed.
func manifestNames(fs vfs.FS, dir string) string {
	names, err := fs.List(dir)
	if err != nil {
		return "its MANIFEST"
	}
	var ms []string
	for _, n := range names {
		if strings.HasPrefix(n, "MANIFEST-") {
			ms = append(ms, n)
		}
	}
	if len(ms) == 0 {
		return "its MANIFEST"
	}
	slices.Sort(ms)
	return strings.Join(ms, ", ")
}

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

// What the operator does about a write the disk refused, at start or while
// serving: nothing the store holds is damaged, so the way out is to let it
// write (the advice for damage would drop the store for a full disk).
const (
	adviceRefusedWrite = "free space on its file system (or raise the quota or file size limit, or mend the disk), " +
		"then start cohort again; nothing the store acknowledged is lost"
	adviceNotWritable = "this process needs write access to the directory and its files (check their owner and " +
		"permissions, and that the file system is not read-only)"
)

// fail latches the first storage failure: from then on every operation
// returns ErrStorage until the process reopens the store.
func (s *Store) fail(err error) {
	s.latch(fmt.Errorf("%w: %v (the store refuses all operations until the process restarts; "+
		"acknowledged data is on disk and is recovered on the next Open)", ErrStorage, err), err)
}

// failRefusedWrite latches a write, sync, creation or rename of the store's
// own files that the disk refused while the store served (failStopFS): as
// fail, but the error, which cohort serve exits with, says what lets the
// next start succeed, as the refusal of a start on that disk does.
func (s *Store) failRefusedWrite(err error) {
	advice := adviceRefusedWrite
	if notWritable(err) {
		advice = adviceNotWritable + ", then start cohort again; nothing the store acknowledged is lost"
	}
	s.latch(fmt.Errorf("%w: store %s: the disk refused a write (%v), so the store refuses all operations until "+
		"cohort is started again: %s", ErrStorage, s.dir, err, advice), err)
}

// failDamaged latches damage found while serving (the record log does not
// read back): as fail, but the next Open refuses the store too, so the
// error gives the operator's way out instead of promising a recovery.
func (s *Store) failDamaged(err error) {
	failErr := fmt.Errorf("%w: store %s is damaged: %s (the store refuses all operations; a restart will refuse it too): %s",
		ErrStorage, s.dir, explain(err), adviceDamaged)
	s.latch(failErr, failErr)
}

// latch makes failErr the store's failure, once.
func (s *Store) latch(failErr, cause error) {
	s.failOnce.Do(func() {
		s.failErr = failErr
		s.log.Error("store failed", "err", cause)
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

// AppendMulti implements store.MultiAppender: the records of all batches are
// one record log entry (one engine key, see log.go), so they are durable
// together (one WAL write and fsync) and atomically: after a crash all of
// them or none are there.
func (s *Store) AppendMulti(ctx context.Context, batches []store.PartitionRecords) error {
	if err := s.enter(); err != nil {
		return err
	}
	e, err := s.entry(batches)
	if e == nil || err != nil {
		s.inflight.Done()
		return err
	}
	if err := ctx.Err(); err != nil {
		s.inflight.Done()
		_ = e.b.Close()
		return err
	}
	err = s.run(ctx, func() error {
		if s.wo != pebble.Sync {
			defer e.b.Close()
			return s.commit(e, s.db.Apply)
		}
		if err := s.commit(e, s.db.ApplyNoSyncWait); err != nil {
			return err // the batch is not closed: it may be in pebble's hands
		}
		err := e.b.SyncWait()
		if err == nil {
			_ = e.b.Close()
		}
		return err
	})
	return s.appendError(ctx, err)
}

// StartMulti implements store.Pipeliner: the entry enters pebble's commit
// pipeline (its place in the WAL and its sequence numbers are fixed, in call
// order) and StartMulti returns; wait then blocks for the WAL sync that
// covers it. Pebble syncs whatever was written during one sync with the
// next, so a caller that starts its next round while the previous one syncs
// keeps the disk busy without waiting in between.
func (s *Store) StartMulti(ctx context.Context, batches []store.PartitionRecords) (func() error, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	e, err := s.entry(batches)
	if e == nil || err != nil {
		s.inflight.Done()
		if err != nil {
			return nil, err
		}
		return func() error { return nil }, nil
	}
	if err := ctx.Err(); err != nil {
		s.inflight.Done()
		_ = e.b.Close()
		return nil, err
	}
	// From here the entry is handed to a worker, which applies it whatever
	// ctx does: waiting for it (bounded: the commit and, at worst, the
	// fold's backpressure) rather than for ctx keeps the promise that a
	// failed StartMulti wrote nothing. Only the store failing ends the wait.
	committing := context.WithoutCancel(ctx)
	if s.wo != pebble.Sync { // NoSync: nothing to wait for
		err := s.run(committing, func() error {
			defer e.b.Close()
			return s.commit(e, s.db.Apply)
		})
		if err != nil {
			return nil, s.appendError(committing, err)
		}
		return func() error { return nil }, nil
	}
	if err := s.run(committing, func() error { return s.commit(e, s.db.ApplyNoSyncWait) }); err != nil {
		// The batch may still be in pebble's hands (the store failed);
		// it is not closed so that pebble never sees it freed.
		return nil, s.appendError(committing, err)
	}
	return func() error {
		if err := s.enter(); err != nil {
			return err
		}
		return s.appendError(ctx, s.run(ctx, func() error {
			err := e.b.SyncWait()
			if err == nil {
				_ = e.b.Close()
			}
			return err
		}))
	}, nil
}

// logEntry is an encoded record log entry in its engine batch, waiting for
// its sequence number.
type logEntry struct {
	b    *pebble.Batch
	op   *pebble.DeferredBatchOp // its Key is filled in by commit
	size int
}

// entry encodes every record in batches as one record log entry in a
// pebble batch; nil if there are none. The entry is encoded in a pooled
// buffer and copied into the batch, whose value must be sized up front.
func (s *Store) entry(batches []store.PartitionRecords) (*logEntry, error) {
	bp := entryBufs.Get().(*[]byte)
	defer entryBufs.Put(bp)
	buf, err := appendEntry((*bp)[:0], batches)
	if cap(buf) <= maxPooledEntry {
		*bp = buf[:0]
	}
	if len(buf) == 0 || err != nil {
		return nil, err
	}
	b := s.db.NewBatchWithSize(logKeyLen + len(buf) + 32)
	op := b.SetDeferred(logKeyLen, len(buf))
	copy(op.Value, buf)
	return &logEntry{b: b, op: op, size: len(buf)}, nil
}

// entryBufs holds the buffers entries are encoded in (*[]byte), at most
// maxPooledEntry bytes each.
var entryBufs = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledEntry = 1 << 20

// commit gives e the next sequence number and applies it with apply
// (Apply, or ApplyNoSyncWait which returns once the entry is in the
// memtable and its WAL write is queued), under seqMu so that the log's
// order is the engine's.
func (s *Store) commit(e *logEntry, apply func(*pebble.Batch, *pebble.WriteOptions) error) error {
	s.seqMu.Lock()
	putLogKey(e.op.Key, s.seq)
	if err := e.op.Finish(); err != nil {
		s.seqMu.Unlock()
		return err
	}
	if err := apply(e.b, s.wo); err != nil {
		s.seqMu.Unlock()
		return err
	}
	s.seq++
	s.pending += e.size
	wait := s.maybeFold()
	s.seqMu.Unlock()
	if wait != nil {
		<-wait // the log outgrew the fold: wait for it (backpressure)
	}
	return nil
}

// openLog finds the record log's first and next sequence numbers.
func (s *Store) openLog() error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: logPrefix, UpperBound: logEnd})
	if err != nil {
		return err
	}
	// Every key in the log's range is one this store wrote (logKey); one
	// of another length is damage the engine's checksums did not catch.
	bad := func() error {
		err := fmt.Errorf("%w: a record log key of %d bytes (want %d): %x", pebble.ErrCorruption, len(it.Key()), logKeyLen, it.Key())
		_ = it.Close()
		return err
	}
	if it.First() {
		if len(it.Key()) != logKeyLen {
			return bad()
		}
		s.folded.Store(logSeq(it.Key()))
	}
	if it.Last() {
		if len(it.Key()) != logKeyLen {
			return bad()
		}
		s.seq = logSeq(it.Key()) + 1
	}
	return it.Close()
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

// Load implements store.Store: one scan of partition p's key prefix, with
// the record log entries not yet folded laid over it, both read from one
// engine snapshot. It may report records of an Append to p that has not
// returned yet.
func (s *Store) Load(ctx context.Context, p int32, fn func(store.Record) error) error {
	if p == logPartition {
		return errLogPartition
	}
	if err := s.enter(); err != nil {
		return err
	}
	defer s.inflight.Done()
	// Read before the snapshot: a fold that ends after this read leaves
	// the entries below its end in the snapshot or has folded them into it.
	from := s.folded.Load()
	snap := s.db.NewSnapshot()
	defer snap.Close()
	tail, err := s.loadTail(ctx, snap, p, from)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return s.loadError(p, err)
	}
	lo, hi := partitionBounds(p)
	it, err := snap.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lo, UpperBound: hi})
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
		if len(tail.recs) > 0 {
			if _, ok := tail.idx[string(it.Key()[4:])]; ok {
				continue // the log has a later value, or deleted it
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
	for _, r := range tail.recs {
		if r.Value == nil {
			continue
		}
		if err := fn(r); err != nil {
			return err
		}
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

// Compact folds the record log, then rewrites the whole store so that
// overwritten values, tombstoned keys and folded log entries are dropped
// from disk now. The engine also does this on its own as
// data accumulates; Compact is for tests, benchmarks and operators who want
// the space back at once. It blocks until done or ctx ends.
func (s *Store) Compact(ctx context.Context) error {
	if err := s.enter(); err != nil {
		return err
	}
	err := s.run(ctx, func() error {
		if err := s.fold(); err != nil {
			return err
		}
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

// Checkpoint writes a consistent copy of the store into dir while the store
// keeps serving: every Append acknowledged before the call is in the copy,
// none begun after it returned, and an Append made while it runs may be in
// it or not, whole either way (the engine's WAL is copied as a crash would
// leave it). dir must not exist; its missing parents are created.
// Tables are hard-linked where the file system allows (the copy then takes
// little space at first, and more as the store rewrites its tables), the
// rest is copied. The copy is a complete store directory: Open it, or start
// cohort with it as its data directory, to restore. Its marker is written
// last, so a copy cut short (a crash, a full disk) is refused by Open rather
// than taken for a whole one. It blocks until done or ctx ends.
func (s *Store) Checkpoint(ctx context.Context, dir string) error {
	if absDir, err := filepath.Abs(dir); err != nil {
		return err
	} else if absStore, err := filepath.Abs(s.dir); err != nil {
		return err
	} else if within(absStore, absDir) {
		return fmt.Errorf("disk: checkpoint into %s: it is inside the store directory %s; choose a directory outside it", dir, s.dir)
	}
	if err := s.enter(); err != nil {
		return err
	}
	err := s.run(ctx, func() error {
		// Like the store, the copy and its missing parents are private:
		// the parents are made here, the copy by the engine through
		// failStopFS.MkdirAll, which creates it 0700 before any file is
		// put in it.
		if err := s.base.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
			return err
		}
		if err := s.db.Checkpoint(dir, pebble.WithFlushedWAL()); err != nil {
			return err
		}
		if err := writeFileDurably(s.base, dir, markerName, []byte(markerContent)); err != nil {
			// A copy without its marker is refused by Open: remove it,
			// as the engine removes one whose writing failed, rather
			// than leave it taking the backup disk's space.
			_ = s.base.RemoveAll(dir)
			return err
		}
		return nil
	})
	if err != nil && !errors.Is(err, ErrStorage) && ctx.Err() == nil {
		err = fmt.Errorf("disk: checkpoint of %s into %s: %w", s.dir, dir, err)
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

	// Wait for the operations under way, fold the record log (so that the
	// next Open loads without replaying it), flush the memtable (so that the
	// next Open has no WAL to replay and, after a clean shutdown, no data is
	// held only by the WAL), then close the engine. Each step may never
	// finish if the store fails.
	done := make(chan error, 1)
	go func() {
		s.inflight.Wait()
		close(s.stop)
		err := s.fold()
		if ferr := s.db.Flush(); err == nil {
			err = ferr
		}
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

// IsStore reports whether dir holds a store (its marker file): cohort serve
// refuses to leave one unread in cluster mode.
func IsStore(dir string) bool {
	fi, err := os.Stat(filepath.Join(dir, markerName))
	return err == nil && fi.Mode().IsRegular()
}

// SubStores returns the names of those subdirectories of dir that hold a
// store (sorted): the data/ of a service's state directory, or the backups
// of a --backup-dir. A directory that cannot be listed has none.
func SubStores(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return storesIn(vfs.Default, dir, names)
}

// DirBytes is the size of the files under dir, a store's directory: what a
// restarted node is about to load (cohort serve sizes the collector's heap
// floor for the load from it). Files that vanish meanwhile (a compaction)
// and a directory not made yet count as nothing.
func DirBytes(dir string) int64 {
	var n int64
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n
}
