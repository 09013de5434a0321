// Package disk is the embedded durable store.Store of a single cohort node,
// built on the pebble LSM engine.
//
// # On-disk layout
//
// The store owns one directory: pebble's files (the write-ahead log *.log,
// sorted tables *.sst, MANIFEST-*, OPTIONS-*, LOCK, marker files) plus a
// COHORT-STORE file that identifies the directory as a store. All coordinator
// partitions share one keyspace; a record's engine key is the partition as 4
// bytes big-endian followed by the record key, and its engine value is the
// record value, so a partition's contents are one contiguous key range and
// Load(p) is a single prefix scan. A tombstone is an engine deletion: pebble
// keeps it only until compaction drops it together with the values it
// covers, which is what bounds the directory's size under steady overwrite
// and delete traffic (see Compact for doing it at once).
//
// # Durability
//
// Append writes its records as one pebble batch (atomic: all or none survive
// a crash) to the WAL and returns only after the fsync that covers it.
// Concurrent Appends, from the loops of any partitions, are group-committed:
// while one WAL fsync is under way, pebble's commit pipeline queues every
// batch that arrives and covers all of them with the next single fsync, so
// throughput grows with the number of concurrent appenders rather than being
// capped at one fsync per Append. Options.NoSync turns the fsync off
// (benchmarks only).
//
// # Failures
//
// Open refuses, with an error telling the operator what to do, to use a
// directory that holds other files (ErrNotStore), that another process has
// open (ErrLocked), or whose files are missing or damaged (ErrStorage); it
// never silently starts empty over existing data. Damage that pebble only
// detects when reading a table surfaces as an ErrStorage error from Load.
//
// The first failed write, sync, or file creation/rename (a full disk, an I/O
// error) fails the whole store: that operation and every later Append, Load
// and Compact return an error wrapping ErrStorage, until the process opens
// the store again. Nothing is acknowledged after the failure, and everything
// acknowledged before it was synced and is recovered from the WAL on the next
// Open. The store deliberately does not retry: after a failed fsync the
// kernel may have dropped the unwritten pages, so a later "successful" sync
// proves nothing. Pebble itself treats these failures as fatal to the
// process; the store intercepts them (see failStopFS) so that the
// coordinator can report the partitions unavailable instead of crashing.
package disk
