package disk

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/cohort-dev/cohort/store"
)

// The record log (see doc.go, "Record log and folding").
//
// An Append (or AppendMulti, StartMulti) of any number of records is one
// engine key, logKey(seq), whose value encodes every record of every
// partition in the call:
//
//	entry   = section*
//	section = uvarint(partition) uvarint(byte length of records) records
//	record  = uvarint(shared) uvarint(len(suffix)) suffix uvarint(len(value)+1 or 0 for a tombstone) value
//
// where the record's key is the first `shared` bytes of the section's
// previous key followed by suffix (the keys of one commit share their group
// and topic: this halves an offset commit's entry).
//
// A fold reads the entries below a sequence number, keeps the latest value
// of every key they touch, writes those into the partitions' key ranges and
// deletes the entries, in one engine batch. Load reads a partition's key
// range and lays the entries not yet folded over it.

// logPartition is the partition whose key range holds the log: it is not
// available to callers (Append and Load refuse it). Partition keys start with
// the partition's 4 bytes big-endian, so the log is one contiguous range.
const logPartition = math.MinInt32

// logPrefix starts every log key.
var logPrefix = []byte{0x80, 0, 0, 0, 'L'}

const logKeyLen = 5 + 8

// putLogKey writes the log key of seq into dst (logKeyLen bytes).
func putLogKey(dst []byte, seq uint64) {
	copy(dst, logPrefix)
	binary.BigEndian.PutUint64(dst[5:], seq)
}

// logSeq is the sequence number of log key k.
func logSeq(k []byte) uint64 { return binary.BigEndian.Uint64(k[5:]) }

// errLogPartition is returned for the partition reserved for the log.
var errLogPartition = fmt.Errorf("disk: partition %d is reserved for the store's record log", logPartition)

func logKey(seq uint64) []byte {
	k := make([]byte, logKeyLen)
	putLogKey(k, seq)
	return k
}

// logEnd bounds the log's key range from above.
var logEnd = []byte{0x80, 0, 0, 0, 'L' + 1}

// appendEntry appends the record log entry of batches to dst (empty
// batches write no section) in one pass: each section's body is encoded
// after a gap as large as the longest length prefix, which is then closed
// once the body's length is known.
func appendEntry(dst []byte, batches []store.PartitionRecords) ([]byte, error) {
	for _, pr := range batches {
		if len(pr.Records) == 0 {
			continue
		}
		if pr.Partition == logPartition {
			return dst, errLogPartition
		}
		dst = binary.AppendUvarint(dst, uint64(uint32(pr.Partition)))
		lenAt := len(dst)
		dst = append(dst, make([]byte, binary.MaxVarintLen64)...)
		bodyAt := len(dst)
		var prev []byte
		for _, r := range pr.Records {
			sh := shared(prev, r.Key)
			prev = r.Key
			dst = binary.AppendUvarint(dst, uint64(sh))
			dst = binary.AppendUvarint(dst, uint64(len(r.Key)-sh))
			dst = append(dst, r.Key[sh:]...)
			if r.Value == nil {
				dst = append(dst, 0)
				continue
			}
			dst = binary.AppendUvarint(dst, uint64(len(r.Value))+1)
			dst = append(dst, r.Value...)
		}
		body := len(dst) - bodyAt
		n := binary.PutUvarint(dst[lenAt:], uint64(body))
		dst = dst[:lenAt+n+copy(dst[lenAt+n:], dst[bodyAt:])]
	}
	return dst, nil
}

// shared is the length of the common prefix of a and b. It compares eight
// bytes at a time: the keys of one commit share their group and topic (tens
// of bytes), and a byte loop here was 7% of a durable 50-offset commit's CPU.
func shared(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for ; i+8 <= n; i += 8 {
		if x := binary.LittleEndian.Uint64(a[i:]) ^ binary.LittleEndian.Uint64(b[i:]); x != 0 {
			return i + bits.TrailingZeros64(x)/8
		}
	}
	for ; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// errBadEntry is wrapped by decodeEntry's errors: a log entry that does not
// parse (damage that the engine's checksums did not catch).
var errBadEntry = errors.New("malformed record log entry")

// decodeEntry calls fn for every record of partition want (every partition
// if want is logPartition) in entry, in order. A nil Value is a tombstone.
// The Key is only valid during the call; the Value points into entry (its
// capacity runs to the entry's end: see rebase).
func decodeEntry(entry []byte, want int32, fn func(p int32, r store.Record)) error {
	i := 0
	var stack [128]byte
	keyBuf := stack[:0]
	// next reads a uvarint that must end by limit (a section's varints
	// never run into the next section: checked bounds below rely on i ≤
	// the section's end).
	next := func(limit int) (uint64, bool) {
		v, n := binary.Uvarint(entry[i:limit])
		if n <= 0 {
			return 0, false
		}
		i += n
		return v, true
	}
	for i < len(entry) {
		p, ok1 := next(len(entry))
		n, ok2 := next(len(entry))
		if !ok1 || !ok2 || p > 1<<32-1 || n > uint64(len(entry)-i) {
			return errBadEntry
		}
		end := i + int(n)
		if want != logPartition && int32(uint32(p)) != want {
			i = end // another partition's section
			continue
		}
		key := keyBuf[:0]
		for i < end {
			sh, ok1 := next(end)
			kl, ok2 := next(end)
			if !ok1 || !ok2 || sh > uint64(len(key)) || kl > uint64(end-i) {
				return errBadEntry
			}
			key = append(key[:sh], entry[i:i+int(kl)]...)
			i += int(kl)
			vl, ok := next(end)
			if !ok || vl > uint64(end-i)+1 {
				return errBadEntry
			}
			var value []byte
			if vl > 0 {
				value = entry[i : i+int(vl-1)]
				i += int(vl - 1)
			}
			fn(int32(uint32(p)), store.Record{Key: key, Value: value})
		}
		keyBuf = key
		if i != end {
			return errBadEntry
		}
	}
	return nil
}

// latest collects the last value written to each key (nil: deleted). It
// keeps a copy of each key, and r.Value itself.
type latest struct {
	idx  map[string]int
	recs []store.Record
}

func (l *latest) put(r store.Record) {
	if i, ok := l.idx[string(r.Key)]; ok {
		l.recs[i].Value = r.Value
		return
	}
	if l.idx == nil {
		l.idx = make(map[string]int)
	}
	l.idx[string(r.Key)] = len(l.recs)
	r.Key = slices.Clone(r.Key)
	l.recs = append(l.recs, r)
}

// maxFoldHint caps the map and slice sizes a fold preallocates from the
// last fold's count of a partition's keys: a burst of distinct keys must not
// make every later fold allocate for it.
const maxFoldHint = 1 << 16

// folded collects the latest value of each key of one partition for a fold
// that reads the log newest entry first: a key's first sighting wins, except
// that within one entry (which may hold two writes of a key) the later write
// does. Keys and values are copied into the fold's arena.
type folded struct {
	idx   map[string]int
	recs  []store.Record
	entry []uint32 // entry of recs[i]'s value (numbered newest first)
}

func (f *folded) put(r store.Record, entry uint32, a *arena) {
	if i, ok := f.idx[string(r.Key)]; ok {
		if f.entry[i] == entry { // a later write in the same entry
			f.recs[i].Value = a.copy(r.Value)
		}
		return
	}
	f.idx[string(r.Key)] = len(f.recs)
	f.recs = append(f.recs, store.Record{Key: a.copy(r.Key), Value: a.copy(r.Value)})
	f.entry = append(f.entry, entry)
}

// arena hands out copies of byte slices from large chunks: a fold keeps
// thousands of small keys and values, and one allocation per chunk instead
// of one per slice keeps the collector out of it.
type arena struct{ chunk []byte }

const arenaChunk = 64 << 10

// copy returns a copy of b, nil if b is nil (a tombstone stays one) and
// non-nil if b is empty but not nil (an empty value is a value).
func (a *arena) copy(b []byte) []byte {
	if b == nil {
		return nil
	}
	if len(b) == 0 {
		// Not a.chunk[n:n]: before the first chunk is made that is nil,
		// and an empty value would become a tombstone (the fold then
		// deleted a live key whose value, and key, were empty).
		return []byte{}
	}
	if len(b) > cap(a.chunk)-len(a.chunk) {
		a.chunk = make([]byte, 0, max(arenaChunk, len(b)))
	}
	n := len(a.chunk)
	a.chunk = append(a.chunk, b...)
	return a.chunk[n : n+len(b) : n+len(b)]
}

// maybeFold starts a background fold when the log has grown past foldAt.
// When the log has grown past 4×foldAt during a fold (appends outrun it), it
// returns the fold's done channel: the appender waits for it, so that the
// log stays bounded. s.seqMu is held.
func (s *Store) maybeFold() (wait <-chan struct{}) {
	if s.pending < s.foldAt {
		return nil
	}
	if s.folding {
		if s.pending >= 4*s.foldAt {
			return s.foldDone
		}
		return nil
	}
	if s.enter() != nil {
		return nil
	}
	s.folding = true
	done := make(chan struct{})
	s.foldDone = done
	go func() {
		defer s.inflight.Done()
		switch err := s.fold(); {
		case errors.Is(err, pebble.ErrCorruption):
			// Every later fold and every Load read the same damage:
			// the log would never shrink again, no partition could
			// load, and the next Open refuses the store. Acknowledging
			// more appends into it would only add to what is stuck
			// there: fail, as a failed write does.
			s.failDamaged(err)
		case err != nil:
			s.log.Warn("store record log fold failed (retried at the next fold)", "err", err)
		}
		s.seqMu.Lock()
		s.folding = false
		s.seqMu.Unlock()
		close(done)
	}()
	return nil
}

// fold moves every log entry written so far into the partitions' key
// ranges: one engine batch sets or deletes each key the entries touched to
// its latest value and deletes the entries, so after a crash either the
// entries or the folded keys are there (and replaying an entry over keys it
// was folded into changes nothing). The batch is not synced: if it is lost,
// the entries it replaced are still in the log. Entries appended meanwhile
// stay in the log, which Load lays over the folded keys.
func (s *Store) fold() error {
	s.foldMu.Lock()
	defer s.foldMu.Unlock()
	s.seqMu.Lock()
	upto := s.seq // every entry below upto is in the memtable
	s.pending = 0
	s.seqMu.Unlock()
	from := s.folded.Load()
	if from >= upto {
		return nil
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: logKey(from), UpperBound: logKey(upto)})
	if err != nil {
		return err
	}
	// Newest entry first: a key's first sighting is its latest value,
	// which alone is copied (into the fold's arena); older values of it
	// are skipped without copying their entry.
	parts := map[int32]*folded{}
	var last *folded
	lastP := int32(logPartition)
	var arena arena
	entry := uint32(0)
	for valid := it.Last(); valid; valid = it.Prev() {
		if len(it.Key()) != logKeyLen {
			err := fmt.Errorf("%w: a record log key of %d bytes (want %d): %x", pebble.ErrCorruption, len(it.Key()), logKeyLen, it.Key())
			_ = it.Close()
			return err
		}
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return err
		}
		entry++
		err = decodeEntry(v, logPartition, func(p int32, r store.Record) {
			if p != lastP || last == nil {
				if last = parts[p]; last == nil {
					n := min(s.foldKeys[p], maxFoldHint)
					last = &folded{idx: make(map[string]int, n), recs: make([]store.Record, 0, n), entry: make([]uint32, 0, n)}
					parts[p] = last
				}
				lastP = p
			}
			last.put(r, entry, &arena)
		})
		if err != nil {
			err = fmt.Errorf("%w: log entry %x: %w", pebble.ErrCorruption, it.Key(), err)
			_ = it.Close() // the key is not valid after Close
			return err
		}
	}
	if err := it.Close(); err != nil {
		return err
	}
	if s.foldKeys == nil {
		s.foldKeys = make(map[int32]int, len(parts))
	}
	clear(s.foldKeys)
	size := 64
	for p, l := range parts {
		s.foldKeys[p] = len(l.recs)
		for _, r := range l.recs {
			size += 4 + len(r.Key) + len(r.Value) + 16
		}
	}
	b := s.db.NewBatchWithSize(size)
	defer b.Close()
	var key []byte
	for p, l := range parts {
		for _, r := range l.recs {
			key = append(partitionKey(key[:0], p), r.Key...)
			if r.Value == nil {
				err = b.Delete(key, nil)
			} else {
				err = b.Set(key, r.Value, nil)
			}
			if err != nil {
				return err
			}
		}
	}
	if err := b.DeleteRange(logKey(from), logKey(upto), nil); err != nil {
		return err
	}
	if err := s.db.Apply(b, pebble.NoSync); err != nil {
		return err
	}
	s.folded.Store(upto)
	return nil
}

// loadTail returns partition p's records in the log entries of snap from
// seq from on, latest value per key (nil Value: deleted).
func (s *Store) loadTail(ctx context.Context, snap *pebble.Snapshot, p int32, from uint64) (*latest, error) {
	it, err := snap.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: logKey(from), UpperBound: logEnd})
	if err != nil {
		return nil, err
	}
	tail := &latest{}
	for valid := it.First(); valid; valid = it.Next() {
		if len(it.Key()) != logKeyLen {
			err := fmt.Errorf("%w: a record log key of %d bytes (want %d): %x", pebble.ErrCorruption, len(it.Key()), logKeyLen, it.Key())
			_ = it.Close()
			return nil, err
		}
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return nil, err
		}
		var owned []byte // v copied once if it holds p's records
		err = decodeEntry(v, p, func(_ int32, r store.Record) {
			if owned == nil {
				owned = append([]byte(nil), v...)
			}
			// Re-point the value into owned, at the same offset.
			if r.Value != nil {
				r.Value = rebase(owned, v, r.Value)
			}
			tail.put(r)
		})
		if err != nil {
			key := fmt.Sprintf("%x", it.Key())
			_ = it.Close()
			return nil, fmt.Errorf("%w: log entry %s", pebble.ErrCorruption, key)
		}
	}
	if err := it.Close(); err != nil {
		return nil, err
	}
	return tail, nil
}

// rebase returns the slice of owned at the offset at which sub lies in orig.
func rebase(owned, orig, sub []byte) []byte {
	if len(sub) == 0 {
		return owned[:0:0]
	}
	off := cap(orig) - cap(sub)
	return owned[off : off+len(sub) : off+len(sub)]
}
