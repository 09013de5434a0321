// Package disk is the embedded durable store.Store of a single cohort node,
// built on the pebble LSM engine.
//
// # On-disk layout
//
// The store owns one directory: pebble's files (the write-ahead log *.log,
// sorted tables *.sst, MANIFEST-*, OPTIONS-*, LOCK, marker files) plus a
// COHORT-STORE file that identifies the directory as a store (format 2;
// Open upgrades a format 1 marker, whose stores hold no record log). All
// coordinator partitions share one keyspace; a record's folded engine key is
// the partition as 4 bytes big-endian followed by the record key, and its
// engine value is the record value, so a partition's contents are one
// contiguous key range.
//
// # Record log and folding
//
// An Append does not write one engine key per record: it writes one record
// log entry, a single engine key (the reserved partition math.MinInt32
// followed by 'L' and a sequence number) whose value holds every record of
// every partition in the call (log.go; the keys of a partition's records
// are prefix-compressed). A durable commit of 50 offsets is then one
// insertion into pebble's memtable instead of 50, which was most of what a
// durable commit cost beyond the in-memory store.
//
// When the entries written since the last fold exceed a threshold (4 MiB,
// or a quarter of the memtable), a background fold reads them, keeps the latest
// value of every key they touch, and in one engine batch writes those
// values into the partitions' key ranges (a tombstone as an engine
// deletion) and deletes the entries with a range deletion. Under steady
// overwrites (consumers committing the same partitions again and again) a
// fold writes each key once, however many times it was committed. If
// appends outrun the fold (the unfolded log reaches 4× the threshold), they
// wait for it, so the log stays bounded. Close folds everything, and Open
// folds what a crash left, once, before any Load.
//
// Load(p) reads, from one engine snapshot, the entries not yet folded
// (skipping other partitions' sections) and partition p's key range, and
// reports each key once with the log's value if it has one: replay of the
// log tail over the folded state. Pebble keeps a tombstone and a deleted log
// entry only until compaction drops them together with the values they
// cover, which is what bounds the directory's size under steady overwrite
// and delete traffic (see Compact for doing it at once).
//
// # Durability
//
// Append writes its records as one log entry in one pebble batch (atomic:
// all or none survive a crash) to the WAL and returns only after the fsync
// that covers it. A fold is not synced: if a crash loses it, the entries it
// replaced are still in the WAL or the tables (the WAL is replayed in order,
// so a lost fold loses nothing acknowledged), and replaying an entry over
// keys it was already folded into changes nothing.
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
// detects when reading a table surfaces as an ErrStorage error from Load;
// damage in the record log found by a background fold fails the whole store
// (below), since every later fold and Load would meet it and the next Open
// refuses the store.
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
