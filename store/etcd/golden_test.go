package etcd

import (
	"testing"

	"github.com/cohort-dev/cohort/internal/golden"
)

// TestRecordKeyGolden holds, under testdata/golden/, the etcd key of a
// record as this version writes it (under the default prefix: 'd', the
// partition as 4 bytes big endian, the record key), for a coordinator
// partition and for the catalog's partition -1. A cluster's etcd holds the
// keys of every version that ran on it: a change of the layout fails here
// and needs a move of the stored keys. The values are the records' values
// as they are (their fixtures are those of the packages that encode them).
// Running the test once with COHORT_TEST_WRITE_GOLDEN=1 writes a missing
// fixture (package internal/golden).
func TestRecordKeyGolden(t *testing.T) {
	s := &Store{prefix: DefaultPrefix}
	for _, c := range []struct {
		name, about string
		p           int32
		key         string
	}{
		{"record-key", "etcd key of record \\x02...offset of partition 5 (prefix /cohort/)", 5, "\x02\x09classic-g\x06orders\x00\x00\x00\x02"},
		{"record-key-catalog", "etcd key of the catalog partition's (-1) record topic/orders (prefix /cohort/)", -1, "topic/orders"},
	} {
		want := s.RecordKey(c.p, []byte(c.key))
		got, _ := golden.Record(t, c.name, c.about, []byte(want), nil)
		if string(got) != want {
			t.Errorf("%s: stored %q, this version's %q", c.name, got, want)
		}
	}
	if got := OwnerKey(DefaultPrefix, 7); got != "/cohort/own/7" {
		t.Errorf("ownership key %q", got) // a node of another version must see who holds the partition
	}
}
