package node

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/cluster"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

// TestClusterEtcdNoUserRefusesSecurityWrites: the ACL and credential
// changes that etcd refuses (its authentication turned on under a node
// without an etcd user, while the node's lease still holds) answer
// KAFKA_STORAGE_ERROR, as CreateTopics and AlterConfigs do
// (TestClusterEtcdNoUserWhileLeaseHolds), with the same advice in their
// message, and change nothing.
func TestClusterEtcdNoUserRefusesSecurityWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("embedded etcd, wall clock")
	}
	ec := etcdtest.Start(t, 1)
	const prefix = "/no-user-sec/"
	cfg := secureConfig(t, nil)
	cfg.NodeID, cfg.Partitions = 1, 2
	// A lease that outlasts the requests below in the node's view
	// however slowly they run: its clock stands still once etcd's
	// authentication is on (see TestClusterEtcdNoUserWhileLeaseHolds).
	clk := &leaseClock{}
	cfg.Cluster = &ClusterConfig{Endpoints: ec.Endpoints(), Prefix: prefix, LeaseTTL: authLeaseTTL, clock: clk}
	n, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := scramClient(t, n.Addr(), "admin", adminPassword)
	admin := kadm.NewClient(cl)
	// Authenticated, and an ACL stored, before etcd's authentication.
	if res, err := admin.CreateACLs(ctx, kadm.NewACLs().Allow("User:app").Groups("kept").Operations(kadm.OpRead)); err != nil || res[0].Err != nil {
		t.Fatalf("CreateACLs before: %v %v", err, res)
	}

	clk.Freeze()
	ec.EnableAuth(t, "root-pass", prefix, map[string]string{"cohort": "late-pass"})
	holdLease(t, ec, prefix, 1, "root-pass")

	create := kmsg.NewPtrCreateACLsRequest()
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeGroup, "refused", kmsg.ACLResourcePatternTypeLiteral
	c.Principal, c.Host, c.Operation, c.PermissionType = "User:app", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
	create.Creations = append(create.Creations, c)
	del := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourceName, f.ResourcePatternType = kmsg.ACLResourceTypeGroup, kmsg.StringPtr("kept"), kmsg.ACLResourcePatternTypeLiteral
	f.Operation, f.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	del.Filters = append(del.Filters, f)
	scram := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	u.Name, u.Mechanism, u.Iterations = "app", 2, 4096 // SCRAM-SHA-512
	u.Salt, u.SaltedPassword = []byte("0123456789abcdef"), make([]byte, 64)
	scram.Upsertions = append(scram.Upsertions, u)
	for _, req := range []kmsg.Request{create, del, scram} {
		resp, err := cl.Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		var code int16
		var msg *string
		switch r := resp.(type) {
		case *kmsg.CreateACLsResponse:
			code, msg = r.Results[0].ErrorCode, r.Results[0].ErrorMessage
		case *kmsg.DeleteACLsResponse:
			code, msg = r.Results[0].ErrorCode, r.Results[0].ErrorMessage
		case *kmsg.AlterUserSCRAMCredentialsResponse:
			code, msg = r.Results[0].ErrorCode, r.Results[0].ErrorMessage
		}
		if code != kerr.KafkaStorageError.Code || msg == nil || !strings.Contains(*msg, cluster.NoUserAdvice) {
			t.Errorf("%T refused by etcd for want of a user: %v %q, want KAFKA_STORAGE_ERROR with a message that says %q",
				req, kerr.ErrorForCode(code), deref(msg), cluster.NoUserAdvice)
		}
	}
	// Nothing changed: the ACL kept, none added.
	dreq := kmsg.NewPtrDescribeACLsRequest()
	dreq.ResourceType, dreq.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	dreq.Operation, dreq.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	described, err := dreq.RequestWith(ctx, cl)
	if err != nil || described.ErrorCode != 0 {
		t.Fatalf("DescribeACLs: %v %+v", err, described)
	}
	var names []string
	for _, r := range described.Resources {
		names = append(names, r.ResourceName)
	}
	if got := strings.Join(names, ","); got != "kept" {
		t.Errorf("ACLs after the refused changes: %q, want kept only", got)
	}
}
