package authstate_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/cohort-dev/cohort/security/acl"
	"github.com/cohort-dev/cohort/security/authstate"
	"github.com/cohort-dev/cohort/security/sasl"
	"github.com/cohort-dev/cohort/server"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestOwnChangePublishesEtcdStateRandomized checks, on random sequences of
// security changes made through 2 or 3 cluster nodes (States of one etcd
// prefix, some following it with their watch, some not), the guarantee of
// Options.Shared: once a node has published a change of its own, it
// enforces exactly what etcd holds (nothing else writes until the next
// step), never a later change without an earlier one nor a record another
// node deleted. Between the changes it mixes what makes a node's state drift
// from the revision it is known to be at: Syncs of keys already applied or
// changed elsewhere (as a lagging watch makes), a Sync of an undecodable
// record, an undecodable record written to etcd and removed again, the
// unknown-user key deleted or replaced in etcd, and nodes restarted.
//
// COHORT_TEST_AUTHSTATE_SEED (the first seed) and COHORT_TEST_AUTHSTATE_SEEDS
// (how many) replay or widen the run; COHORT_TEST_AUTHSTATE_STEPS sets the
// changes per seed.
func TestOwnChangePublishesEtcdStateRandomized(t *testing.T) {
	first, seeds, steps := uint64(1), 4, 60
	if v, err := strconv.ParseUint(os.Getenv("COHORT_TEST_AUTHSTATE_SEED"), 10, 64); err == nil {
		first = v
	}
	if v, err := strconv.Atoi(os.Getenv("COHORT_TEST_AUTHSTATE_SEEDS")); err == nil && v > 0 {
		seeds = v
	}
	if v, err := strconv.Atoi(os.Getenv("COHORT_TEST_AUTHSTATE_STEPS")); err == nil && v > 0 {
		steps = v
	}
	ec := etcdtest.Start(t, 1)
	cli := ec.Client(t)
	// Seeds that found a defect, with the steps that did.
	for _, reg := range []struct {
		seed  uint64
		steps int
	}{
		// Empty values in etcd made a node's count of records match etcd's
		// though it still held a DENY deleted through another node.
		{30, 12},
	} {
		t.Run("regression/seed="+strconv.FormatUint(reg.seed, 10), func(t *testing.T) {
			runCatchUpProperty(t, cli, reg.seed, reg.steps)
		})
	}
	for seed := first; seed < first+uint64(seeds); seed++ {
		t.Run("seed="+strconv.FormatUint(seed, 10), func(t *testing.T) {
			runCatchUpProperty(t, cli, seed, steps)
		})
	}
}

// propNode is one cluster node of the property test.
type propNode struct {
	s         *authstate.State
	watching  bool
	stopWatch func()
}

// etcdSecurity is the security state etcd holds, decoded from its keys.
type etcdSecurity struct {
	acls       map[acl.Binding]bool
	creds      map[[2]string][]byte // {user, mechanism} -> encoded credential
	unknownKey []byte
	keys       []string // record keys (within the partition)
}

var (
	propUsers      = []string{"u0", "u1", "u2"}
	propMechs      = []string{sasl.ScramSHA256, sasl.ScramSHA512}
	propTopics     = []string{"t0", "t1", "t2"}
	propPrincipals = []string{"User:u0", "User:u1"}
	propAll        = acl.Filter{ResourceType: acl.ResourceAny, PatternType: acl.PatternAny, Operation: acl.OpAny, Permission: acl.PermissionAny}
)

func runCatchUpProperty(t *testing.T, cli *clientv3.Client, seed uint64, steps int) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	prefix := fmt.Sprintf("/prop%d-%d/", seed, steps)
	recPrefix := fencedStore(t, cli, prefix).RecordKey(authstate.Partition, nil)
	var log strings.Builder // the steps, reported on failure
	logf := func(format string, args ...any) { fmt.Fprintf(&log, format+"\n", args...) }
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d: %s\nsteps:\n%s", seed, fmt.Sprintf(format, args...), log.String())
	}

	startNode := func(watch bool) *propNode {
		n := &propNode{s: openShared(t, fencedStore(t, cli, prefix)), watching: watch, stopWatch: func() {}}
		if watch {
			wctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { defer close(done); authstate.Watch(wctx, cli, recPrefix, n.s, quiet, nil) }()
			n.stopWatch = sync.OnceFunc(func() { cancel(); <-done })
		}
		return n
	}
	nodes := make([]*propNode, 2+r.IntN(2))
	for i := range nodes {
		nodes[i] = startNode(r.IntN(2) == 0)
		logf("node %d watching=%v", i, nodes[i].watching)
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			n.stopWatch()
		}
	})

	history := map[string][][]byte{} // values etcd has held, by record key (Apply of late events)
	readEtcd := func() etcdSecurity {
		resp, err := cli.Get(ctx, recPrefix, clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		es := etcdSecurity{acls: map[acl.Binding]bool{}, creds: map[[2]string][]byte{}}
		for _, kv := range resp.Kvs {
			k := strings.TrimPrefix(string(kv.Key), recPrefix)
			es.keys = append(es.keys, k)
			history[k] = append(history[k], kv.Value)
			switch {
			case len(kv.Value) == 0: // a key without a record (authstate reads an empty value as none)
			case strings.HasPrefix(k, "a/"):
				var b acl.Binding
				if err := b.UnmarshalBinary(kv.Value); err != nil {
					fail("etcd holds an undecodable binding at %q: %v", k, err)
				}
				es.acls[b] = true
			case strings.HasPrefix(k, "u/"):
				mech, user, _ := strings.Cut(k[2:], "/")
				es.creds[[2]string{user, mech}] = kv.Value
			case k == "k/unknown-users":
				es.unknownKey = kv.Value
			}
		}
		return es
	}
	// check fails unless node i enforces what etcd holds.
	check := func(i int, what string) {
		t.Helper()
		want := readEtcd()
		s := nodes[i].s
		got := map[acl.Binding]bool{}
		for _, b := range s.ACLs(propAll) {
			got[b] = true
		}
		for b := range want.acls {
			if !got[b] {
				fail("after %s through node %d: etcd holds %v, the node does not enforce it (node holds %v)", what, i, b, s.ACLs(propAll))
			}
		}
		for b := range got {
			if !want.acls[b] {
				fail("after %s through node %d: the node enforces %v, which etcd does not hold", what, i, b)
			}
		}
		for _, u := range propUsers {
			for _, m := range propMechs {
				c, ok := s.Lookup(u, m)
				stored, inEtcd := want.creds[[2]string{u, m}]
				switch {
				case ok != inEtcd:
					fail("after %s through node %d: user %s %s: node has it %v, etcd %v", what, i, u, m, ok, inEtcd)
				case ok:
					enc, err := c.MarshalBinary()
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(enc, stored) {
						fail("after %s through node %d: user %s %s: the node holds another credential than etcd", what, i, u, m)
					}
				}
			}
		}
		if len(want.unknownKey) > 0 {
			if k, _, _ := s.UnknownUser(sasl.ScramSHA256); !bytes.Equal(k, want.unknownKey) {
				fail("after %s through node %d: the unknown-user key differs from etcd's", what, i)
			}
		}
	}

	// everKeys are the record keys etcd has held (Syncs of keys since deleted).
	everKeys := map[string]bool{}
	linearRead := func(key []byte) ([]byte, error) {
		resp, err := cli.Get(ctx, recPrefix+string(key))
		if err != nil || len(resp.Kvs) == 0 {
			return nil, err
		}
		return resp.Kvs[0].Value, nil
	}
	randBinding := func() acl.Binding {
		b := acl.Binding{ResourceType: acl.ResourceTopic, ResourceName: propTopics[r.IntN(len(propTopics))], PatternType: acl.PatternLiteral,
			Principal: propPrincipals[r.IntN(len(propPrincipals))], Host: "*", Operation: acl.OpRead, Permission: acl.PermissionAllow}
		if r.IntN(3) == 0 {
			b.Operation = acl.OpWrite
		}
		if r.IntN(2) == 0 {
			b.Permission = acl.PermissionDeny
		}
		return b
	}
	randFilter := func() (acl.Filter, string) {
		f := acl.Filter{ResourceType: acl.ResourceTopic, PatternType: acl.PatternAny, Operation: acl.OpAny, Permission: acl.PermissionAny}
		switch r.IntN(4) {
		case 0:
			name := propTopics[r.IntN(len(propTopics))]
			f.ResourceName, f.PatternType = &name, acl.PatternLiteral
			return f, "topic " + name
		case 1:
			p := propPrincipals[r.IntN(len(propPrincipals))]
			f.Principal = &p
			return f, "principal " + p
		case 2:
			f.Permission = acl.PermissionDeny
			return f, "every DENY"
		default:
			name := propTopics[r.IntN(len(propTopics))]
			p := propPrincipals[r.IntN(len(propPrincipals))]
			f.ResourceName, f.PatternType, f.Principal, f.Permission = &name, acl.PatternLiteral, &p, acl.PermissionAllow
			return f, "ALLOW of " + p + " on " + name
		}
	}
	pw := 0
	for step := range steps {
		i := r.IntN(len(nodes))
		x := nodes[i].s
		for _, k := range readEtcd().keys {
			everKeys[k] = true
		}
		switch op := r.IntN(100); {
		case op < 25: // CreateACLs
			bs := []acl.Binding{randBinding()}
			if r.IntN(3) == 0 {
				bs = append(bs, randBinding())
			}
			logf("%d: node %d creates %v", step, i, bs)
			mustNil(t, x.CreateACLs(ctx, bs))
			check(i, "CreateACLs")
		case op < 40: // DeleteACLs
			f, what := randFilter()
			logf("%d: node %d deletes ACLs: %s", step, i, what)
			if _, errs := x.DeleteACLs(ctx, []acl.Filter{f}); errs[0] != nil {
				t.Fatal(errs[0])
			}
			check(i, "DeleteACLs")
		case op < 60: // upserts
			var ups []server.UserUpsert
			for _, u := range propUsers {
				if len(ups) == 0 || r.IntN(4) == 0 {
					pw++
					ups = append(ups, upsert(t, u, propMechs[r.IntN(2)], "pw"+strconv.Itoa(pw), 4096))
				}
				if r.IntN(2) == 0 {
					break
				}
			}
			logf("%d: node %d upserts %d credentials, the first %s %s", step, i, len(ups), ups[0].User, ups[0].Mechanism)
			mustNil(t, x.AlterUsers(ctx, ups, nil))
			check(i, "AlterUsers upsert")
		case op < 70: // a credential's deletion (not found if the node has not seen it)
			u, m := propUsers[r.IntN(len(propUsers))], propMechs[r.IntN(2)]
			errs := x.AlterUsers(ctx, nil, []server.UserDeletion{{User: u, Mechanism: m}})
			logf("%d: node %d deletes %s %s: %v", step, i, u, m, errs[0])
			if errs[0] == nil {
				check(i, "AlterUsers deletion")
			}
		case op < 75: // every credential of a user
			u := propUsers[r.IntN(len(propUsers))]
			err := x.DeleteUser(ctx, u)
			logf("%d: node %d deletes user %s: %v", step, i, u, err)
			if err == nil {
				check(i, "DeleteUser")
			}
		case op < 85: // a Sync of keys, some changed elsewhere, some not, some gone; maybe one undecodable
			keys := slices.Sorted(func(yield func(string) bool) {
				for k := range everKeys {
					if r.IntN(2) == 0 && !yield(k) {
						return
					}
				}
			})
			r.Shuffle(len(keys), func(a, b int) { keys[a], keys[b] = keys[b], keys[a] })
			bad := ""
			if len(keys) > 0 && r.IntN(3) == 0 {
				bad = keys[r.IntN(len(keys))]
			}
			logf("%d: node %d syncs %q (undecodable: %q)", step, i, keys, bad)
			bkeys := make([][]byte, len(keys))
			for j, k := range keys {
				bkeys[j] = []byte(k)
			}
			if err := x.Sync(bkeys, func(key []byte) ([]byte, error) {
				if string(key) == bad {
					return []byte{0xff, 0x01}, nil
				}
				return linearRead(key)
			}); err != nil {
				t.Fatal(err)
			}
		case op < 87: // an event's value applied late (Apply): an older value of a key, or its deletion
			keys := slices.Sorted(maps.Keys(history))
			if len(keys) == 0 {
				continue
			}
			k := keys[r.IntN(len(keys))]
			var v []byte
			if vs := history[k]; r.IntN(3) > 0 {
				v = vs[r.IntN(len(vs))]
			}
			logf("%d: node %d applies a late event of %q (deletion: %v)", step, i, k, len(v) == 0)
			x.Apply([]byte(k), v)
		case op < 89: // an empty value at a key, which etcd counts but which is no record
			k := "a/" + randBinding().Key()
			if r.IntN(2) == 0 {
				k = "u/" + propMechs[r.IntN(2)] + "/" + propUsers[r.IntN(len(propUsers))]
			}
			logf("%d: etcd holds an empty value at %q", step, k)
			if _, err := cli.Put(ctx, recPrefix+k, ""); err != nil {
				t.Fatal(err)
			}
		case op < 91: // an undecodable record in etcd, which the watches see, removed again
			k := "a/" + randBinding().Key()
			prev, err := linearRead([]byte(k))
			if err != nil {
				t.Fatal(err)
			}
			logf("%d: etcd briefly holds an undecodable %q (held before: %v)", step, k, prev != nil)
			if _, err := cli.Put(ctx, recPrefix+k, "\xff\x01"); err != nil {
				t.Fatal(err)
			}
			if prev != nil {
				_, err = cli.Put(ctx, recPrefix+k, string(prev))
			} else {
				_, err = cli.Delete(ctx, recPrefix+k)
			}
			if err != nil {
				t.Fatal(err)
			}
		case op < 95: // the unknown-user key deleted, or replaced (as a node that found none writes one)
			if r.IntN(2) == 0 {
				logf("%d: the unknown-user key is deleted from etcd", step)
				if _, err := cli.Delete(ctx, recPrefix+"k/unknown-users"); err != nil {
					t.Fatal(err)
				}
			} else {
				logf("%d: the unknown-user key is replaced in etcd", step)
				k := make([]byte, 32)
				for j := range k {
					k[j] = byte(r.Uint32())
				}
				if _, err := cli.Put(ctx, recPrefix+"k/unknown-users", string(k)); err != nil {
					t.Fatal(err)
				}
			}
		default: // a node restarts, watching or not
			nodes[i].stopWatch()
			nodes[i] = startNode(r.IntN(2) == 0)
			logf("%d: node %d restarts, watching=%v", step, i, nodes[i].watching)
		}
	}
}
