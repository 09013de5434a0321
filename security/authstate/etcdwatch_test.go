package authstate_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/cutproxy"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/security/acl"
	"github.com/cohort-dev/cohort/security/authstate"
	"github.com/cohort-dev/cohort/security/sasl"
	"github.com/cohort-dev/cohort/server"
	etcdstore "github.com/cohort-dev/cohort/store/etcd"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// eventually polls cond until it holds or 2 s have passed: the change
// crosses etcd, another process in production.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, 2*time.Second, what, cond)
}

// TestWatchSharesChangesBetweenNodes runs two States on one etcd prefix,
// each with its watch, as two cluster nodes do.
func TestWatchSharesChangesBetweenNodes(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	cli := ec.Client(t)
	var nodes [2]*authstate.State
	var prefix string
	for i := range nodes {
		st, err := etcdstore.New(etcdstore.Options{Client: cli, Prefix: "/sec/", Fenced: true})
		if err != nil {
			t.Fatal(err)
		}
		prefix = st.RecordKey(authstate.Partition, nil)
		nodes[i] = openShared(t, st)
	}
	a, b := nodes[0], nodes[1]
	// A change made before b watches is found by the watch's first read.
	if err := a.SetPassword(ctx, "early", sasl.ScramSHA256, "pw", 4096); err != nil {
		t.Fatal(err)
	}
	// watch starts n's watch; the returned func stops it and waits for it.
	watch := func(n *authstate.State) func() {
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); authstate.Watch(wctx, cli, prefix, n, quiet, nil) }()
		return sync.OnceFunc(func() { cancel(); <-done })
	}
	stopA, stopB := watch(a), watch(b)
	t.Cleanup(func() { stopA(); stopB() })

	eventually(t, "b sees the user created before its watch", func() bool {
		_, ok := b.Lookup("early", sasl.ScramSHA256)
		return ok
	})
	mustNil(t, a.AlterUsers(ctx, []server.UserUpsert{upsert(t, "alice", sasl.ScramSHA512, "alice-pw", 4096)}, nil))
	eventually(t, "b authenticates a user created through a", func() bool { return plainLogin(b, "alice", "alice-pw") == nil })

	mustNil(t, b.CreateACLs(ctx, []acl.Binding{readOrders}))
	eventually(t, "a applies an ACL created through b", func() bool {
		return a.Authorize("User:alice", "h", acl.OpRead, acl.ResourceTopic, "orders")
	})
	if _, errs := a.DeleteACLs(ctx, []acl.Filter{{ResourceType: acl.ResourceTopic, PatternType: acl.PatternAny, Operation: acl.OpAny, Permission: acl.PermissionAny}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if err := a.DeleteUser(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "b drops the ACL and the user deleted through a", func() bool {
		_, ok := b.Lookup("alice", sasl.ScramSHA512)
		return !ok && !b.Authorize("User:alice", "h", acl.OpRead, acl.ResourceTopic, "orders")
	})

	// Changes made while b does not watch are found when it watches again.
	stopB()
	if err := a.SetPassword(ctx, "late", sasl.ScramSHA256, "pw", 4096); err != nil {
		t.Fatal(err)
	}
	stopB = watch(b)
	eventually(t, "a restarted watch catches up", func() bool {
		_, ok := b.Lookup("late", sasl.ScramSHA256)
		return ok
	})
}

// TestWatchNeverRestoresWhatThisNodeChanged: a node that creates an ACL and
// at once deletes it never authorizes by it again once the deletion has
// returned, though the watch reports the creation after the deletion was
// applied: the watch reads each reported record again instead of applying
// the value the event carries.
func TestWatchNeverRestoresWhatThisNodeChanged(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	cli := ec.Client(t)
	st, err := etcdstore.New(etcdstore.Options{Client: cli, Prefix: "/sec/", Fenced: true})
	if err != nil {
		t.Fatal(err)
	}
	a := openShared(t, st)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		authstate.Watch(wctx, cli, st.RecordKey(authstate.Partition, nil), a, quiet, nil)
	}()
	t.Cleanup(func() { cancel(); <-done })
	// The watch is up once it reports a change.
	if err := a.SetPassword(ctx, "ready", sasl.ScramSHA256, "pw", 4096); err != nil {
		t.Fatal(err)
	}
	all := acl.Filter{ResourceType: acl.ResourceTopic, PatternType: acl.PatternAny, Operation: acl.OpAny, Permission: acl.PermissionAny}
	for i := range 30 {
		mustNil(t, a.CreateACLs(ctx, []acl.Binding{readOrders}))
		if _, errs := a.DeleteACLs(ctx, []acl.Filter{all}); errs[0] != nil {
			t.Fatal(errs[0])
		}
		for deadline := time.Now().Add(20 * time.Millisecond); time.Now().Before(deadline); {
			if a.Authorize("User:alice", "h", acl.OpRead, acl.ResourceTopic, "orders") {
				t.Fatalf("round %d: the deleted ACL authorizes again on the node that deleted it", i)
			}
		}
	}
}

// TestACLChangesThroughANodeBehindTheWatch: node b has not yet seen a's
// latest ACL changes (its watch lags, or is being set up again after etcd
// broke it). A binding b creates must exist once b says so, even if b
// still holds it from before a deleted it; and a binding b deletes by a
// filter must be gone, even if b has not yet seen a create it. As with
// Kafka's single controller, the later request wins.
func TestACLChangesThroughANodeBehindTheWatch(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	cli := ec.Client(t)
	newStore := func() *etcdstore.Store { return fencedStore(t, cli, "/sec/") }
	a := openShared(t, newStore())
	mustNil(t, a.CreateACLs(ctx, []acl.Binding{readOrders}))
	b := openShared(t, newStore()) // loads readOrders; no watch: it learns of a's changes only by reading etcd itself
	all := acl.Filter{ResourceType: acl.ResourceAny, PatternType: acl.PatternAny, Operation: acl.OpAny, Permission: acl.PermissionAny}
	inEtcd := func() []acl.Binding { return openShared(t, newStore()).ACLs(all) }

	if _, errs := a.DeleteACLs(ctx, []acl.Filter{all}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	mustNil(t, b.CreateACLs(ctx, []acl.Binding{readOrders}))
	if got := inEtcd(); len(got) != 1 || got[0] != readOrders {
		t.Fatalf("b created %v after a deleted it, and answered success; etcd holds %v", readOrders, got)
	}

	b = openShared(t, newStore()) // holds readOrders; no watch
	deny := readOrders
	deny.Principal, deny.Permission = "User:mallory", acl.PermissionDeny
	mustNil(t, a.CreateACLs(ctx, []acl.Binding{deny}))
	deleted, errs := b.DeleteACLs(ctx, []acl.Filter{all})
	if errs[0] != nil {
		t.Fatal(errs[0])
	}
	if got := inEtcd(); len(got) != 0 || len(deleted[0]) != 2 {
		t.Fatalf("b deleted every ACL after a created %v: it reported deleting %v, and etcd holds %v", deny, deleted[0], got)
	}
}

// TestNodeChangeComesAfterEarlierChangesOfOthers: a client changes the
// security state through node a, then, once a has answered, through node b,
// whose watch has not yet brought a's change. Once b enforces its own
// change it must enforce a's too, as each Kafka broker applies the ACL
// records in the metadata log's order: a client granted a topic's DESCRIBE
// after its group's READ must never find a node that lets it describe the
// topic but refuses the group (TestClusterRegexACLGrantFromOtherNode failed
// so under load, kgo sending the two CreateAcls to different nodes), and a
// DENY created before an ALLOW must never be missing where the ALLOW holds.
func TestNodeChangeComesAfterEarlierChangesOfOthers(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	cli := ec.Client(t)
	newStore := func() *etcdstore.Store { return fencedStore(t, cli, "/sec/") }
	a, b := openShared(t, newStore()), openShared(t, newStore()) // no watch: b sees only what it reads itself
	groupRead := acl.Binding{ResourceType: acl.ResourceGroup, ResourceName: "rg", PatternType: acl.PatternLiteral,
		Principal: "User:app", Host: "*", Operation: acl.OpRead, Permission: acl.PermissionAllow}
	topicDescribe := acl.Binding{ResourceType: acl.ResourceTopic, ResourceName: "orders-eu", PatternType: acl.PatternLiteral,
		Principal: "User:app", Host: "*", Operation: acl.OpDescribe, Permission: acl.PermissionAllow}
	mustNil(t, a.CreateACLs(ctx, []acl.Binding{groupRead}))
	mustNil(t, b.CreateACLs(ctx, []acl.Binding{topicDescribe}))
	if !b.Authorize("User:app", "h", acl.OpDescribe, acl.ResourceTopic, "orders-eu") {
		t.Fatal("b does not enforce the ACL it created")
	}
	if !b.Authorize("User:app", "h", acl.OpRead, acl.ResourceGroup, "rg") {
		t.Fatal("b lets app describe orders-eu, granted through b, but refuses group rg, granted through a before")
	}

	deny := readOrders
	deny.Permission = acl.PermissionDeny
	mustNil(t, a.CreateACLs(ctx, []acl.Binding{deny}))
	mustNil(t, b.CreateACLs(ctx, []acl.Binding{readOrders}))
	if b.Authorize(readOrders.Principal, "h", acl.OpRead, acl.ResourceTopic, "orders") {
		t.Fatal("b allows what a DENY created through a before b's ALLOW refuses")
	}

	if err := a.SetPassword(ctx, "carol", sasl.ScramSHA256, "pw", 4096); err != nil {
		t.Fatal(err)
	}
	if err := b.SetPassword(ctx, "dave", sasl.ScramSHA256, "pw", 4096); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Lookup("carol", sasl.ScramSHA256); !ok {
		t.Fatal("b authenticates dave, created through b, but not carol, created through a before")
	}
}

// TestNodeChangeComesAfterEarlierDeletionsOfOthers is
// TestNodeChangeComesAfterEarlierChangesOfOthers for deletions: b reads only
// the records changed since the revision it is at, and etcd shows no
// deleted key among them; a binding or user deleted through a before b's
// change must be gone from b once b enforces its change.
func TestNodeChangeComesAfterEarlierDeletionsOfOthers(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	cli := ec.Client(t)
	newStore := func() *etcdstore.Store { return fencedStore(t, cli, "/sec/") }
	name := func(s string) *string { return &s }
	a := openShared(t, newStore())
	mustNil(t, a.CreateACLs(ctx, []acl.Binding{readOrders}))
	if err := a.SetPassword(ctx, "carol", sasl.ScramSHA256, "pw", 4096); err != nil {
		t.Fatal(err)
	}
	b := openShared(t, newStore()) // no watch: b sees only what it reads itself
	// b changes something first, so that its next change reads only what
	// changed since.
	if err := b.SetPassword(ctx, "dave", sasl.ScramSHA256, "pw", 4096); err != nil {
		t.Fatal(err)
	}
	if _, errs := a.DeleteACLs(ctx, []acl.Filter{{ResourceType: acl.ResourceTopic, ResourceName: name("orders"), PatternType: acl.PatternLiteral,
		Operation: acl.OpAny, Permission: acl.PermissionAny}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	other := readOrders
	other.ResourceName = "payments"
	mustNil(t, b.CreateACLs(ctx, []acl.Binding{other}))
	if b.Authorize(readOrders.Principal, "h", acl.OpRead, acl.ResourceTopic, "orders") {
		t.Fatal("b enforces the ACL it created but still allows what a deleted before")
	}
	if err := a.DeleteUser(ctx, "carol"); err != nil {
		t.Fatal(err)
	}
	if err := b.SetPassword(ctx, "erin", sasl.ScramSHA256, "pw", 4096); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Lookup("carol", sasl.ScramSHA256); ok {
		t.Fatal("b authenticates erin, created through b, and still carol, deleted through a before")
	}
	// A deletion through b of what a created, and a's creation of what b
	// deleted: each node ends with etcd's state.
	if _, errs := b.DeleteACLs(ctx, []acl.Filter{{ResourceType: acl.ResourceTopic, ResourceName: name("payments"), PatternType: acl.PatternLiteral,
		Operation: acl.OpAny, Permission: acl.PermissionAny}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	mustNil(t, a.CreateACLs(ctx, []acl.Binding{readOrders}))
	if err := b.SetPassword(ctx, "dave", sasl.ScramSHA256, "pw2", 4096); err != nil {
		t.Fatal(err)
	}
	all := acl.Filter{ResourceType: acl.ResourceAny, PatternType: acl.PatternAny, Operation: acl.OpAny, Permission: acl.PermissionAny}
	if got := b.ACLs(all); len(got) != 1 || got[0] != readOrders {
		t.Fatalf("b holds %v; etcd holds %v", got, openShared(t, newStore()).ACLs(all))
	}
}

// TestWatchCatchesUpAfterCutAndCompaction: b's connection to etcd is cut
// while a deletes a user and etcd's history is compacted past the revision
// b's watch stood at. Once b reaches etcd again it must drop the user: its
// watch cannot resume there, and it reads everything again.
func TestWatchCatchesUpAfterCutAndCompaction(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	cli := ec.Client(t)
	px := cutproxy.Start(t, strings.TrimPrefix(ec.Endpoints()[0], "http://"))
	bcli, err := clientv3.New(clientv3.Config{Endpoints: []string{px.Addr()}, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bcli.Close() })
	newState := func(c *clientv3.Client) (*authstate.State, string) {
		st, err := etcdstore.New(etcdstore.Options{Client: c, Prefix: "/sec/", Fenced: true})
		if err != nil {
			t.Fatal(err)
		}
		return openShared(t, st), st.RecordKey(authstate.Partition, nil)
	}
	a, _ := newState(cli)
	if err := a.SetPassword(ctx, "alice", sasl.ScramSHA256, "pw", 4096); err != nil {
		t.Fatal(err)
	}
	b, prefix := newState(bcli)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); authstate.Watch(wctx, bcli, prefix, b, quiet, nil) }()
	t.Cleanup(func() { cancel(); <-done })
	if err := a.SetPassword(ctx, "ready", sasl.ScramSHA256, "pw", 4096); err != nil {
		t.Fatal(err)
	}
	eventually(t, "b's watch is up", func() bool { _, ok := b.Lookup("ready", sasl.ScramSHA256); return ok })

	px.Cut()
	if err := a.DeleteUser(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	for i := range 5 { // history b's watch has not seen, then compacted
		if _, err := cli.Put(ctx, "/other/key", strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	r, err := cli.Get(ctx, "/other/key")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctx, r.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Lookup("alice", sasl.ScramSHA256); !ok {
		t.Fatal("b saw the deletion through a cut connection")
	}
	px.Restore()
	testwait.For(t, 15*time.Second, "b drops the user deleted while it was cut off", func() bool {
		_, ok := b.Lookup("alice", sasl.ScramSHA256)
		return !ok
	})
}

// fencedStore is an etcd store of prefix as a cluster node opens it.
func fencedStore(t *testing.T, cli *clientv3.Client, prefix string) *etcdstore.Store {
	t.Helper()
	st, err := etcdstore.New(etcdstore.Options{Client: cli, Prefix: prefix, Fenced: true})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestNodeChangeComesAfterEarlierDeletionsWithEmptyRecords is
// TestNodeChangeComesAfterEarlierDeletionsOfOthers with a key of the
// security partition holding an empty value, written by something other
// than cohort: etcd counts the key, which is no record. b's count of records
// must not take it for the binding a deleted.
func TestNodeChangeComesAfterEarlierDeletionsWithEmptyRecords(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	cli := ec.Client(t)
	st := fencedStore(t, cli, "/sec/")
	a := openShared(t, st)
	mustNil(t, a.CreateACLs(ctx, []acl.Binding{readOrders}))
	b := openShared(t, fencedStore(t, cli, "/sec/")) // no watch: b sees only what it reads itself
	if err := b.SetPassword(ctx, "dave", sasl.ScramSHA256, "pw", 4096); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, st.RecordKey(authstate.Partition, []byte("u/SCRAM-SHA-512/empty")), ""); err != nil {
		t.Fatal(err)
	}
	if err := b.SetPassword(ctx, "erin", sasl.ScramSHA256, "pw", 4096); err != nil {
		t.Fatal(err)
	}
	if _, errs := a.DeleteACLs(ctx, []acl.Filter{{ResourceType: acl.ResourceTopic, PatternType: acl.PatternAny,
		Operation: acl.OpAny, Permission: acl.PermissionAny}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if err := b.SetPassword(ctx, "frank", sasl.ScramSHA256, "pw", 4096); err != nil {
		t.Fatal(err)
	}
	if b.Authorize(readOrders.Principal, "h", acl.OpRead, acl.ResourceTopic, "orders") {
		t.Fatal("b enforces the user it created but still allows what a deleted before")
	}
}
