package node

import (
	"context"
	"strconv"
	"testing"

	"github.com/cohort-dev/cohort/security/authstate"
	"github.com/cohort-dev/cohort/store"
	"github.com/cohort-dev/cohort/store/memstore"
)

// FuzzStorePartitions feeds an arbitrary partition-count record, as a
// damaged store or one written by something else would hold, to
// StorePartitions (what cohort store copy reads first). It must refuse
// what is not a count cohort serve can have written, and list, for what it
// takes, the security and catalog partitions and 0..n-1 once each.
func FuzzStorePartitions(f *testing.F) {
	f.Add([]byte(strconv.Itoa(50)))
	f.Add([]byte(strconv.Itoa(1)))
	f.Add(append([]byte(nil), copyIncomplete...))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, value []byte) {
		st := memstore.New()
		ctx := context.Background()
		if err := st.Append(ctx, CatalogPartition, []store.Record{{Key: partitionsKey, Value: value}}); err != nil {
			t.Fatal(err)
		}
		n, parts, err := StorePartitions(ctx, st)
		if err != nil {
			if n != 0 || parts != nil {
				t.Fatalf("%q refused (%v), yet n %d and %d partitions", value, err, n, len(parts))
			}
			return
		}
		if n < 1 || n > MaxPartitionCount {
			t.Fatalf("%q taken as partition count %d: not one cohort serve --partitions allows (1 to %d)", value, n, MaxPartitionCount)
		}
		if v, err := strconv.Atoi(string(value)); err != nil || v != n {
			t.Fatalf("%q read as %d", value, n)
		}
		if len(parts) != n+2 || parts[0] != authstate.Partition || parts[1] != CatalogPartition {
			t.Fatalf("%q: %d partitions %v..., want the security and catalog partitions and %d more", value, len(parts), parts[:min(len(parts), 3)], n)
		}
		for i, p := range parts[2:] {
			if p != int32(i) {
				t.Fatalf("%q: partition %d listed as %d", value, i, p)
			}
		}
	})
}
