package server

import (
	"context"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/catalog"
	"github.com/cohort-dev/cohort/security/acl"
)

// DescribeConfigs (v0–4) is answered so that the admin tools that ask for
// configs while doing something else work against cohort: sarama's
// ClusterAdmin.ListTopics describes every topic's configs, kafka-topics
// --describe prints them, and UIs read broker configs. cohort keeps no
// configs Kafka clients would recognise: CreateTopics drops topic configs
// (docs/compatibility.md) and the node's settings are not Kafka broker
// properties. So a resource that exists is answered with no configs and no
// error, and the rest with Kafka's errors:
//
//   - TOPIC: a name no topic can have is INVALID_TOPIC_EXCEPTION, a topic the
//     catalog does not have UNKNOWN_TOPIC_OR_PARTITION;
//   - BROKER: "" (the cluster's defaults) or the id of a broker of the
//     cluster; a name that is not an integer, or an id no broker has, is
//     INVALID_REQUEST;
//   - BROKER_LOGGER: a broker's id, "" being INVALID_REQUEST;
//   - CLIENT_METRICS and GROUP: any non-empty name ("" is INVALID_REQUEST);
//   - any other resource type makes the whole request INVALID_REQUEST, as
//     Kafka fails it before looking at the resources.
//
// With an authorizer (authzDescribeConfigs) each resource needs
// DESCRIBE_CONFIGS: on the topic (TOPIC_AUTHORIZATION_FAILED), the group
// (GROUP_AUTHORIZATION_FAILED), or the cluster for the others
// (CLUSTER_AUTHORIZATION_FAILED). Answers keep the request's order.
func (s *Server) describeConfigs(req *kmsg.DescribeConfigsRequest, refused func(i int) int16) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	resp.Resources = make([]kmsg.DescribeConfigsResponseResource, len(req.Resources))
	bad := unknownConfigResource(req)
	for i := range req.Resources {
		rr := &req.Resources[i]
		a := &resp.Resources[i]
		*a = kmsg.NewDescribeConfigsResponseResource()
		a.ResourceType, a.ResourceName = rr.ResourceType, rr.ResourceName
		a.Configs = []kmsg.DescribeConfigsResponseResourceConfig{}
		var code int16
		var msg string
		switch {
		case bad != "":
			code, msg = errInvalidRequest, bad
		case refused != nil && refused(i) != errNone:
			code = refused(i)
		default:
			code, msg = s.configResource(rr)
			if code == errNone && rr.ResourceType == kmsg.ConfigResourceTypeGroupConfig {
				s.groupConfigs(req, rr, a)
			}
		}
		if code != errNone {
			a.ErrorCode, a.ErrorMessage = code, errorMessage(code)
			if msg != "" {
				a.ErrorMessage = kmsg.StringPtr(msg)
			}
		}
	}
	return resp
}

// unknownConfigResource returns the message failing a request that names a
// resource type Kafka does not describe, "" if there is none.
func unknownConfigResource(req *kmsg.DescribeConfigsRequest) string {
	for _, rr := range req.Resources {
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic, kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger,
			kmsg.ConfigResourceTypeClientMetrics, kmsg.ConfigResourceTypeGroupConfig:
		default:
			return "Unexpected resource type " + strconv.Itoa(int(rr.ResourceType)) + " for resource " + rr.ResourceName
		}
	}
	return ""
}

// configResource answers one resource of an allowed DescribeConfigs: no
// error (and no configs), or the error code and message.
func (s *Server) configResource(rr *kmsg.DescribeConfigsRequestResource) (int16, string) {
	name := rr.ResourceName
	switch rr.ResourceType {
	case kmsg.ConfigResourceTypeTopic:
		if err := catalog.ValidateName(name); err != nil {
			return errInvalidTopic, err.Error()
		}
		if _, ok := s.catalog.Lookup(name); !ok {
			return errUnknownTopicOrPartition, ""
		}
	case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger:
		if name == "" {
			if rr.ResourceType == kmsg.ConfigResourceTypeBrokerLogger {
				return errInvalidRequest, "Broker id must not be empty"
			}
			return errNone, "" // the cluster's default broker configs
		}
		id, err := strconv.ParseInt(name, 10, 32)
		if err != nil {
			return errInvalidRequest, "Broker id must be an integer, but it is: " + name
		}
		for _, b := range s.cfg.Topology.Brokers() {
			if b.NodeID == int32(id) {
				return errNone, ""
			}
		}
		return errInvalidRequest, "Unexpected broker id " + name + ": no broker of the cluster has it"
	case kmsg.ConfigResourceTypeClientMetrics:
		if name == "" {
			return errInvalidRequest, "Client metrics subscription name must not be empty"
		}
	case kmsg.ConfigResourceTypeGroupConfig:
		if name == "" {
			return errInvalidRequest, "Group name must not be empty"
		}
	}
	return errNone, ""
}

// authzDescribeConfigs: DESCRIBE_CONFIGS per resource (see describeConfigs).
func (s *Server) authzDescribeConfigs(_ context.Context, c Client, r *request) kmsg.Response {
	req := r.req.(*kmsg.DescribeConfigsRequest)
	if unknownConfigResource(req) != "" {
		return s.describeConfigs(req, nil)
	}
	codes := make([]int16, len(req.Resources))
	for i, rr := range req.Resources {
		rt, name, code := configACL(rr.ResourceType, rr.ResourceName)
		if !s.authorize(c, r.key, acl.OpDescribeConfigs, rt, name) {
			codes[i] = code
		}
	}
	return s.describeConfigs(req, func(i int) int16 { return codes[i] })
}

// configACL is the ACL resource a config resource is checked against, and
// the code of a refusal: the topic, the group, or the cluster for the
// others (brokers, loggers, client metrics).
func configACL(rt kmsg.ConfigResourceType, name string) (acl.ResourceType, string, int16) {
	switch rt {
	case kmsg.ConfigResourceTypeTopic:
		return acl.ResourceTopic, name, codeTopicAuthz
	case kmsg.ConfigResourceTypeGroupConfig:
		return acl.ResourceGroup, name, codeGroupAuthz
	}
	return acl.ResourceCluster, acl.ClusterName, codeClusterAuthz
}
