package disk

import (
	"bytes"
	"errors"
	"testing"

	"github.com/cohort-dev/cohort/store"
)

// FuzzDecodeEntry feeds arbitrary bytes to the record log's entry decoder:
// whatever it is given (a damaged entry the engine's checksums missed), it
// returns errBadEntry or decodes records whose keys and values lie within
// the entry, and never panics. A well-formed entry (from appendEntry) must
// decode to exactly what was encoded.
func FuzzDecodeEntry(f *testing.F) {
	good, err := appendEntry(nil, []store.PartitionRecords{
		{Partition: 3, Records: []store.Record{
			{Key: []byte("group-a/topic/0"), Value: []byte("v0")},
			{Key: []byte("group-a/topic/1"), Value: nil},
			{Key: []byte("group-a/topic/12"), Value: []byte{}},
		}},
		{Partition: 7, Records: []store.Record{{Key: []byte("k"), Value: []byte("value")}}},
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good, int32(-1))
	f.Add(good, int32(3))
	f.Add(good[:len(good)-3], int32(7))
	f.Add([]byte{3, 2, 0, 200}, int32(3))           // a key length running past its section
	f.Add([]byte{3, 3, 0, 1, 'k', 3, 0}, int32(-1)) // sections back to back
	f.Fuzz(func(t *testing.T, entry []byte, want int32) {
		if want < 0 {
			want = logPartition
		}
		var recs []store.Record
		err := decodeEntry(entry, want, func(p int32, r store.Record) {
			if want != logPartition && p != want {
				t.Fatalf("record of partition %d decoded, want only %d", p, want)
			}
			if r.Value != nil && !bytes.Contains(entry, r.Value) {
				t.Fatalf("value %x is not from the entry", r.Value)
			}
			recs = append(recs, store.Record{Key: bytes.Clone(r.Key), Value: bytes.Clone(r.Value)})
		})
		if err != nil && !errors.Is(err, errBadEntry) {
			t.Fatalf("error %v does not wrap errBadEntry", err)
		}
		if err != nil || want != logPartition {
			return
		}
		// Whatever decoded cleanly must encode back to an entry that
		// decodes to the same records (partition sections may merge, so
		// compare the records, not the bytes).
		again, err := appendEntry(nil, []store.PartitionRecords{{Partition: 0, Records: recs}})
		if err != nil {
			t.Fatal(err)
		}
		var n int
		if err := decodeEntry(again, logPartition, func(_ int32, r store.Record) {
			w := recs[n]
			if !bytes.Equal(r.Key, w.Key) || (r.Value == nil) != (w.Value == nil) || !bytes.Equal(r.Value, w.Value) {
				t.Fatalf("record %d re-decoded as %q=%x, want %q=%x", n, r.Key, r.Value, w.Key, w.Value)
			}
			n++
		}); err != nil || n != len(recs) {
			t.Fatalf("re-decoding: %v, %d of %d records", err, n, len(recs))
		}
	})
}
