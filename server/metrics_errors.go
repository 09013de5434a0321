package server

import "github.com/twmb/franz-go/pkg/kmsg"

// countErrors counts the non-zero error codes of resp, an answer of API key:
// the top-level code and those of its parts (partitions, topics, groups,
// members), and the partitions an OffsetCommit committed. It walks the
// response without allocating.
func (m *metrics) countErrors(key int16, resp kmsg.Response) {
	switch r := resp.(type) {
	case *kmsg.HeartbeatResponse:
		m.errorCode(key, r.ErrorCode)
	case *kmsg.ConsumerGroupHeartbeatResponse:
		m.errorCode(key, r.ErrorCode)
	case *kmsg.OffsetCommitResponse:
		n := 0
		for i := range r.Topics {
			for _, p := range r.Topics[i].Partitions {
				if p.ErrorCode == 0 {
					n++
				}
				m.errorCode(key, p.ErrorCode)
			}
		}
		if n > 0 {
			m.offsets.Add(float64(n))
		}
	case *kmsg.JoinGroupResponse:
		m.errorCode(key, r.ErrorCode)
	case *kmsg.SyncGroupResponse:
		m.errorCode(key, r.ErrorCode)
	case *kmsg.LeaveGroupResponse:
		m.errorCode(key, r.ErrorCode)
		for _, mb := range r.Members {
			m.errorCode(key, mb.ErrorCode)
		}
	case *kmsg.OffsetFetchResponse:
		m.errorCode(key, r.ErrorCode)
		for i := range r.Topics {
			for _, p := range r.Topics[i].Partitions {
				m.errorCode(key, p.ErrorCode)
			}
		}
		for i := range r.Groups {
			g := &r.Groups[i]
			m.errorCode(key, g.ErrorCode)
			for j := range g.Topics {
				for _, p := range g.Topics[j].Partitions {
					m.errorCode(key, p.ErrorCode)
				}
			}
		}
	case *kmsg.FindCoordinatorResponse:
		m.errorCode(key, r.ErrorCode)
		for _, c := range r.Coordinators {
			m.errorCode(key, c.ErrorCode)
		}
	case *kmsg.DescribeGroupsResponse:
		for i := range r.Groups {
			m.errorCode(key, r.Groups[i].ErrorCode)
		}
	case *kmsg.ConsumerGroupDescribeResponse:
		for i := range r.Groups {
			m.errorCode(key, r.Groups[i].ErrorCode)
		}
	case *kmsg.ListGroupsResponse:
		m.errorCode(key, r.ErrorCode)
	case *kmsg.DeleteGroupsResponse:
		for _, g := range r.Groups {
			m.errorCode(key, g.ErrorCode)
		}
	case *kmsg.OffsetDeleteResponse:
		m.errorCode(key, r.ErrorCode)
		for i := range r.Topics {
			for _, p := range r.Topics[i].Partitions {
				m.errorCode(key, p.ErrorCode)
			}
		}
	case *kmsg.ApiVersionsResponse:
		m.errorCode(key, r.ErrorCode)
	case *kmsg.DescribeClusterResponse:
		m.errorCode(key, r.ErrorCode)
	case *kmsg.SASLHandshakeResponse:
		m.errorCode(key, r.ErrorCode)
	case *kmsg.SASLAuthenticateResponse:
		m.errorCode(key, r.ErrorCode)
	case *kmsg.MetadataResponse:
		for i := range r.Topics {
			m.errorCode(key, r.Topics[i].ErrorCode)
		}
	case *kmsg.CreateTopicsResponse:
		for i := range r.Topics {
			m.errorCode(key, r.Topics[i].ErrorCode)
		}
	case *kmsg.DeleteTopicsResponse:
		for i := range r.Topics {
			m.errorCode(key, r.Topics[i].ErrorCode)
		}
	case *kmsg.CreatePartitionsResponse:
		for i := range r.Topics {
			m.errorCode(key, r.Topics[i].ErrorCode)
		}
	case *kmsg.DescribeConfigsResponse:
		for i := range r.Resources {
			m.errorCode(key, r.Resources[i].ErrorCode)
		}
	case *kmsg.ProduceResponse:
		for i := range r.Topics {
			for _, p := range r.Topics[i].Partitions {
				m.errorCode(key, p.ErrorCode)
			}
		}
	case *kmsg.FetchResponse:
		m.errorCode(key, r.ErrorCode)
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				m.errorCode(key, r.Topics[i].Partitions[j].ErrorCode)
			}
		}
	case *kmsg.ListOffsetsResponse:
		for i := range r.Topics {
			for _, p := range r.Topics[i].Partitions {
				m.errorCode(key, p.ErrorCode)
			}
		}
	case *kmsg.OffsetForLeaderEpochResponse:
		for i := range r.Topics {
			for _, p := range r.Topics[i].Partitions {
				m.errorCode(key, p.ErrorCode)
			}
		}
	case *kmsg.DescribeACLsResponse:
		m.errorCode(key, r.ErrorCode)
	case *kmsg.CreateACLsResponse:
		for _, x := range r.Results {
			m.errorCode(key, x.ErrorCode)
		}
	case *kmsg.DeleteACLsResponse:
		for i := range r.Results {
			m.errorCode(key, r.Results[i].ErrorCode)
		}
	case *kmsg.DescribeUserSCRAMCredentialsResponse:
		m.errorCode(key, r.ErrorCode)
		for i := range r.Results {
			m.errorCode(key, r.Results[i].ErrorCode)
		}
	case *kmsg.AlterUserSCRAMCredentialsResponse:
		for _, x := range r.Results {
			m.errorCode(key, x.ErrorCode)
		}
	}
}
