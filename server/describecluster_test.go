package server

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/security/acl"
)

func describeClusterAt(v int16, endpoint int8, ops bool) *kmsg.DescribeClusterRequest {
	req := kmsg.NewPtrDescribeClusterRequest()
	req.Version, req.EndpointType, req.IncludeClusterAuthorizedOperations = v, endpoint, ops
	return req
}

// DescribeCluster names the same cluster, controller and brokers as
// Metadata, at every version, over the wire.
func TestDescribeCluster(t *testing.T) {
	ts := startServer(t)
	c := ts.dial(t)
	mreq := kmsg.NewPtrMetadataRequest()
	mreq.Version = 12
	md := c.roundTrip(mreq).(*kmsg.MetadataResponse)
	if len(md.Brokers) != 1 {
		t.Fatalf("Metadata brokers %+v", md.Brokers)
	}
	for v := int16(0); v <= 2; v++ {
		req := describeClusterAt(v, endpointBrokers, false)
		req.IncludeFencedBrokers = v >= 2 // none is fenced: the same answer
		r := c.roundTrip(req).(*kmsg.DescribeClusterResponse)
		if r.ErrorCode != 0 || r.ErrorMessage != nil {
			t.Fatalf("v%d: error %d %v", v, r.ErrorCode, r.ErrorMessage)
		}
		if r.ClusterID != "test-cluster" || md.ClusterID == nil || *md.ClusterID != r.ClusterID {
			t.Errorf("v%d: cluster %q, Metadata says %v", v, r.ClusterID, md.ClusterID)
		}
		if r.ControllerID != md.ControllerID || r.ControllerID != 0 {
			t.Errorf("v%d: controller %d, Metadata says %d", v, r.ControllerID, md.ControllerID)
		}
		if len(r.Brokers) != 1 {
			t.Fatalf("v%d: brokers %+v", v, r.Brokers)
		}
		b, mb := r.Brokers[0], md.Brokers[0]
		if b.NodeID != mb.NodeID || b.Host != mb.Host || b.Port != mb.Port || b.Rack != nil || b.IsFenced {
			t.Errorf("v%d: broker %+v, Metadata's %+v", v, b, mb)
		}
		if r.EndpointType != endpointBrokers {
			t.Errorf("v%d: endpoint type %d", v, r.EndpointType)
		}
		if r.ClusterAuthorizedOperations != opsOmitted {
			t.Errorf("v%d: cluster operations %d when not asked for", v, r.ClusterAuthorizedOperations)
		}
		// Asked for, without an authorizer: every cluster operation, as
		// Metadata answers them.
		r = c.roundTrip(describeClusterAt(v, endpointBrokers, true)).(*kmsg.DescribeClusterResponse)
		if r.ClusterAuthorizedOperations != acl.SupportedOperations(acl.ResourceCluster) || r.ClusterAuthorizedOperations != 8096 {
			t.Errorf("v%d: cluster operations %d asked for, want 8096", v, r.ClusterAuthorizedOperations)
		}
	}
	// cohort nodes are brokers: asked for controllers, as a Kafka broker
	// answers, MISMATCHED_ENDPOINT_TYPE; an endpoint type nobody knows is
	// UNSUPPORTED_ENDPOINT_TYPE. Neither names any broker.
	for _, tc := range []struct {
		v        int16
		endpoint int8
		want     int16
	}{{1, endpointControllers, errMismatchedEndpointType}, {2, endpointControllers, errMismatchedEndpointType},
		{1, 0, errUnsupportedEndpointType}, {2, 7, errUnsupportedEndpointType}, {2, -1, errUnsupportedEndpointType}} {
		r := c.roundTrip(describeClusterAt(tc.v, tc.endpoint, true)).(*kmsg.DescribeClusterResponse)
		if r.ErrorCode != tc.want || r.ErrorMessage == nil || *r.ErrorMessage == "" || len(r.Brokers) != 0 || r.ClusterID != "" {
			t.Errorf("v%d endpoint type %d: error %d %v, brokers %+v, cluster %q; want error %d with a message and nothing else",
				tc.v, tc.endpoint, r.ErrorCode, r.ErrorMessage, r.Brokers, r.ClusterID, tc.want)
		}
	}
	// v0 cannot name an endpoint type: a wrong one reaching the handler
	// (only possible in-process) is INVALID_REQUEST, as Kafka answers v0.
	if r := ts.srv.describeCluster(Client{}, describeClusterAt(0, endpointControllers, false)); r.ErrorCode != errInvalidRequest {
		t.Errorf("v0 controllers: error %d, want INVALID_REQUEST", r.ErrorCode)
	}
}

// A client is shown the brokers' endpoints on the listener it connected
// on; a controller without one there is answered -1, as Kafka answers a
// controller missing from the broker list.
func TestDescribeClusterListenerEndpoints(t *testing.T) {
	f := startAuthServer(t, ProtocolSASLPlaintext, nil, nil)
	rack := "r1"
	f.ts.topo.SetSelf(Broker{NodeID: 4, Host: "127.0.0.1", Port: 1, Rack: &rack, Endpoints: []Endpoint{
		{Listener: ProtocolPlaintext, Host: "plain.example", Port: 9092},
		{Listener: ProtocolSASLPlaintext, Host: "sasl.example", Port: 9094},
	}})
	c := f.ts.dial(t)
	login(t, c, "alice", "secret")
	r := c.roundTrip(describeClusterAt(2, endpointBrokers, false)).(*kmsg.DescribeClusterResponse)
	if len(r.Brokers) != 1 || r.Brokers[0].Host != "sasl.example" || r.Brokers[0].Port != 9094 || r.Brokers[0].NodeID != 4 ||
		r.Brokers[0].Rack == nil || *r.Brokers[0].Rack != "r1" || r.ControllerID != 4 {
		t.Fatalf("brokers %+v controller %d, want node 4 at the SASL_PLAINTEXT endpoint in rack r1", r.Brokers, r.ControllerID)
	}
	f.ts.topo.SetSelf(Broker{NodeID: 4, Host: "127.0.0.1", Port: 1, Endpoints: []Endpoint{{Listener: ProtocolPlaintext, Host: "p", Port: 1}}})
	r = c.roundTrip(describeClusterAt(2, endpointBrokers, false)).(*kmsg.DescribeClusterResponse)
	if r.ErrorCode != 0 || len(r.Brokers) != 0 || r.ControllerID != -1 {
		t.Fatalf("without an endpoint on the listener: error %d brokers %+v controller %d, want no broker and controller -1",
			r.ErrorCode, r.Brokers, r.ControllerID)
	}
}

// With ACLs, DescribeCluster needs no grant (like Metadata); the cluster's
// operations, when asked for, are the principal's with CLUSTER DESCRIBE
// and 0 without it, as Kafka answers them.
func TestAuthzDescribeCluster(t *testing.T) {
	e := newAuthzEnv(t)
	for v := int16(0); v <= 2; v++ {
		r := e.as(alice, describeClusterAt(v, endpointBrokers, true)).(*kmsg.DescribeClusterResponse)
		if r.ErrorCode != 0 || len(r.Brokers) != 1 || r.ClusterID != "authz-cluster" {
			t.Fatalf("v%d without grants: error %d brokers %+v cluster %q", v, r.ErrorCode, r.Brokers, r.ClusterID)
		}
		if r.ClusterAuthorizedOperations != 0 {
			t.Errorf("v%d: cluster operations %b without CLUSTER DESCRIBE, want 0", v, r.ClusterAuthorizedOperations)
		}
		r = e.as(alice, describeClusterAt(v, endpointBrokers, false)).(*kmsg.DescribeClusterResponse)
		if r.ClusterAuthorizedOperations != opsOmitted {
			t.Errorf("v%d: cluster operations %b not asked for", v, r.ClusterAuthorizedOperations)
		}
	}
	e.grant(allow(alice, acl.OpDescribe, acl.ResourceCluster, acl.ClusterName), allow(alice, acl.OpAlter, acl.ResourceCluster, acl.ClusterName))
	r := e.as(alice, describeClusterAt(2, endpointBrokers, true)).(*kmsg.DescribeClusterResponse)
	want := e.authz.AuthorizedOperations(alice, aliceHost, acl.ResourceCluster, acl.ClusterName)
	if r.ClusterAuthorizedOperations != want || want&(1<<acl.OpAlter) == 0 || want == acl.SupportedOperations(acl.ResourceCluster) {
		t.Errorf("cluster operations %b, want alice's %b (DESCRIBE and ALTER, not all)", r.ClusterAuthorizedOperations, want)
	}
	// A refused endpoint type is answered before any ACL check.
	r = e.as(alice, describeClusterAt(2, endpointControllers, true)).(*kmsg.DescribeClusterResponse)
	if r.ErrorCode != errMismatchedEndpointType || r.ClusterAuthorizedOperations != opsOmitted {
		t.Errorf("controllers: error %d operations %b", r.ErrorCode, r.ClusterAuthorizedOperations)
	}
}

// DeleteGroups v3 says why each refused group was refused: the
// coordinator's message where it wrote one, otherwise the error's
// description (here a refusal by the ACLs); a deleted group has none.
func TestDeleteGroupsV3Messages(t *testing.T) {
	e := newAuthzEnv(t)
	e.commit("g-ok", "t", 1)
	e.grant(allow(alice, acl.OpDelete, acl.ResourceGroup, "g-ok"), allow(alice, acl.OpDelete, acl.ResourceGroup, "g-missing"))
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Version, req.Groups = 3, []string{"g-ok", "g-secret", "g-missing"}
	r := e.as(alice, req).(*kmsg.DeleteGroupsResponse)
	msg := func(i int) string {
		if m := r.Groups[i].ErrorMessage; m != nil {
			return *m
		}
		return "<nil>"
	}
	if len(r.Groups) != 3 || r.Groups[0].ErrorCode != 0 || r.Groups[0].ErrorMessage != nil {
		t.Fatalf("groups %+v", r.Groups)
	}
	if r.Groups[1].ErrorCode != codeGroupAuthz || msg(1) != "Not authorized to access group: Group authorization failed." {
		t.Errorf("refused group: %d %q", r.Groups[1].ErrorCode, msg(1))
	}
	if r.Groups[2].ErrorCode != 69 || msg(2) != `group "g-missing" does not exist` { // GROUP_ID_NOT_FOUND
		t.Errorf("missing group: %d %q", r.Groups[2].ErrorCode, msg(2))
	}
	req.Version = 2
	for _, g := range e.as(alice, req).(*kmsg.DeleteGroupsResponse).Groups {
		if g.ErrorMessage != nil {
			t.Errorf("v2 %s: message %q", g.Group, *g.ErrorMessage)
		}
	}
}
