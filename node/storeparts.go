package node

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/cohort-dev/cohort/security/authstate"
	"github.com/cohort-dev/cohort/store"
)

// ErrNoPartitionCount is returned by StorePartitions for a store that
// records no partition count: empty, or never opened by a node of this
// version (which records the count at its start).
var ErrNoPartitionCount = errors.New("the store records no partition count")

// StorePartitions lists every store partition in which a node keeps state
// in st (docs/architecture.md, "What a store holds"): the security records
// (authstate.Partition), the catalog (CatalogPartition) and the coordinator
// partitions 0..n-1, n being the partition count the catalog records.
func StorePartitions(ctx context.Context, st store.Store) (n int, parts []int32, err error) {
	var stored []byte
	err = st.Load(ctx, CatalogPartition, func(r store.Record) error {
		if string(r.Key) == string(partitionsKey) {
			stored = append([]byte(nil), r.Value...)
		}
		return nil
	})
	if err != nil {
		return 0, nil, fmt.Errorf("reading the store's partition count: %w", err)
	}
	if stored == nil {
		return 0, nil, ErrNoPartitionCount
	}
	if n, err = strconv.Atoi(string(stored)); err != nil || n <= 0 {
		return 0, nil, fmt.Errorf("the partition count stored, %q, is not a positive number", stored)
	}
	parts = []int32{authstate.Partition, CatalogPartition}
	for p := range n {
		parts = append(parts, int32(p))
	}
	return n, parts, nil
}
