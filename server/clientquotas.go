package server

import (
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/security/acl"
)

// Client quota entity types and filter match types (KIP-546).
const (
	quotaUser     = "user"
	quotaClientID = "client-id"
	quotaIP       = "ip"

	quotaMatchExact     kmsg.QuotasMatchType = 0
	quotaMatchDefault   kmsg.QuotasMatchType = 1
	quotaMatchSpecified kmsg.QuotasMatchType = 2
)

// describeClientQuotas answers DescribeClientQuotas (v0–1). cohort enforces
// no client quotas and stores none, so a well-formed filter matches nothing:
// no error and an empty entry list, as a Kafka broker without quotas answers.
// The API is served because kafka-configs.sh --describe --entity-type
// users (or clients, ips) asks it before anything else, and fails the whole
// command, the users' SCRAM credentials included, when the broker does not
// advertise it. A malformed filter gets Kafka's refusal (and no entry list):
// an empty entity type, a type named twice, exact without a name, default or
// specified with one, an unknown match type, or ip together with user or
// client-id are INVALID_REQUEST; an entity type other than user, client-id
// and ip is UNSUPPORTED_VERSION. With an authorizer, DESCRIBE_CONFIGS on the
// cluster comes first (authzDescribeClientQuotas).
func (s *Server) describeClientQuotas(req *kmsg.DescribeClientQuotasRequest) *kmsg.DescribeClientQuotasResponse {
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	if code, msg := quotaFilterRefusal(req.Components); code != errNone {
		resp.ErrorCode, resp.ErrorMessage = code, kmsg.StringPtr(msg)
		return resp
	}
	resp.Entries = []kmsg.DescribeClientQuotasResponseEntry{}
	return resp
}

// quotaFilterRefusal checks a DescribeClientQuotas filter in Kafka's order:
// errNone if it is well formed.
func quotaFilterRefusal(components []kmsg.DescribeClientQuotasRequestComponent) (int16, string) {
	seen := map[string]bool{}
	for _, c := range components {
		switch {
		case c.EntityType == "":
			return errInvalidRequest, "a filter component has an empty entity type"
		case seen[c.EntityType]:
			return errInvalidRequest, "the filter names entity type " + c.EntityType + " twice"
		case c.EntityType != quotaUser && c.EntityType != quotaClientID && c.EntityType != quotaIP:
			return errUnsupportedVersion, "entity type " + c.EntityType + " is not one of user, client-id and ip"
		}
		seen[c.EntityType] = true
		switch c.MatchType {
		case quotaMatchExact:
			if c.Match == nil {
				return errInvalidRequest, "an exact match (match type 0) needs a match string"
			}
		case quotaMatchDefault, quotaMatchSpecified:
			if c.Match != nil {
				return errInvalidRequest, "match type " + strconv.Itoa(int(c.MatchType)) + " (default or any specified entity) takes no match string"
			}
		default:
			return errInvalidRequest, "unknown match type " + strconv.Itoa(int(c.MatchType))
		}
	}
	if seen[quotaIP] && (seen[quotaUser] || seen[quotaClientID]) {
		return errInvalidRequest, "an ip filter component cannot be combined with user or client-id components"
	}
	return errNone, ""
}

// authzDescribeClientQuotas: DESCRIBE_CONFIGS on the cluster, or the whole
// answer is CLUSTER_AUTHORIZATION_FAILED (before the filter is looked at).
func (s *Server) authzDescribeClientQuotas(c Client, r *request) kmsg.Response {
	req := r.req.(*kmsg.DescribeClientQuotasRequest)
	if !s.authorize(c, r.key, acl.OpDescribeConfigs, acl.ResourceCluster, acl.ClusterName) {
		resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
		resp.ErrorCode, resp.ErrorMessage = codeClusterAuthz, errorMessage(codeClusterAuthz)
		return resp
	}
	return s.describeClientQuotas(req)
}
