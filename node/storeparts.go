package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/cohort-dev/cohort/security/authstate"
	"github.com/cohort-dev/cohort/store"
)

// ErrNoPartitionCount is returned by StorePartitions for a store that
// records no partition count: empty, or never opened by a node of this
// version (which records the count at its start).
var ErrNoPartitionCount = errors.New("the store records no partition count")

// copyIncomplete is the partition count cohort store copy records in its
// destination before it copies anything; the source's own count replaces it
// once the copy is verified. It is no number, so that no node (of this
// version or an earlier one) starts on a copy cut short.
var copyIncomplete = []byte("incomplete: cohort store copy has not finished")

// CopyIncompleteRecord is the record cohort store copy writes first into its
// destination's catalog partition: a node refuses to start on a store that
// holds it (IsPartitionCount names the record that replaces it).
func CopyIncompleteRecord() store.Record {
	return store.Record{Key: partitionsKey, Value: copyIncomplete}
}

// IsPartitionCount reports whether k, a key of CatalogPartition, is the
// record of the store's partition count.
func IsPartitionCount(k []byte) bool { return bytes.Equal(k, partitionsKey) }

// errCopyIncomplete is the refusal of a store holding copyIncomplete.
func errCopyIncomplete(where string) error {
	return fmt.Errorf("%s holds an incomplete copy: a cohort store copy into it was interrupted or failed, "+
		"so part of the state is missing; do not serve it: empty it and run cohort store copy again", where)
}

// MaxPartitionCount is the most coordinator partitions a node serves
// (Config.Partitions, cohort serve --partitions) and the largest count
// StorePartitions takes from a store: a larger one is damage.
const MaxPartitionCount = math.MaxInt16

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
	if bytes.Equal(stored, copyIncomplete) {
		return 0, nil, errCopyIncomplete("it")
	}
	if n, err = strconv.Atoi(string(stored)); err != nil || n <= 0 {
		return 0, nil, fmt.Errorf("the partition count stored, %q, is not a positive number", stored)
	}
	if n > MaxPartitionCount {
		// Damaged, or not cohort's: listing that many partitions would
		// take gigabytes (or wrap past int32) before anything is read.
		return 0, nil, fmt.Errorf("the partition count stored, %d, is more than cohort serve --partitions allows (%d)", n, MaxPartitionCount)
	}
	parts = []int32{authstate.Partition, CatalogPartition}
	for p := range n {
		parts = append(parts, int32(p))
	}
	return n, parts, nil
}
