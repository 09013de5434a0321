package authstate_test

import (
	"fmt"
	"testing"

	"github.com/cohort-dev/cohort/security/acl"
	"github.com/cohort-dev/cohort/security/authstate"
	"github.com/cohort-dev/cohort/store"
	etcdstore "github.com/cohort-dev/cohort/store/etcd"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

// topicRead is a binding of its own for each i: READ on topic t-<i> for
// User:app.
func topicRead(prefix string, i int) acl.Binding {
	return acl.Binding{ResourceType: acl.ResourceTopic, ResourceName: fmt.Sprintf("%s-%06d", prefix, i), PatternType: acl.PatternLiteral,
		Principal: "User:app", Host: "*", Operation: acl.OpRead, Permission: acl.PermissionAllow}
}

// BenchmarkCreateACLsOneByOne is an operator's script creating ACLs one
// CreateAcls at a time (one binding each, none held yet) on a node whose
// etcd already holds existing bindings, as a cluster node does it
// (shared=true: each change is published with etcd's state, read again)
// and as a node alone on its store does (shared=false: the change alone),
// in the same run against one embedded etcd member. ns/op is the time of
// one change.
//
//	go test -run '^$' -bench CreateACLsOneByOne -benchtime 2s ./security/authstate/
func BenchmarkCreateACLsOneByOne(b *testing.B) {
	ec := etcdtest.Start(b, 1)
	cli := ec.Client(b)
	run := 0
	for _, existing := range []int{0, 1000, 10000} {
		for _, shared := range []bool{false, true} {
			b.Run(fmt.Sprintf("existing=%d/shared=%v", existing, shared), func(b *testing.B) {
				run++ // each run on a prefix of its own: exactly existing bindings
				st, err := etcdstore.New(etcdstore.Options{Client: cli, Prefix: fmt.Sprintf("/bench-%d/", run), Fenced: true})
				if err != nil {
					b.Fatal(err)
				}
				for i := 0; i < existing; i += 1000 {
					var recs []store.Record
					for j := i; j < min(i+1000, existing); j++ {
						bd := topicRead("old", j)
						v, err := bd.MarshalBinary()
						if err != nil {
							b.Fatal(err)
						}
						recs = append(recs, store.Record{Key: []byte("a/" + bd.Key()), Value: v})
					}
					if err := st.Append(ctx, authstate.Partition, recs); err != nil {
						b.Fatal(err)
					}
				}
				s, err := authstate.Open(ctx, authstate.Options{Store: st, Shared: shared, Logger: quiet,
					Authorizer: acl.Authorizer{SuperUsers: []string{"User:root"}}})
				if err != nil {
					b.Fatal(err)
				}
				if got := len(s.ACLs(acl.Filter{ResourceType: acl.ResourceAny, PatternType: acl.PatternAny,
					Operation: acl.OpAny, Permission: acl.PermissionAny})); got != existing {
					b.Fatalf("loaded %d bindings, want %d", got, existing)
				}
				b.ResetTimer()
				for i := range b.N {
					if err := s.CreateACLs(ctx, []acl.Binding{topicRead("new", i)})[0]; err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
