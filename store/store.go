// Package store defines the durable record log behind a coordinator partition.
//
// The coordinator turns every state change it must not lose (committed offsets,
// a group's generation and assignment, deletions) into key/value records and
// appends them here before it answers the client. A store keeps, per coordinator
// partition, the latest value of every key; a record with a nil Value is a
// tombstone that deletes its key. What the keys and values mean is the business
// of package group (which owns the encoding); a store only orders, persists and
// returns them.
//
// Implementations: memstore (in memory, for tests), the embedded on-disk default,
// and (in cluster mode) etcd. Every implementation must be safe for concurrent
// use by the loops of different partitions.
package store

import (
	"context"
	"errors"
)

// Record is one key/value pair of a partition's log. A nil Value is a
// tombstone: the key is deleted.
type Record struct {
	Key   []byte
	Value []byte
}

// Store is a durable, per-partition key/value log.
type Store interface {
	// Append makes recs durable in partition p, in order, atomically: when it
	// returns nil every record survives a crash of the process and of the
	// machine; when it returns an error none of them may be considered
	// written (the caller reports a retriable error to its clients).
	// Implementations batch concurrent Appends into one sync where they can
	// (group commit). recs and their byte slices are not retained after
	// Append returns.
	Append(ctx context.Context, p int32, recs []Record) error

	// Load calls fn once for every live key of partition p with its latest
	// value, in no particular order. Tombstoned keys are not reported. The
	// slices passed to fn are only valid during the call.
	Load(ctx context.Context, p int32, fn func(Record) error) error

	// Close releases the store. Appends after Close fail with ErrClosed.
	Close() error
}

// MultiAppender is implemented by stores that can make the records of several
// partitions durable with one write (one fsync, one transaction). The
// coordinator then commits the pending batches of all its partitions
// together: group commit across partitions.
type MultiAppender interface {
	// AppendMulti makes every batch durable, each batch's records in order,
	// batches in slice order. When it returns nil all of them survive a
	// crash; when it returns an error none may be considered written. The
	// slices are not retained.
	AppendMulti(ctx context.Context, batches []PartitionRecords) error
}

// RecordLimiter is implemented by stores that refuse a record (key and
// value) over a size: the coordinator does not write a larger one and
// answers its request with a non-retriable error instead of failing the
// write, which clients would retry for ever (etcd's request size limit).
type RecordLimiter interface {
	MaxRecordBytes() int
}

// Pipeliner is implemented by stores that fix a write's place in the log
// before it is durable, so the caller can start the next write while the
// previous one is still being synced (pipelined group commit: the disk syncs
// back to back instead of waiting for the caller between syncs).
type Pipeliner interface {
	MultiAppender
	// StartMulti orders batches after every write started before it (by
	// StartMulti, AppendMulti or Append) and returns without waiting for
	// durability. The returned wait blocks until they are durable and
	// returns AppendMulti's result; it must be called exactly once. If
	// StartMulti itself fails, nothing was written and wait is nil. A
	// write's wait may return nil only if every earlier write's wait does
	// (a log cannot keep a later write and lose an earlier one). The
	// slices are not retained once StartMulti returns.
	StartMulti(ctx context.Context, batches []PartitionRecords) (wait func() error, err error)
}

// PartitionRecords is one partition's records in an AppendMulti call.
type PartitionRecords struct {
	Partition int32
	Records   []Record
	// Owner, if not 0, is the ownership the records were produced under
	// (OwnerTokens.OwnerToken when the partition was loaded): a fenced
	// store refuses them with ErrNotOwner unless that ownership is still
	// the current one, so that a batch taken before the partition left
	// this node cannot be written under a later ownership of it.
	Owner int64
}

// OwnerTokens is implemented by fenced stores (cluster mode): OwnerToken is
// the token of this node's current ownership of partition p, 0 if it owns
// none. A new ownership of the same partition has a new token.
type OwnerTokens interface {
	OwnerToken(p int32) int64
	// AppendOwned is Append of records produced under ownership owner
	// (as PartitionRecords.Owner): ErrNotOwner unless it is current.
	AppendOwned(ctx context.Context, p int32, owner int64, recs []Record) error
}

// ErrClosed is returned by operations on a closed store.
var ErrClosed = errors.New("store: closed")

// ErrNotOwner is returned by a store whose writes are fenced (cluster mode) when
// this node no longer owns the partition. The coordinator answers
// NOT_COORDINATOR.
var ErrNotOwner = errors.New("store: partition not owned by this node")
