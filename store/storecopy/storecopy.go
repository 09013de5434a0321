// Package storecopy copies the records of a store's partitions into another
// store, byte for byte, and verifies the copy: what cohort store copy does
// to move a node's state between the embedded store and etcd.
//
// A store (package store) holds, per partition, the latest value of every
// key; copying a partition appends its live records to the destination in
// batches (Options), each an Append the destination may split further into
// its own transactions (store/etcd bounds them to etcd's --max-txn-ops and
// request size). The copy is therefore not atomic: the caller copies into
// an empty destination, verifies it (Summarize on both sides, Diff), and
// starts nothing on a destination that failed.
package storecopy

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/cohort-dev/cohort/store"
)

// Stats describes one partition's records: how many, their bytes (keys and
// values), the largest record, and a digest of the set of records.
type Stats struct {
	Partition int32
	Records   int64
	Bytes     int64
	// MaxRecord is the size (key and value) of the largest record.
	MaxRecord int
	// Digest does not depend on the order Load reports the records in:
	// it is the sum, lane by lane (four 64-bit lanes, modulo 2^64), of the
	// SHA-256 of every record's key length, key and value. Keys are
	// unique within a partition, so two partitions with equal digests and
	// counts hold the same records, barring a collision.
	Digest [4]uint64
}

// add counts r in s.
func (s *Stats) add(r store.Record) {
	sum := recordSum(r)
	for i := range s.Digest {
		s.Digest[i] += binary.BigEndian.Uint64(sum[8*i:])
	}
	s.Records++
	size := len(r.Key) + len(r.Value)
	s.Bytes += int64(size)
	s.MaxRecord = max(s.MaxRecord, size)
}

// Replace returns s with record old replaced by new (same key): the stats
// of the partition once new has overwritten old. MaxRecord is kept.
func (s Stats) Replace(old, new store.Record) Stats {
	o, n := recordSum(old), recordSum(new)
	for i := range s.Digest {
		s.Digest[i] += binary.BigEndian.Uint64(n[8*i:]) - binary.BigEndian.Uint64(o[8*i:])
	}
	s.Bytes += int64(len(new.Value) - len(old.Value))
	return s
}

// recordSum is the SHA-256 of r's key length, key and value.
func recordSum(r store.Record) [sha256.Size]byte {
	var n [binary.MaxVarintLen64]byte
	h := sha256.New()
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(r.Key)))])
	h.Write(r.Key)
	h.Write(r.Value)
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// DigestHex is the digest in hexadecimal, for messages.
func (s Stats) DigestHex() string {
	var b [32]byte
	for i, v := range s.Digest {
		binary.BigEndian.PutUint64(b[8*i:], v)
	}
	return fmt.Sprintf("%x", b)
}

// Summarize reads partition p of st and describes its records.
func Summarize(ctx context.Context, st store.Store, p int32) (Stats, error) {
	s := Stats{Partition: p}
	err := st.Load(ctx, p, func(r store.Record) error {
		s.add(r)
		return nil
	})
	if err != nil {
		return Stats{}, fmt.Errorf("reading partition %d: %w", p, err)
	}
	return s, nil
}

// Options bounds the batches Copy appends.
type Options struct {
	// BatchRecords is the most records one Append carries (default 1000).
	BatchRecords int
	// BatchBytes is the most key and value bytes one Append carries
	// (default 4 MiB); a single larger record goes alone.
	BatchBytes int
	// Skip, if set, names records of partition p that are read and
	// counted but not written (the caller writes them itself, later).
	Skip func(p int32, r store.Record) bool
	// Parallel is how many partitions CopyAll and SummarizeAll read and
	// write at once (default 1). A store such as etcd answers several
	// transactions in flight at about the cost of one (one consensus
	// round and fsync for all), which one partition at a time waits for
	// one by one; each partition in flight holds one batch in memory.
	Parallel int
}

// each runs fn(ctx, i) for i in 0..n-1, at most parallel at once, and
// returns the first error; after one, the calls not started yet are not
// made and ctx of those under way is cancelled.
func each(ctx context.Context, n, parallel int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range max(1, min(parallel, n)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if ctx.Err() != nil {
					continue // stopped: make no call more
				}
				if err := fn(ctx, i); err != nil {
					once.Do(func() { first = err })
					cancel(err)
				}
			}
		}()
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return first
}

// SummarizeAll is Summarize of every partition of parts, opts.Parallel at
// a time; the stats are in the order of parts.
func SummarizeAll(ctx context.Context, st store.Store, parts []int32, opts Options) ([]Stats, error) {
	out := make([]Stats, len(parts))
	err := each(ctx, len(parts), opts.Parallel, func(ctx context.Context, i int) (err error) {
		out[i], err = Summarize(ctx, st, parts[i])
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// CopyAll is Copy of every partition of parts, opts.Parallel at a time;
// done, if set, is called with each partition's stats once it is copied,
// and an error it returns stops the copy. The stats are in the order of
// parts. After an error, dst holds part of the records.
func CopyAll(ctx context.Context, src, dst store.Store, parts []int32, opts Options, done func(Stats) error) ([]Stats, error) {
	out := make([]Stats, len(parts))
	err := each(ctx, len(parts), opts.Parallel, func(ctx context.Context, i int) error {
		s, err := Copy(ctx, src, dst, parts[i], opts)
		if err == nil && done != nil {
			err = done(s)
		}
		out[i] = s
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Copy appends every live record of partition p of src to dst in batches
// (but those opts.Skip names) and describes what it read, skipped records
// included. It does not look at what dst already holds.
func Copy(ctx context.Context, src, dst store.Store, p int32, opts Options) (Stats, error) {
	if opts.BatchRecords <= 0 {
		opts.BatchRecords = 1000
	}
	if opts.BatchBytes <= 0 {
		opts.BatchBytes = 4 << 20
	}
	s := Stats{Partition: p}
	var batch []store.Record
	size := 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := dst.Append(ctx, p, batch); err != nil {
			return fmt.Errorf("writing partition %d: %w", p, err)
		}
		batch, size = batch[:0], 0
		return nil
	}
	err := src.Load(ctx, p, func(r store.Record) error {
		if opts.Skip != nil && opts.Skip(p, r) {
			s.add(r)
			return nil
		}
		sz := len(r.Key) + len(r.Value)
		if len(batch) > 0 && (len(batch) >= opts.BatchRecords || size+sz > opts.BatchBytes) {
			if err := flush(); err != nil {
				return err
			}
		}
		// Load's slices are valid during the call only.
		batch = append(batch, store.Record{Key: append([]byte(nil), r.Key...), Value: append([]byte{}, r.Value...)})
		size += sz
		s.add(r)
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return Stats{}, err
	}
	return s, nil
}

// Diff compares the source's partitions with the destination's, matched by
// partition: one line per partition whose record count, bytes or digest
// differ, or that one side lacks. No lines: the copy is verified.
func Diff(src, dst []Stats) []string {
	byPart := map[int32]Stats{}
	for _, d := range dst {
		byPart[d.Partition] = d
	}
	inSrc := map[int32]bool{}
	var out []string
	for _, s := range src {
		inSrc[s.Partition] = true
		d, ok := byPart[s.Partition]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("partition %d: not read back from the destination", s.Partition))
		case d.Records != s.Records || d.Bytes != s.Bytes:
			out = append(out, fmt.Sprintf("partition %d: source %d records (%d bytes), destination %d records (%d bytes)",
				s.Partition, s.Records, s.Bytes, d.Records, d.Bytes))
		case d.Digest != s.Digest:
			out = append(out, fmt.Sprintf("partition %d: %d records on both sides, but their digests differ (source %.16s…, destination %.16s…)",
				s.Partition, s.Records, s.DigestHex(), d.DigestHex()))
		}
	}
	for _, d := range dst {
		if !inSrc[d.Partition] {
			out = append(out, fmt.Sprintf("partition %d: in the destination only", d.Partition))
		}
	}
	return out
}
