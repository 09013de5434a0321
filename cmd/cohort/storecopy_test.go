package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/node"
	"github.com/cohort-dev/cohort/store"
	"github.com/cohort-dev/cohort/store/disk"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

// copyNode starts a node with a SASL_PLAINTEXT listener whose super user is
// admin, with its state in dataDir or, with cluster set, in etcd.
func copyNode(t *testing.T, dataDir string, cluster *node.ClusterConfig) *node.Node {
	t.Helper()
	ls, err := node.ParseListeners("SASL_PLAINTEXT://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := group.Defaults()
	cfg.InitialRebalanceDelay = 0
	n, err := node.Start(node.Config{Listeners: ls, Group: cfg, DataDir: dataDir, Cluster: cluster, NodeID: 1, ClusterID: "copy",
		Partitions: 4, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Security: &node.SecurityConfig{BootstrapUser: "admin", BootstrapPassword: "admin-pw", SuperUsers: []string{"User:admin"},
			FailedAuthDelay: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	testwait.For(t, 30*time.Second, "the node serving every partition", func() bool {
		ready, _ := n.Ready()
		return ready && (cluster == nil || len(n.Cluster().OwnedPartitions()) == 4)
	})
	return n
}

// kadmAs is an admin client of addr logged in as user over SCRAM-SHA-256.
func kadmAs(t *testing.T, addr, user, pass string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()),
		kgo.RetryTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// checkMovedState checks, through the node at addr, what
// TestStoreCopyBothWays created on the first node: the topic, the committed
// offsets, the group config, the user app logging in, and its ACL (app may
// describe topic orders and no other topic).
func checkMovedState(t *testing.T, where, addr string, epoch848 int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin := kadmAs(t, addr, "admin", "admin-pw")
	offs, err := admin.FetchOffsets(ctx, "classic-g")
	if err != nil {
		t.Fatalf("%s: OffsetFetch: %v", where, err)
	}
	for p, want := range map[int32]int64{0: 42, 1: 7, 2: 1000} {
		if o, ok := offs.Lookup("orders", p); !ok || o.Err != nil || o.At != want || o.Metadata != "m" {
			t.Errorf("%s: classic-g's offset of orders/%d: %+v %v, want %d with metadata m", where, p, o, ok, want)
		}
	}
	if out := (cli{t: t}).ok(append([]string{"group", "config", "classic-g"}, saslFlags(t, addr, "admin", "admin-pw")...)...); !regexp.MustCompile(`consumer.session.timeout.ms\s+60000`).MatchString(out) {
		t.Errorf("%s: classic-g's config:\n%s\nwant consumer.session.timeout.ms 60000", where, out)
	}

	members := table((cli{t: t}).ok(append([]string{"group", "describe", "g848", "--members"}, saslFlags(t, addr, "admin", "admin-pw")...)...))
	if want := fmt.Sprintf("g848 m848-0001 - hand 127.0.0.1 - %d orders orders(0,1,2)", epoch848); !strings.Contains(members, want) {
		t.Errorf("%s: the KIP-848 group g848:\n%s\nwant a line %q", where, members, want)
	}

	app := kadmAs(t, addr, "app", "app-pw")
	topics, err := app.ListTopics(ctx, "orders")
	if err != nil {
		t.Fatalf("%s: app (SCRAM login and Metadata): %v", where, err)
	}
	if d, ok := topics["orders"]; !ok || d.Err != nil || len(d.Partitions) != 3 {
		t.Errorf("%s: app sees topic orders as %+v (%v), want 3 partitions", where, d, ok)
	}
	if _, err := app.ListTopics(ctx, "secret"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("%s: app describes topic secret: %v, want TOPIC_AUTHORIZATION_FAILED (no ACL lets it)", where, err)
	}
	if _, err := kadmAs(t, addr, "app", "wrong").ListTopics(ctx); err == nil {
		t.Errorf("%s: app logged in with a wrong password", where)
	}
}

// TestStoreCopyBothWays moves a node's state from its data directory into
// etcd, serves it from a node in cluster mode, and moves it back into a new
// data directory, served again: committed offsets, a topic, a group config,
// a SCRAM user and an ACL, created over the Kafka protocol. On the way
// every refusal: the source in use (a node running on the data directory,
// a live node under the etcd prefix) and a destination that is not empty;
// each leaves the destination as it was.
func TestStoreCopyBothWays(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	ep := strings.Join(ec.Endpoints(), ",")
	dir := filepath.Join(t.TempDir(), "data")
	n := copyNode(t, dir, nil)
	addr := n.ListenerAddr("SASL_PLAINTEXT")
	c := cli{t: t}
	as := saslFlags(t, addr, "admin", "admin-pw")
	c.ok(append([]string{"topic", "create", "orders", "--partitions", "3"}, as...)...)
	c.ok(append([]string{"topic", "create", "secret", "--partitions", "1"}, as...)...)
	c.ok(append([]string{"user", "set", "app", "--password-file", writeTemp(t, "app-pw", "app-pw\n")}, as...)...)
	c.ok(append([]string{"acl", "add", "--principal", "User:app", "--operation", "describe", "--permission", "allow", "--topic", "orders"}, as...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	offs := kadm.Offsets{}
	for p, at := range map[int32]int64{0: 42, 1: 7, 2: 1000} {
		offs.Add(kadm.Offset{Topic: "orders", Partition: p, At: at, LeaderEpoch: -1, Metadata: "m"})
	}
	if r, err := kadmAs(t, addr, "admin", "admin-pw").CommitOffsets(ctx, "classic-g", offs); err != nil || r.Error() != nil {
		t.Fatalf("OffsetCommit: %v %v", err, r.Error())
	}
	c.ok(append([]string{"group", "config", "classic-g", "--set", "consumer.session.timeout.ms=60000"}, as...)...)
	// A KIP-848 group: one member, driven by hand, given every partition
	// of orders (it stays a member for its session timeout, 45 s, longer
	// than the test runs).
	raw, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID("hand"),
		kgo.SASL(scram.Auth{User: "admin", Pass: "admin-pw"}.AsSha256Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.MemberEpoch = "g848", "m848-0001", 0
	hb.RebalanceTimeoutMillis, hb.SubscribedTopicNames, hb.Topics = 60000, []string{"orders"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	resp := heartbeat(t, raw, hb)
	if resp.Assignment == nil || len(resp.Assignment.Topics) != 1 || len(resp.Assignment.Topics[0].Partitions) != 3 {
		t.Fatalf("the KIP-848 member's assignment: %+v", resp.Assignment)
	}
	epoch := resp.MemberEpoch
	hb.MemberEpoch, hb.Topics = epoch, []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: resp.Assignment.Topics[0].TopicID, Partitions: []int32{0, 1, 2}}}
	heartbeat(t, raw, hb) // it owns them now
	checkMovedState(t, "the first node", addr, epoch)

	toEtcd := []string{"store", "copy", "--from-data-dir", dir, "--to-etcd", ep, "--etcd-prefix", "/moved/"}
	c.fails(1, toEtcd, "--from-data-dir "+dir+" is in use: a cohort node is running on it", "stop that node")
	cli := ec.Client(t)
	keys := func(prefix string) int64 {
		t.Helper()
		r, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return r.Count
	}
	if k := keys("/moved/"); k != 0 {
		t.Fatalf("a refused copy wrote %d keys", k)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	out := c.ok(toEtcd...)
	for _, want := range []string{"copied data directory " + dir + ` to etcd ` + ep + ` prefix "/moved/"`,
		"coordinator 0..3", "catalog -1", "security -2", "verified: ", "--partitions 4"} {
		if !strings.Contains(out, want) {
			t.Errorf("copy to etcd printed no %q:\n%s", want, out)
		}
	}
	t.Logf("copy to etcd:\n%s", out)
	copied := keys("/moved/")
	c.fails(1, toEtcd, `prefix "/moved/" is not empty`, "nothing was copied")
	if k := keys("/moved/"); k != copied {
		t.Fatalf("a refused copy changed the destination: %d keys, then %d", copied, k)
	}

	cn := copyNode(t, "", &node.ClusterConfig{Endpoints: ec.Endpoints(), Prefix: "/moved/", LeaseTTL: testLeaseTTL})
	checkMovedState(t, "the node in cluster mode", cn.ListenerAddr("SASL_PLAINTEXT"), epoch)

	back := filepath.Join(t.TempDir(), "back")
	toDir := []string{"store", "copy", "--from-etcd", ep, "--etcd-prefix", "/moved/", "--to-data-dir", back}
	c.fails(1, toDir, `prefix "/moved/" is in use`, "node ids 1", "stop every node")
	if _, err := os.Stat(back); !os.IsNotExist(err) {
		t.Fatalf("a refused copy made %s: %v", back, err)
	}
	if err := cn.Close(); err != nil {
		t.Fatal(err)
	}
	c.fails(1, []string{"store", "copy", "--from-etcd", ep, "--etcd-prefix", "/moved/", "--to-data-dir", dir},
		"--to-data-dir "+dir+" is not empty (it holds a cohort store", "nothing was copied")
	out = c.ok(toDir...)
	if !strings.Contains(out, "verified: data directory "+back) || !strings.Contains(out, "start the node on it with --partitions") {
		t.Errorf("copy to a data directory:\n%s", out)
	}
	nb := copyNode(t, back, nil)
	checkMovedState(t, "the node on the copied-back data directory", nb.ListenerAddr("SASL_PLAINTEXT"), epoch)
}

// diskStore writes recs, by partition, into a new store in a directory of
// its own and returns the directory.
func diskStore(t *testing.T, recs map[int32][]store.Record) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	st, err := disk.Open(disk.Options{Dir: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), MaxRecordBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	for p, rs := range recs {
		if err := st.Append(context.Background(), p, rs); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// etcdKeys counts the keys under prefix.
func etcdKeys(t *testing.T, cli *clientv3.Client, prefix string) int64 {
	t.Helper()
	r, err := cli.Get(context.Background(), prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return r.Count
}

// TestStoreCopyThroughEtcdTxnLimits copies a data directory whose
// coordinator partition holds 3,000 records (3 MB) into an etcd that takes
// at most 16 operations and 256 KiB a transaction: the copy learns etcd's
// limits, writes every record and verifies them, and the copy back equals
// the source.
func TestStoreCopyThroughEtcdTxnLimits(t *testing.T) {
	ec := etcdtest.StartWith(t, 1, func(c *embed.Config) {
		c.MaxTxnOps = 16
		c.MaxRequestBytes = 256 << 10
	})
	var recs []store.Record
	for i := range 3000 {
		recs = append(recs, store.Record{Key: fmt.Appendf(nil, "\x02offset-%05d", i), Value: bytes.Repeat([]byte{byte(i)}, 1000)})
	}
	dir := diskStore(t, map[int32][]store.Record{-1: {{Key: []byte("partitions"), Value: []byte("2")}}, 1: recs})
	c := cli{t: t}
	ep := strings.Join(ec.Endpoints(), ",")
	out := c.ok("store", "copy", "--from-data-dir", dir, "--to-etcd", ep)
	if !regexp.MustCompile(`coordinator 0\.\.1 .*\s3000\s+3\d{6}\n`).MatchString(out) || !strings.Contains(out, "verified: ") {
		t.Fatalf("copy into etcd with --max-txn-ops 16:\n%s", out)
	}
	if k := etcdKeys(t, ec.Client(t), "/cohort/d"); k != 3001 {
		t.Fatalf("%d record keys in etcd, want 3001", k)
	}
	back := filepath.Join(t.TempDir(), "back")
	out = c.ok("store", "copy", "--from-etcd", ep, "--to-data-dir", back)
	if !strings.Contains(out, "verified: ") {
		t.Fatalf("copy back:\n%s", out)
	}
}

// TestStoreCopyRefusals: what store copy refuses, each before it writes
// anything: a record larger than etcd takes, records in partitions outside
// the partition count, a source holding no cohort state, and command lines
// that do not say one source and one destination.
func TestStoreCopyRefusals(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	ep := strings.Join(ec.Endpoints(), ",")
	etcd := ec.Client(t)
	c := cli{t: t}

	big := diskStore(t, map[int32][]store.Record{-1: {{Key: []byte("partitions"), Value: []byte("1")}},
		0: {{Key: []byte("\x01group"), Value: make([]byte, 2<<20)}}})
	c.fails(1, []string{"store", "copy", "--from-data-dir", big, "--to-etcd", ep},
		"partition 0 holds a record of 2097158 bytes, more than etcd "+ep+` prefix "/cohort/" takes (1048576 bytes); nothing was copied`)
	if k := etcdKeys(t, etcd, "/cohort/"); k != 0 {
		t.Fatalf("a refused copy wrote %d keys", k)
	}

	// A record in partition 5 of a store of 2 partitions.
	for k, v := range map[string]string{"/stray/d\xff\xff\xff\xffpartitions": "2", "/stray/d\x00\x00\x00\x05k": "v"} {
		if _, err := etcd.Put(context.Background(), k, v); err != nil {
			t.Fatal(err)
		}
	}
	to := filepath.Join(t.TempDir(), "to")
	c.fails(1, []string{"store", "copy", "--from-etcd", ep, "--etcd-prefix", "/stray/", "--to-data-dir", to},
		`prefix "/stray/" holds 2 records, 1 of them in the partitions a node with --partitions 2 reads; the others would not be copied, so nothing was`)
	// A partition's ownership key without the node's (a node stopping).
	for k, v := range map[string]string{"/owned/d\xff\xff\xff\xffpartitions": "2", "/owned/own/0": "1", "/owned/own/1": "1"} {
		if _, err := etcd.Put(context.Background(), k, v); err != nil {
			t.Fatal(err)
		}
	}
	c.fails(1, []string{"store", "copy", "--from-etcd", ep, "--etcd-prefix", "/owned/", "--to-data-dir", to},
		`prefix "/owned/" is in use: 2 coordinator partitions are owned by a node`, "stop every node")
	// A node killed a moment ago: its registration on a lease of 60 s.
	lease, err := etcd.Grant(context.Background(), 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := etcd.Put(context.Background(), "/killed/d\xff\xff\xff\xffpartitions", "2"); err != nil {
		t.Fatal(err)
	}
	if _, err := etcd.Put(context.Background(), "/killed/nodes/3", "n", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	_, errOut, _ := c.run("store", "copy", "--from-etcd", ep, "--etcd-prefix", "/killed/", "--to-data-dir", to)
	if !regexp.MustCompile(`node ids 3: .*if the nodes stopped uncleanly, killed or their machine lost, their leases lapse within (60|59|58) s: copy again then`).MatchString(errOut) {
		t.Fatalf("a source with the lease of a node just killed:\n%s", errOut)
	}
	c.fails(1, []string{"store", "copy", "--from-etcd", ep, "--etcd-prefix", "/nothing/", "--to-data-dir", to},
		`etcd `+ep+` prefix "/nothing/" holds no cohort state`)
	empty := t.TempDir()
	c.fails(1, []string{"store", "copy", "--from-data-dir", empty, "--to-etcd", ep},
		"--from-data-dir "+empty+" is not a cohort data directory")
	if _, err := os.Stat(to); !os.IsNotExist(err) {
		t.Fatalf("a refused copy made %s: %v", to, err)
	}
	if entries, _ := os.ReadDir(empty); len(entries) != 0 {
		t.Fatalf("a refused copy wrote into its source %s: %v", empty, entries)
	}

	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"store"}, "store: want copy"},
		{[]string{"store", "move"}, `store: unknown action "move"`},
		{[]string{"store", "copy", "--to-etcd", ep}, "give the source"},
		{[]string{"store", "copy", "--from-data-dir", big, "--from-etcd", ep, "--to-data-dir", to}, "give the source"},
		{[]string{"store", "copy", "--from-data-dir", big}, "give the destination"},
		{[]string{"store", "copy", "--from-data-dir", big, "--to-data-dir", to}, "from a data directory to another"},
		{[]string{"store", "copy", "--from-etcd", ep, "--to-etcd", ep}, "from etcd to etcd"},
		{[]string{"store", "copy", "--from-data-dir", big, "--to-etcd", ep, "--etcd-password-file", writeTemp(t, "pw", "x")}, "needs --etcd-user"},
		{[]string{"store", "copy", "--from-data-dir", big, "--to-etcd", ep, "--etcd-cert", "c.pem"}, "--etcd-cert and --etcd-key: give both"},
		{[]string{"store", "copy", "x"}, `unexpected argument "x"`},
	} {
		c.fails(2, tc.args, tc.msg)
	}
	if k := etcdKeys(t, etcd, "/cohort/"); k != 0 {
		t.Fatalf("refused copies wrote %d keys", k)
	}
}

// TestStoreCopyEtcdAuth: against an etcd with authentication, the copy logs
// in as the user cohort serve would, its password from
// --etcd-password-file or COHORT_ETCD_PASSWORD; a wrong password is
// refused, naming the user; the password appears in no output.
func TestStoreCopyEtcdAuth(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	const prefix, pass = "/authed/", "etcd-pass-51c9"
	ec.EnableAuth(t, "root-pass", prefix, map[string]string{"cohort": pass}, "other")
	ep := strings.Join(ec.Endpoints(), ",")
	dir := diskStore(t, map[int32][]store.Record{-1: {{Key: []byte("partitions"), Value: []byte("1")}},
		0: {{Key: []byte("\x02offset"), Value: []byte("v")}}})
	c := cli{t: t}
	to := []string{"store", "copy", "--from-data-dir", dir, "--to-etcd", ep, "--etcd-prefix", prefix, "--etcd-user", "cohort"}
	for _, args := range [][]string{
		append(to, "--etcd-password-file", writeTemp(t, "wrong", "not-"+pass+"\n")),
		append(to[:len(to):len(to)], "--etcd-password-file", writeTemp(t, "pw", pass+"\n")),
	} {
		out, errOut, code := c.run(args...)
		wrong := strings.Contains(args[len(args)-1], "wrong")
		switch {
		case strings.Contains(out+errOut, pass):
			t.Fatalf("the password in the output:\n%s%s", out, errOut)
		case wrong && (code != 1 || !strings.Contains(errOut, `the etcd user "cohort" or its password is wrong`)):
			t.Fatalf("a wrong password: exit %d\n%s%s", code, out, errOut)
		case !wrong && (code != 0 || !strings.Contains(out, "verified: ")):
			t.Fatalf("the right password: exit %d\n%s%s", code, out, errOut)
		}
	}
	t.Setenv("COHORT_ETCD_PASSWORD", pass)
	out := c.ok("store", "copy", "--from-etcd", ep, "--etcd-prefix", prefix, "--etcd-user", "cohort",
		"--to-data-dir", filepath.Join(t.TempDir(), "back"))
	if !strings.Contains(out, "verified: ") || strings.Contains(out, pass) {
		t.Fatalf("copy back with COHORT_ETCD_PASSWORD:\n%s", out)
	}
}

// startFails starts a node like copyNode on dataDir or, with cluster set,
// on etcd, and returns the error of its start (nil: it started, and is
// closed again).
func startFails(t *testing.T, dataDir string, cluster *node.ClusterConfig) error {
	t.Helper()
	ls, err := node.ParseListeners("PLAINTEXT://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n, err := node.Start(node.Config{Listeners: ls, Group: group.Defaults(), DataDir: dataDir, Cluster: cluster, NodeID: 1,
		ClusterID: "copy", Partitions: 4, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err == nil {
		n.Close()
	}
	return err
}

// TestStoreCopyInterruptedIsNotServed: a copy cut short after the first
// coordinator partition (as by Ctrl-C, a crash or etcd going away) leaves
// a destination that no node starts on, whichever way it copied, and that
// says why; a second copy into it is refused as not empty.
func TestStoreCopyInterruptedIsNotServed(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	ep := strings.Join(ec.Endpoints(), ",")
	recs := map[int32][]store.Record{-1: {{Key: []byte("partitions"), Value: []byte("4")}}}
	for p := range int32(4) {
		recs[p] = []store.Record{{Key: fmt.Appendf(nil, "\x02offset-%d", p), Value: []byte("v")}}
	}
	dir := diskStore(t, recs)
	c := cli{t: t}
	c.ok("store", "copy", "--from-data-dir", dir, "--to-etcd", ep, "--etcd-prefix", "/full/")

	testStoreCopyPartitionCopied = func(_ context.Context, p int32) error {
		if p == 0 {
			return errors.New("interrupted here by the test")
		}
		return nil
	}
	defer func() { testStoreCopyPartitionCopied = nil }()
	const incomplete = "holds an incomplete copy"
	toEtcd := []string{"store", "copy", "--from-data-dir", dir, "--to-etcd", ep, "--etcd-prefix", "/cut/"}
	c.fails(1, toEtcd, "interrupted here by the test", `prefix "/cut/" is incomplete (no node starts on it)`)
	err := startFails(t, "", &node.ClusterConfig{Endpoints: ec.Endpoints(), Prefix: "/cut/", LeaseTTL: testLeaseTTL})
	if err == nil || !strings.Contains(err.Error(), incomplete) || !strings.Contains(err.Error(), "cohort store copy") {
		t.Fatalf("a node in cluster mode on an interrupted copy: %v", err)
	}
	back := filepath.Join(t.TempDir(), "back")
	c.fails(1, []string{"store", "copy", "--from-etcd", ep, "--etcd-prefix", "/cut/", "--to-data-dir", back}, incomplete)
	c.fails(1, toEtcd, `prefix "/cut/" is not empty`)

	c.fails(1, []string{"store", "copy", "--from-etcd", ep, "--etcd-prefix", "/full/", "--to-data-dir", back},
		"interrupted here by the test", "data directory "+back+" is incomplete")
	if err := startFails(t, back, nil); err == nil || !strings.Contains(err.Error(), incomplete) {
		t.Fatalf("a node on an interrupted copy into a data directory: %v", err)
	}
}

// TestStoreCopyBesideOtherClusters: another cluster's keys under a longer
// prefix (/cohort2/ beside --etcd-prefix /cohort, /cohort/eu/ beside
// /cohort/) neither make the destination "not empty" nor count in its
// verification, and are left as they were; a destination that does hold
// cohort keys is refused with a deletion that touches only them.
func TestStoreCopyBesideOtherClusters(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	ep := strings.Join(ec.Endpoints(), ",")
	etcd := ec.Client(t)
	others := map[string]string{"/cohort2/d\xff\xff\xff\xffpartitions": "3", "/cohort2/nodes/7": "n", "/cohort2/compaction": "",
		"/cohort/eu/d\xff\xff\xff\xffpartitions": "5", "/cohort/eu/own/0": "7"}
	for k, v := range others {
		if _, err := etcd.Put(context.Background(), k, v); err != nil {
			t.Fatal(err)
		}
	}
	dir := diskStore(t, map[int32][]store.Record{-1: {{Key: []byte("partitions"), Value: []byte("1")}},
		0: {{Key: []byte("\x02offset"), Value: []byte("v")}}})
	c := cli{t: t}
	for _, prefix := range []string{"/cohort", "/cohort/"} {
		out := c.ok("store", "copy", "--from-data-dir", dir, "--to-etcd", ep, "--etcd-prefix", prefix)
		if !strings.Contains(out, "verified: ") {
			t.Fatalf("copy into %s:\n%s", prefix, out)
		}
		back := filepath.Join(t.TempDir(), "back")
		if out := c.ok("store", "copy", "--from-etcd", ep, "--etcd-prefix", prefix, "--to-data-dir", back); !strings.Contains(out, "verified: ") {
			t.Fatalf("copy back from %s:\n%s", prefix, out)
		}
	}
	for k, v := range others {
		r, err := etcd.Get(context.Background(), k)
		if err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != v {
			t.Fatalf("another cluster's key %q: %v %v", k, r, err)
		}
	}
	c.fails(1, []string{"store", "copy", "--from-data-dir", dir, "--to-etcd", ep, "--etcd-prefix", "/cohort"},
		`prefix "/cohort" is not empty (2 cohort keys under it`,
		"\n"+etcdDeleteRule+"\n\n"+`del -- "/cohortd" "/cohortd\x01"`+"\n"+`del -- "/cohortd\xff\xff\xff\xfe" "/cohorte"`+"\n"+
			`del -- "/cohortcompaction"`+"\n\n\n"+etcdDeleteRule+"\n")
}

// TestStoreCopySIGINT: Ctrl-C (SIGINT) during a copy, here while the
// first partitions copied wait (COHORT_TEST_STORECOPY_PAUSE), stops it with
// exit 1 and a message saying it was interrupted and that the destination
// is incomplete; no node starts on what it wrote.
func TestStoreCopySIGINT(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	recs := map[int32][]store.Record{-1: {{Key: []byte("partitions"), Value: []byte("4")}}}
	for p := range int32(4) {
		recs[p] = []store.Record{{Key: fmt.Appendf(nil, "\x02offset-%d", p), Value: []byte("v")}}
	}
	dir := diskStore(t, recs)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := cohortCommand(ctx, t, "store", "copy", "--from-data-dir", dir, "--to-etcd", strings.Join(ec.Endpoints(), ","),
		"--etcd-prefix", "/sigint/")
	cmd.Env = append(cmd.Env, "COHORT_TEST_STORECOPY_PAUSE=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(stderr)
	line, err := r.ReadString('\n')
	if err != nil || !strings.Contains(line, "copied, waiting") {
		t.Fatalf("the copy's first line: %q %v", line, err)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(r)
	err = cmd.Wait()
	code := cmd.ProcessState.ExitCode()
	if code != 1 || !strings.Contains(string(rest), "interrupted by a signal while copying") ||
		!strings.Contains(string(rest), `prefix "/sigint/" is incomplete (no node starts on it): empty it`) {
		t.Fatalf("a copy stopped by SIGINT: %v, exit %d, stderr:\n%s%s", err, code, line, rest)
	}
	err = startFails(t, "", &node.ClusterConfig{Endpoints: ec.Endpoints(), Prefix: "/sigint/", LeaseTTL: testLeaseTTL})
	if err == nil || !strings.Contains(err.Error(), "holds an incomplete copy") {
		t.Fatalf("a node on a copy stopped by SIGINT: %v", err)
	}
}
