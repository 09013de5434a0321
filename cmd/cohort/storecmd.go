package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cohort-dev/cohort/node"
	"github.com/cohort-dev/cohort/security/authstate"
	"github.com/cohort-dev/cohort/security/clientconfig"
	"github.com/cohort-dev/cohort/store"
	"github.com/cohort-dev/cohort/store/disk"
	etcdstore "github.com/cohort-dev/cohort/store/etcd"
	"github.com/cohort-dev/cohort/store/storecopy"
)

const storeCopyUsage = `usage: cohort store copy --from-data-dir DIR --to-etcd ENDPOINTS [--etcd-prefix P] [etcd flags]
       cohort store copy --from-etcd ENDPOINTS [--etcd-prefix P] [etcd flags] --to-data-dir DIR
  copies a stopped node's state (groups, committed offsets, rebalance history,
  topics, group configs, SCRAM users, ACLs) from its data directory into etcd
  for cluster mode, or a stopped cluster's state from etcd into a data
  directory, byte for byte; then reads the destination back and compares
  every partition's record count and digest with the source's. It refuses a
  source in use (a node running on the data directory, live nodes under the
  prefix) and a destination that holds anything. Start the nodes on the
  destination with the source's --partitions.
`

// storeCopyFlags are the flags of cohort store copy.
type storeCopyFlags struct {
	fromDir, toDir, fromEtcd, toEtcd          string
	prefix, ca, cert, key, user, passwordFile string
	timeout                                   time.Duration
}

// storeCmd runs "cohort store copy".
func storeCmd(e env, args []string) error {
	var f storeCopyFlags
	fs := newFlagSet(e, "store copy", storeCopyUsage)
	fs.StringVar(&f.fromDir, "from-data-dir", "", "data directory (--data-dir of cohort serve) to copy from; no node may be running on it")
	fs.StringVar(&f.toDir, "to-data-dir", "", "data directory to copy into: missing or empty")
	fs.StringVar(&f.fromEtcd, "from-etcd", "", "comma-separated etcd `endpoints` to copy from; no node may be running under --etcd-prefix")
	fs.StringVar(&f.toEtcd, "to-etcd", "", "comma-separated etcd `endpoints` to copy into: nothing may be stored under --etcd-prefix")
	fs.StringVar(&f.prefix, "etcd-prefix", etcdstore.DefaultPrefix, "prefix of the cluster's etcd keys (cohort serve --etcd-prefix)")
	fs.StringVar(&f.ca, "etcd-ca", "", "CA certificate `file` to verify etcd (TLS)")
	fs.StringVar(&f.cert, "etcd-cert", "", "client certificate `file` for etcd (TLS)")
	fs.StringVar(&f.key, "etcd-key", "", "client key `file` for etcd (TLS)")
	fs.StringVar(&f.user, "etcd-user", "", "etcd user, when etcd has authentication enabled; its password comes from --etcd-password-file or COHORT_ETCD_PASSWORD")
	fs.StringVar(&f.passwordFile, "etcd-password-file", "", "`file` holding the password of --etcd-user (one line)")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Second, "bound of every etcd request and of connecting to etcd")
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		if len(args) == 0 {
			return usagef("store: want copy (see cohort store copy -h)")
		}
		fs.Usage()
		return flag.ErrHelp
	}
	if args[0] != "copy" {
		return usagef("store: unknown action %q: want copy (see cohort store copy -h)", args[0])
	}
	pos, err := parseFlags(fs, args[1:])
	if err != nil {
		return err
	}
	if len(pos) > 0 && len(pos[0]) > maxKafkaString {
		return checkNoArgs("store copy", pos)
	}
	if len(pos) > 0 {
		return usagef("store copy: unexpected argument %q (see cohort store copy -h)", pos[0])
	}
	return storeCopy(e, f)
}

// storeCopyParallel is how many partitions store copy reads and writes at
// once: etcd commits concurrent transactions together, so the copy into
// it takes a fraction of the time one partition at a time takes.
const storeCopyParallel = 8

// testStoreCopyPartitionCopied, if set (tests only), is called after each
// partition is copied; an error stops the copy there, as an interruption.
var testStoreCopyPartitionCopied func(ctx context.Context, p int32) error

// storeSide is one end of a copy: its store, what to call it, and how to
// let it go.
type storeSide struct {
	st    store.Store
	name  string
	close func() error
	// records counts the records of the etcd prefix's cohort cluster, in
	// any partition (nil for a data dir).
	records func(ctx context.Context) (int64, error)
	// cohortKeys counts the keys of the etcd prefix's cohort cluster (nil
	// for a data dir).
	cohortKeys func(ctx context.Context) (int64, error)
}

// A cohort cluster's keys under its prefix P are (store/etcd, cluster):
// its records, P d <partition, 4 bytes big endian> <key>, of the partitions
// -2, -1 and 0.. (at most 32767 coordinator partitions: their first byte
// is 0); the node registrations P nodes/<id> and the partition ownership
// P own/<p>, both a decimal number; and the compaction turn, P compaction.
// Only these are its. Another cluster's prefix may extend P (/cohort2/
// beside /cohort, /cohort/dev/ or /cohort/nodes/eu/ beside /cohort/), and
// then its keys are under P d, P nodes/ or P own/ too; but a prefix is
// valid UTF-8 without NUL (node.ClusterConfig), so the byte after P d in
// its keys is neither 0 nor 0xff, and after P nodes/ or P own/ comes no
// decimal number alone: no key of it is one of P's.

// keyRange is the etcd keys from from up to end (excluded).
type keyRange struct{ from, end string }

// recordRanges are the key ranges of the records of the cluster under
// prefix: the coordinator partitions (first byte 0) and the catalog and
// security partitions (-1 and -2: 0xff 0xff 0xff 0xff and ... 0xfe).
func recordRanges(prefix string) []keyRange {
	d := prefix + "d"
	return []keyRange{{d, d + "\x01"}, {d + "\xff\xff\xff\xfe", prefix + "e"}}
}

// decimalSuffix reports whether key is sub followed by a number as cohort
// writes it (strconv.Itoa): a node id or a partition, not a key of
// another cluster whose prefix starts with sub.
func decimalSuffix(key, sub string) bool {
	rest, ok := strings.CutPrefix(key, sub)
	if !ok {
		return false
	}
	n, err := strconv.Atoi(rest)
	return err == nil && strconv.Itoa(n) == rest
}

// etcdctlQuote spells key as a double-quoted string that etcdctl txn
// reads back as key, byte for byte (it unquotes such a string as Go
// does): printable ASCII stays as it is, save the quote and the
// backslash, which are escaped; every other byte (the partition bytes
// 0x01 and 0xff, a prefix's non-ASCII letters or control characters) is
// written \xNN. The result is ASCII only, so no shell, code page or
// text encoding on the way to etcdctl changes it.
func etcdctlQuote(key string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, c := range []byte(key) {
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c >= 0x20 && c < 0x7f:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, `\x%02x`, c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// etcdDeleteTxn is the input of etcdctl txn (on its standard input, or
// typed after etcdctl txn -i) that deletes, in one transaction, the
// records and the compaction turn of the cohort cluster under prefix and
// no other key (registrations and ownership are on the nodes' leases:
// they go when the nodes stop). Its sections: no comparison (an empty
// line), the deletions, an empty line, no failure request (an empty
// line). The keys are etcdctlQuote'd, and "--" ends the options of del,
// so a prefix starting with "-" is a key, not an option.
func etcdDeleteTxn(prefix string) string {
	var b strings.Builder
	b.WriteString("\n")
	for _, r := range recordRanges(prefix) {
		b.WriteString("del -- " + etcdctlQuote(r.from) + " " + etcdctlQuote(r.end) + "\n")
	}
	b.WriteString("del -- " + etcdctlQuote(etcdstore.CompactionKey(prefix)) + "\n")
	b.WriteString("\n\n")
	return b.String()
}

// etcdDeleteRule marks, before and after it, the etcdctl txn input in a
// refusal of a destination that is not empty.
const etcdDeleteRule = "-----"

func storeCopy(e env, f storeCopyFlags) error {
	switch {
	case (f.fromDir == "") == (f.fromEtcd == ""):
		return usagef("store copy: give the source: --from-data-dir or --from-etcd (one of them)")
	case (f.toDir == "") == (f.toEtcd == ""):
		return usagef("store copy: give the destination: --to-data-dir or --to-etcd (one of them)")
	case f.fromDir != "" && f.toDir != "":
		return usagef("store copy: from a data directory to another: copy it with cohort serve --backup-dir (SIGUSR1) instead")
	case f.fromEtcd != "" && f.toEtcd != "":
		return usagef("store copy: from etcd to etcd: give one side as a data directory")
	case f.prefix == "":
		return usagef("store copy: --etcd-prefix is empty")
	case (f.cert == "") != (f.key == ""):
		return usagef("--etcd-cert and --etcd-key: give both")
	case f.timeout <= 0:
		return usagef("store copy: --timeout %s: want more than 0", f.timeout)
	}
	for flagName, list := range map[string]string{"--from-etcd": f.fromEtcd, "--to-etcd": f.toEtcd} {
		if _, err := etcdEndpoints(flagName, list); err != nil {
			return err
		}
	}
	// SIGINT (Ctrl-C) or SIGTERM stops the copy where it is, to say so
	// and what it leaves; a second one kills at once.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, stop)
	// incomplete is the error of a copy that wrote to dst and failed.
	var dstName string
	incomplete := func(what string, err error) error {
		if ctx.Err() != nil {
			what = "interrupted by a signal while " + what
		}
		return fmt.Errorf("store copy: %s: %w; %s is incomplete (no node starts on it): empty it before copying again",
			what, err, dstName)
	}
	log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	// The destination is checked first, the source then opened (a data
	// directory is locked from then on) and read, and a destination
	// directory made last: a refused copy leaves both as they were.
	var dst, src *storeSide
	var err error
	if f.toDir != "" {
		err = emptyDataDir(f.toDir)
	} else {
		dst, err = openEtcd(ctx, f, f.toEtcd, log, e.stderr, false)
	}
	if err != nil {
		return err
	}
	defer func() {
		if dst != nil {
			dst.close()
		}
	}()
	if f.fromDir != "" {
		src, err = sourceDataDir(f.fromDir, log)
	} else {
		src, err = openEtcd(ctx, f, f.fromEtcd, log, e.stderr, true)
	}
	if err != nil {
		return err
	}
	defer src.close()

	n, parts, err := node.StorePartitions(ctx, src.st)
	if errors.Is(err, node.ErrNoPartitionCount) {
		return fmt.Errorf("store copy: %s holds no cohort state (no partition count in its catalog): is it the right one? "+
			"(a store of a version before the count was recorded: start and stop a node of this version on it once)", src.name)
	}
	if err != nil {
		return fmt.Errorf("store copy: %s: %w", src.name, err)
	}
	// Read the source whole before writing anything: a record the
	// destination cannot hold (etcd's request size) stops the copy here.
	var dstLimit any // a data directory takes any record
	if dst != nil {
		dstLimit = dst.st
	}
	copyOpts := storecopy.Options{Parallel: storeCopyParallel}
	want, err := storecopy.SummarizeAll(ctx, src.st, parts, copyOpts)
	if err != nil {
		return fmt.Errorf("store copy: %s: %w", src.name, err)
	}
	for _, s := range want {
		if lim, ok := dstLimit.(store.RecordLimiter); ok && lim.MaxRecordBytes() > 0 && s.MaxRecord > lim.MaxRecordBytes() {
			return fmt.Errorf("store copy: %s: partition %d holds a record of %d bytes, more than %s takes (%d bytes); nothing was copied",
				src.name, s.Partition, s.MaxRecord, dst.name, lim.MaxRecordBytes())
		}
	}
	if src.records != nil {
		// Records in partitions no node reads (none are written) would
		// be left behind unnoticed: refuse to leave them.
		var total int64
		for _, s := range want {
			total += s.Records
		}
		if k, err := src.records(ctx); err != nil {
			return fmt.Errorf("store copy: %s: %w", src.name, err)
		} else if k != total {
			return fmt.Errorf("store copy: %s holds %d records, %d of them in the partitions a node with --partitions %d reads; "+
				"the others would not be copied, so nothing was", src.name, k, total, n)
		}
	}
	if f.toDir != "" {
		// Made only now: a refused copy leaves no directory behind.
		if err = emptyDataDir(f.toDir); err != nil {
			return err
		}
		if dst, err = openDataDir(f.toDir, log); err != nil {
			return fmt.Errorf("store copy: --to-data-dir %s: %w", f.toDir, err)
		}
	}
	// The destination records first, as its partition count, a value no
	// node starts on (node.CopyIncompleteRecord); the source's count
	// replaces it once every partition is copied and verified. A copy cut
	// short (Ctrl-C, a crash, etcd gone) is thus never served.
	dstName = dst.name
	marker := node.CopyIncompleteRecord()
	if err := dst.st.Append(ctx, node.CatalogPartition, []store.Record{marker}); err != nil {
		return fmt.Errorf("store copy: writing to %s: %w; %s may hold a record of the copy: empty it before copying again", dst.name, err, dst.name)
	}
	var count store.Record // the source's partition count, written last
	copyOpts.Skip = func(p int32, r store.Record) bool {
		if p != node.CatalogPartition || !node.IsPartitionCount(r.Key) {
			return false
		}
		count = store.Record{Key: append([]byte(nil), r.Key...), Value: append([]byte{}, r.Value...)}
		return true
	}
	var changedMu sync.Mutex
	var changed error
	_, err = storecopy.CopyAll(ctx, src.st, dst.st, parts, copyOpts, func(s storecopy.Stats) error {
		if d := storecopy.Diff(want[slices.Index(parts, s.Partition):][:1], []storecopy.Stats{s}); d != nil {
			err := fmt.Errorf("store copy: %s changed while it was copied (%s): is a node running on it? %s is incomplete: empty it before copying again",
				src.name, d[0], dst.name)
			changedMu.Lock()
			changed = cmp.Or(changed, err)
			changedMu.Unlock()
			return err
		}
		if testStoreCopyPartitionCopied != nil {
			return testStoreCopyPartitionCopied(ctx, s.Partition)
		}
		return nil
	})
	changedMu.Lock()
	defer changedMu.Unlock()
	switch {
	case changed != nil && err != nil:
		return changed
	case err != nil:
		return incomplete(fmt.Sprintf("copying %s to %s", src.name, dst.name), err)
	}

	// Read back what the destination holds, from disk for a data dir.
	if f.toDir != "" {
		err := dst.close()
		dst = nil
		if err != nil {
			return fmt.Errorf("store copy: closing %s: %w", f.toDir, err)
		}
		if dst, err = openDataDir(f.toDir, log); err != nil {
			return incomplete("reading "+dstName+" back", err)
		}
	}
	// What the destination should hold until the count is written.
	wantNow := slices.Clone(want)
	for i := range wantNow {
		if wantNow[i].Partition == node.CatalogPartition {
			wantNow[i] = wantNow[i].Replace(count, marker)
		}
	}
	var total int64
	got, err := storecopy.SummarizeAll(ctx, dst.st, parts, copyOpts)
	if err != nil {
		return incomplete("reading "+dst.name+" back", err)
	}
	diff := storecopy.Diff(wantNow, got)
	for _, s := range want {
		total += s.Records
	}
	if dst.cohortKeys != nil {
		// Nothing but what was copied under the prefix (a node started
		// on it meanwhile would have registered).
		if k, err := dst.cohortKeys(ctx); err != nil {
			return incomplete("reading "+dst.name+" back", err)
		} else if k != total {
			diff = append(diff, fmt.Sprintf("%d cohort keys under the prefix, %d records copied", k, total))
		}
	}
	printCopySummary(e.stdout, src.name, dst.name, n, want)
	if diff != nil {
		return fmt.Errorf("store copy: %s does not hold what %s holds:\n%s\nno node starts on it: empty it and copy again",
			dst.name, src.name, strings.Join(diff, "\n"))
	}
	// Verified: the partition count makes the destination servable.
	if err := dst.st.Append(ctx, node.CatalogPartition, []store.Record{count}); err != nil {
		return incomplete("writing the partition count to "+dst.name, err)
	}
	if s, err := storecopy.Summarize(ctx, dst.st, node.CatalogPartition); err != nil {
		return incomplete("reading "+dst.name+" back", err)
	} else if d := storecopy.Diff(want[slices.Index(parts, node.CatalogPartition):][:1], []storecopy.Stats{s}); d != nil {
		return fmt.Errorf("store copy: %s does not hold what %s holds:\n%s\ndo not start nodes on it: empty it and copy again",
			dst.name, src.name, strings.Join(d, "\n"))
	}
	if f.toDir != "" {
		err := dst.close()
		dst.close = func() error { return nil }
		if err != nil {
			return fmt.Errorf("store copy: closing %s: %w", f.toDir, err)
		}
	}
	start := "start its nodes"
	if f.toDir != "" {
		start = "start the node on it"
	}
	fmt.Fprintf(e.stdout, "verified: %s holds the same records as %s (count, bytes and SHA-256 digest of every partition); "+
		"%s with --partitions %d\n", dst.name, src.name, start, n)
	return nil
}

// printCopySummary prints the records copied by partition kind.
func printCopySummary(w io.Writer, from, to string, n int, stats []storecopy.Stats) {
	fmt.Fprintf(w, "copied %s to %s\n", from, to)
	t := newTable(w)
	fmt.Fprintln(t, "PARTITIONS\tRECORDS\tBYTES")
	var coord, all storecopy.Stats
	for _, s := range stats {
		all.Records, all.Bytes = all.Records+s.Records, all.Bytes+s.Bytes
		if s.Partition >= 0 {
			coord.Records, coord.Bytes = coord.Records+s.Records, coord.Bytes+s.Bytes
		}
	}
	fmt.Fprintf(t, "coordinator 0..%d (groups, offsets, history)\t%d\t%d\n", n-1, coord.Records, coord.Bytes)
	for _, kind := range []struct {
		p    int32
		name string
	}{{node.CatalogPartition, "catalog %d (topics, group configs, partition count)"}, {authstate.Partition, "security %d (SCRAM users, ACLs)"}} {
		for _, s := range stats {
			if s.Partition == kind.p {
				fmt.Fprintf(t, kind.name+"\t%d\t%d\n", s.Partition, s.Records, s.Bytes)
			}
		}
	}
	fmt.Fprintf(t, "total\t%d\t%d\n", all.Records, all.Bytes)
	t.Flush()
}

// openDataDir opens the store in dir.
func openDataDir(dir string, log *slog.Logger) (*storeSide, error) {
	st, err := disk.Open(disk.Options{Dir: dir, Logger: log, MaxRecordBytes: -1})
	if err != nil {
		return nil, err
	}
	return &storeSide{st: st, name: "data directory " + dir, close: st.Close}, nil
}

// sourceDataDir opens the data directory to copy from: a store, and no
// node running on it.
func sourceDataDir(dir string, log *slog.Logger) (*storeSide, error) {
	if !disk.IsStore(dir) {
		notStore := fmt.Sprintf("store copy: --from-data-dir %s is not a cohort data directory (it has no COHORT-STORE file)", dir)
		switch subs := disk.SubStores(dir); len(subs) {
		case 0:
			return nil, errors.New(notStore)
		case 1:
			// examples/systemd's /var/lib/cohort holds data/ and backups/.
			return nil, fmt.Errorf("%s, but its subdirectory %s is one (a service's state directory holds the node's "+
				"data directory, as examples/systemd's /var/lib/cohort holds data/): give --from-data-dir %s",
				notStore, subs[0], filepath.Join(dir, subs[0]))
		default:
			return nil, fmt.Errorf("%s, but %d of its subdirectories are, e.g. %s (the backups of a --backup-dir): "+
				"give --from-data-dir the node's data directory (cohort serve --data-dir), or the one backup to copy",
				notStore, len(subs), subs[0])
		}
	}
	s, err := openDataDir(dir, log)
	if errors.Is(err, disk.ErrLocked) {
		return nil, fmt.Errorf("store copy: --from-data-dir %s is in use: a cohort node is running on it (it holds the directory's LOCK); "+
			"stop that node (cohort serve --data-dir %s) and copy again", dir, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("store copy: --from-data-dir %s: %w", dir, err)
	}
	return s, nil
}

// emptyDataDir refuses a data directory to copy into that is not missing
// or empty.
func emptyDataDir(dir string) error {
	names, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("store copy: --to-data-dir: %w", err)
	}
	if len(names) > 0 {
		what := "files"
		if disk.IsStore(dir) {
			what = "a cohort store"
		}
		return fmt.Errorf("store copy: --to-data-dir %s is not empty (it holds %s, e.g. %s); nothing was copied: "+
			"give a missing or empty directory (move this one aside if it is to be replaced)", dir, what, names[0].Name())
	}
	return nil
}

// leasesLapse says, for a refusal of a source in use, when the leases of
// nodes that stopped uncleanly (killed, their machine lost) lapse: within
// the longest time any of leases has left, which etcd tells.
func leasesLapse(ctx context.Context, cli *clientv3.Client, timeout time.Duration, leases map[clientv3.LeaseID]bool) string {
	const generic = " (a killed node's leases lapse after its --lease-ttl)"
	left := int64(0)
	for id := range leases {
		if id == clientv3.NoLease {
			return generic
		}
		rctx, cancel := context.WithTimeout(ctx, timeout)
		r, err := cli.TimeToLive(rctx, id)
		cancel()
		if err != nil {
			return generic
		}
		left = max(left, r.TTL)
	}
	if left <= 0 {
		return " (the leases have just lapsed: copy again)"
	}
	return fmt.Sprintf(" (if the nodes stopped uncleanly, killed or their machine lost, their leases lapse within %d s: copy again then)", left)
}

// openEtcd connects to the etcd at endpoints. As a source, no node may be
// running under the prefix; as a destination, the prefix must hold no
// cohort key, and a refusal prints to stderr the etcdctl txn input that
// deletes them.
func openEtcd(ctx context.Context, f storeCopyFlags, endpoints string, log *slog.Logger, stderr io.Writer, source bool) (*storeSide, error) {
	flagName := "--to-etcd"
	if source {
		flagName = "--from-etcd"
	}
	eps, err := etcdEndpoints(flagName, endpoints) // checked by storeCopy
	if err != nil {
		return nil, err
	}
	cc := &node.ClusterConfig{Endpoints: eps, CAFile: f.ca, CertFile: f.cert, KeyFile: f.key, Prefix: f.prefix,
		Username: f.user, DialTimeout: f.timeout}
	if cc.Password, err = etcdPassword(f.user, f.passwordFile); err != nil {
		return nil, err
	}
	if f.passwordFile != "" && clientconfig.Exposed(f.passwordFile) {
		fmt.Fprintf(stderr, "cohort: warning: %s\n", exposedWarning(f.passwordFile))
	}
	cli, err := node.DialEtcd(ctx, cc)
	if err != nil {
		if ctx.Err() != nil {
			// Ctrl-C while connecting: nothing was read or written.
			return nil, fmt.Errorf("store copy: %s: interrupted by a signal while connecting to etcd; nothing was copied", flagName)
		}
		return nil, fmt.Errorf("store copy: %s: %w", flagName, err)
	}
	name := fmt.Sprintf("etcd %s prefix %q", strings.Join(eps, ","), f.prefix)
	count := func(ctx context.Context, r keyRange) (int64, error) {
		rctx, cancel := context.WithTimeout(ctx, f.timeout)
		defer cancel()
		opts := []clientv3.OpOption{clientv3.WithCountOnly()}
		if r.end != "" {
			opts = append(opts, clientv3.WithRange(r.end))
		}
		resp, err := cli.Get(rctx, r.from, opts...)
		if err != nil {
			return 0, err
		}
		return resp.Count, nil
	}
	records := func(ctx context.Context) (int64, error) {
		var n int64
		for _, r := range recordRanges(f.prefix) {
			k, err := count(ctx, r)
			if err != nil {
				return 0, err
			}
			n += k
		}
		return n, nil
	}
	// leased reads the registrations (nodes/<id>) or the ownership keys
	// (own/<p>) of the prefix's cluster, values too (etcd's keys-only
	// reads leave leases out); keys of another cluster whose prefix
	// starts with P nodes/ or P own/ are left out.
	leased := func(ctx context.Context, sub string) ([]*mvccpb.KeyValue, error) {
		rctx, cancel := context.WithTimeout(ctx, f.timeout)
		defer cancel()
		resp, err := cli.Get(rctx, f.prefix+sub, clientv3.WithPrefix())
		if err != nil {
			return nil, err
		}
		kvs := resp.Kvs[:0]
		for _, kv := range resp.Kvs {
			if decimalSuffix(string(kv.Key), f.prefix+sub) {
				kvs = append(kvs, kv)
			}
		}
		return kvs, nil
	}
	cohortKeys := func(ctx context.Context) (int64, error) {
		n, err := records(ctx)
		if err != nil {
			return 0, err
		}
		k, err := count(ctx, keyRange{from: etcdstore.CompactionKey(f.prefix)})
		if err != nil {
			return 0, err
		}
		n += k
		for _, sub := range []string{"nodes/", "own/"} {
			kvs, err := leased(ctx, sub)
			if err != nil {
				return 0, err
			}
			n += int64(len(kvs))
		}
		return n, nil
	}
	// A node registers under nodes/<id> and owns partitions under
	// own/<p>, both keys on its lease: either means a node is (or was a
	// moment ago) serving this state, which a copy neither reads from
	// nor writes over.
	var ids []string
	owned := 0
	leases := map[clientv3.LeaseID]bool{}
	for _, sub := range []string{"nodes/", "own/"} {
		kvs, err := leased(ctx, sub)
		if err != nil {
			cli.Close()
			return nil, fmt.Errorf("store copy: %s: %w", name, err)
		}
		for _, kv := range kvs {
			leases[clientv3.LeaseID(kv.Lease)] = true
			if sub == "nodes/" {
				ids = append(ids, strings.TrimPrefix(string(kv.Key), f.prefix+sub))
			} else {
				owned++
			}
		}
	}
	slices.SortFunc(ids, func(a, b string) int {
		x, _ := strconv.Atoi(a)
		y, _ := strconv.Atoi(b)
		return x - y
	})
	if len(ids) > 0 || owned > 0 {
		stop := fmt.Sprintf("stop every node (cohort serve --etcd-prefix %s) and copy again", f.prefix) + leasesLapse(ctx, cli, f.timeout, leases)
		if !source {
			stop = "nothing was copied: " + stop
		}
		cli.Close()
		if len(ids) > 0 {
			return nil, fmt.Errorf("store copy: %s is in use: cohort nodes are running on it (node ids %s: their leases under nodes/ are live); %s",
				name, strings.Join(ids, ", "), stop)
		}
		return nil, fmt.Errorf("store copy: %s is in use: %d coordinator partitions are owned by a node (their leases under own/ are live); %s",
			name, owned, stop)
	}
	if !source {
		k, err := cohortKeys(ctx)
		if err != nil {
			cli.Close()
			return nil, fmt.Errorf("store copy: %s: %w", name, err)
		}
		if k > 0 {
			cli.Close()
			// An error is printed as one line: the input, lines of its
			// own, goes before it.
			fmt.Fprintf(stderr, "etcdctl txn input that deletes the cohort keys of %s and no other key, between the %s lines:\n%s\n%s%s\n",
				name, etcdDeleteRule, etcdDeleteRule, etcdDeleteTxn(f.prefix), etcdDeleteRule)
			return nil, fmt.Errorf("store copy: %s is not empty (%d cohort keys under it: records, compaction turn); nothing was copied: "+
				"give another --etcd-prefix, or, if they are to be replaced, delete them and no other key (not etcdctl del --prefix %s: "+
				"another cluster's prefix may start with it), in one transaction: give etcdctl txn, with the flags that reach this etcd, "+
				"the lines between the %s lines above on its standard input, the empty ones included (saved to a file F: "+
				"etcdctl txn < F, in a POSIX shell or cmd.exe; in PowerShell: Get-Content F | etcdctl txn), or type them after etcdctl txn -i",
				name, k, f.prefix, etcdDeleteRule)
		}
	}
	st, err := etcdstore.New(etcdstore.Options{Client: cli, CloseClient: true, Prefix: f.prefix, Logger: log, Timeout: f.timeout})
	if err != nil {
		cli.Close()
		return nil, err
	}
	return &storeSide{st: st, name: name, close: st.Close, cohortKeys: cohortKeys, records: records}, nil
}
