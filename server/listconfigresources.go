package server

import (
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/catalog"
	"github.com/cohort-dev/cohort/security/acl"
)

// ListConfigResources (v0–1, KIP-1142; v0 was ListClientMetricsResources)
// names the resources that configs can be described for. `kafka-configs
// --describe --entity-type groups` without a name lists the union of
// ListGroups and this API's GROUP resources, so a group that has configs
// but no members is found only through it. As Kafka answers it:
//
//   - v0 lists client-metrics subscriptions only (cohort has none); v1 the
//     types asked for, an empty list meaning all five: GROUP (the groups
//     with configs, not every group), CLIENT_METRICS, BROKER_LOGGER and
//     BROKER (the brokers reachable on the client's listener, by id), TOPIC
//     (every catalog topic), in that order (sorted within a type);
//   - any other type makes the whole answer UNSUPPORTED_VERSION, empty;
//   - with an authorizer, DESCRIBE_CONFIGS on the cluster is needed
//     (CLUSTER_AUTHORIZATION_FAILED for the whole answer), and nothing is
//     filtered per resource.
func (s *Server) listConfigResources(c Client, req *kmsg.ListConfigResourcesRequest) *kmsg.ListConfigResourcesResponse {
	resp := req.ResponseKind().(*kmsg.ListConfigResourcesResponse)
	types := req.ResourceTypes
	if req.Version == 0 {
		types = []int8{int8(kmsg.ConfigResourceTypeClientMetrics)}
	}
	all := []kmsg.ConfigResourceType{kmsg.ConfigResourceTypeGroupConfig, kmsg.ConfigResourceTypeClientMetrics,
		kmsg.ConfigResourceTypeBrokerLogger, kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeTopic}
	want := map[kmsg.ConfigResourceType]bool{}
	for _, t := range types {
		if !slices.Contains(all, kmsg.ConfigResourceType(t)) {
			resp.ErrorCode = errUnsupportedVersion
			return resp
		}
		want[kmsg.ConfigResourceType(t)] = true
	}
	add := func(t kmsg.ConfigResourceType, names []string) { // in the order given
		for _, n := range names {
			r := kmsg.NewListConfigResourcesResponseConfigResource()
			r.Name, r.Type = n, int8(t)
			resp.ConfigResources = append(resp.ConfigResources, r)
		}
	}
	for _, t := range all {
		if len(want) > 0 && !want[t] {
			continue
		}
		switch t {
		case kmsg.ConfigResourceTypeGroupConfig:
			add(t, s.catalog.ConfiguredGroups())
		case kmsg.ConfigResourceTypeBrokerLogger, kmsg.ConfigResourceTypeBroker:
			var ids []string
			for _, b := range brokersOn(s.cfg.Topology.Brokers(), c.Listener) {
				ids = append(ids, strconv.Itoa(int(b.NodeID)))
			}
			add(t, ids)
		case kmsg.ConfigResourceTypeTopic:
			var names []string
			s.catalog.Range(func(tp *catalog.Topic) bool { names = append(names, tp.Name); return true })
			add(t, names)
		}
	}
	return resp
}

// authzListConfigResources: DESCRIBE_CONFIGS on the cluster, or the whole
// answer is CLUSTER_AUTHORIZATION_FAILED.
func (s *Server) authzListConfigResources(c Client, r *request) kmsg.Response {
	req := r.req.(*kmsg.ListConfigResourcesRequest)
	if !s.authorize(c, r.key, acl.OpDescribeConfigs, acl.ResourceCluster, acl.ClusterName) {
		resp := req.ResponseKind().(*kmsg.ListConfigResourcesResponse)
		resp.ErrorCode = codeClusterAuthz
		return resp
	}
	return s.listConfigResources(c, req)
}
