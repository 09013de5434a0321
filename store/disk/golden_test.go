package disk

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/cohort-dev/cohort/internal/golden"
	"github.com/cohort-dev/cohort/store"
)

// TestRecordLogGolden holds, under testdata/golden/, a record log entry as
// this version writes it (key and value of the engine record an Append
// writes: records of two partitions, keys sharing prefixes, a tombstone),
// and checks that it decodes to those records and encodes to the same bytes
// again; and the engine key a fold writes a record under. A store a crash
// left with entries not folded yet is read by the next version, whatever
// version that is: a change of either layout fails here and needs a new
// store format (the COHORT-STORE marker) that Open upgrades. Running the
// test once with COHORT_TEST_WRITE_GOLDEN=1 writes a missing fixture
// (package internal/golden).
func TestRecordLogGolden(t *testing.T) {
	batches := []store.PartitionRecords{
		{Partition: 5, Records: []store.Record{
			{Key: []byte("\x02\x09classic-g\x06orders\x00\x00\x00\x00"), Value: []byte("offset 0")},
			{Key: []byte("\x02\x09classic-g\x06orders\x00\x00\x00\x01"), Value: []byte("offset 1")},
			{Key: []byte("\x01classic-g")}, // a tombstone
		}},
		{Partition: -2, Records: []store.Record{{Key: []byte("u/SCRAM-SHA-256/alice"), Value: []byte{}}}},
	}
	entry, err := appendEntry(nil, batches)
	if err != nil {
		t.Fatal(err)
	}
	key, value := golden.Record(t, "log-entry", "a record log entry (engine key: partition math.MinInt32, 'L', sequence 7; value: sections of partitions 5 and -2)",
		logKey(7), entry)
	if !bytes.Equal(key, logKey(7)) || logSeq(key) != 7 {
		t.Errorf("log key %x (sequence %d), this version's %x", key, logSeq(key), logKey(7))
	}
	if !bytes.Equal(value, entry) {
		t.Errorf("encoding changed:\nstored  %x\nencoded %x", value, entry)
	}
	got := map[int32][]store.Record{}
	if err := decodeEntry(value, logPartition, func(p int32, r store.Record) {
		got[p] = append(got[p], store.Record{Key: bytes.Clone(r.Key), Value: bytes.Clone(r.Value)})
	}); err != nil {
		t.Fatal(err)
	}
	for _, b := range batches {
		if !reflect.DeepEqual(got[b.Partition], b.Records) {
			t.Errorf("partition %d: decoded %q, want %q", b.Partition, got[b.Partition], b.Records)
		}
	}
	if len(got) != len(batches) {
		t.Errorf("decoded partitions %d, want %d", len(got), len(batches))
	}

	folded := append(partitionKey(nil, -2), "u/SCRAM-SHA-256/alice"...)
	fk, _ := golden.Record(t, "folded-key", "the engine key of record u/SCRAM-SHA-256/alice of partition -2 once folded (the partition as 4 bytes big endian, then the key)",
		folded, nil)
	if !bytes.Equal(fk, folded) {
		t.Errorf("folded key %x, stored %x", folded, fk)
	}
}
