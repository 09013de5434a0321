package server

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/security/acl"
)

// DescribeCluster endpoint types (KIP-919): a broker describes brokers; a
// KRaft controller describes controllers. cohort nodes are brokers.
const (
	endpointBrokers     int8 = 1
	endpointControllers int8 = 2
)

// DescribeCluster error codes.
const (
	errMismatchedEndpointType  int16 = 114
	errUnsupportedEndpointType int16 = 115
)

// describeCluster answers DescribeCluster (KIP-700), the admin clients'
// view of the cluster: its id, a controller and the brokers a client of
// c's listener can reach, the same brokers as Metadata names. As a Kafka
// broker does, it refuses to describe controllers (MISMATCHED_ENDPOINT_TYPE)
// and an endpoint type it does not know (UNSUPPORTED_ENDPOINT_TYPE); a v0
// request cannot name an endpoint type, so there both are INVALID_REQUEST.
// No broker is ever fenced, so IncludeFencedBrokers (v2) changes nothing.
// The cluster's authorized operations, when asked for, are every operation
// on a cluster (no authorizer); authzDescribeCluster replaces them with the
// principal's.
func (s *Server) describeCluster(c Client, req *kmsg.DescribeClusterRequest) *kmsg.DescribeClusterResponse {
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	switch req.EndpointType {
	case endpointBrokers:
	case endpointControllers:
		resp.ErrorCode = errMismatchedEndpointType
		resp.ErrorMessage = kmsg.StringPtr("cohort nodes are brokers: there are no controllers to describe (endpoint type 2)")
	default:
		resp.ErrorCode = errUnsupportedEndpointType
		resp.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("unsupported endpoint type %d", req.EndpointType))
	}
	if resp.ErrorCode != errNone {
		if req.Version == 0 {
			resp.ErrorCode = errInvalidRequest
		}
		return resp
	}
	topo := s.cfg.Topology
	brokers := brokersOn(topo.Brokers(), c.Listener)
	resp.Brokers = make([]kmsg.DescribeClusterResponseBroker, len(brokers))
	controller := int32(-1)
	want := topo.ControllerID()
	for i, b := range brokers {
		db := kmsg.NewDescribeClusterResponseBroker()
		db.NodeID, db.Host, db.Port, db.Rack = b.NodeID, b.Host, b.Port, b.Rack
		resp.Brokers[i] = db
		if b.NodeID == want {
			controller = want
		}
	}
	// As Kafka: a controller id the answer's broker list does not hold
	// (here: one without an endpoint on this listener) is -1, so that the
	// client is not sent to a node it cannot find.
	resp.ControllerID = controller
	resp.ClusterID = topo.ClusterID()
	resp.EndpointType = endpointBrokers
	if req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = acl.SupportedOperations(acl.ResourceCluster)
	}
	return resp
}

// authzDescribeCluster: no check for the answer itself (as Metadata, any
// principal may learn the brokers). The cluster's authorized operations,
// when asked for, are the principal's if it may DESCRIBE the cluster and
// 0 otherwise, as Kafka answers them.
func (s *Server) authzDescribeCluster(ctx context.Context, c Client, r *request) (kmsg.Response, error) {
	req := r.req.(*kmsg.DescribeClusterRequest)
	got, err := s.handleUnchecked(ctx, c, r)
	if err != nil {
		return nil, err
	}
	resp := got.(*kmsg.DescribeClusterResponse)
	if req.IncludeClusterAuthorizedOperations && resp.ErrorCode == errNone {
		resp.ClusterAuthorizedOperations = 0
		if s.authorize(c, r.key, acl.OpDescribe, acl.ResourceCluster, acl.ClusterName) {
			resp.ClusterAuthorizedOperations = s.authz.AuthorizedOperations(c.Principal, c.Host, acl.ResourceCluster, acl.ClusterName)
		}
	}
	return resp, nil
}
