package node

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

// atSeed sends req at its version to cl's seed broker itself (not to
// whichever broker kgo picks), so that each node's own answer is checked.
func atSeed(ctx context.Context, t *testing.T, cl *kgo.Client, req kmsg.Request) kmsg.Response {
	t.Helper()
	v := req.GetVersion()
	resp, err := cl.SeedBrokers()[0].Request(ctx, &pinned{req, v})
	if err != nil {
		t.Fatalf("%T v%d: %v", req, v, err)
	}
	if resp.GetVersion() != v {
		t.Fatalf("%T: response version %d, want %d", req, resp.GetVersion(), v)
	}
	return resp
}

// describeCluster asks cl's seed broker for DescribeCluster at version v.
func describeCluster(ctx context.Context, t *testing.T, cl *kgo.Client, v int16) *kmsg.DescribeClusterResponse {
	t.Helper()
	req := kmsg.NewPtrDescribeClusterRequest()
	req.Version = v
	r := atSeed(ctx, t, cl, req).(*kmsg.DescribeClusterResponse)
	if r.ErrorCode != 0 {
		t.Fatalf("DescribeCluster v%d: error %d %v", v, r.ErrorCode, r.ErrorMessage)
	}
	return r
}

func brokerIDs(r *kmsg.DescribeClusterResponse) []int32 {
	var ids []int32
	for _, b := range r.Brokers {
		ids = append(ids, b.NodeID)
	}
	return ids
}

// TestDescribeClusterAcrossNodes: every node of a cluster answers
// DescribeCluster (the Java admin client's describeCluster) with the live
// nodes, the same controller and cluster id as its Metadata, and a node
// that leaves drops out of every answer.
func TestDescribeClusterAcrossNodes(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	ns := startCluster848(t, ec, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var cls []*kgo.Client
	for _, n := range ns {
		cls = append(cls, client(t, n.Addr(), kgo.MaxVersions(nil)))
	}
	testwait.For(t, 20*time.Second, "every node sees three brokers", func() bool {
		for _, cl := range cls {
			if !slices.Equal(brokerIDs(describeCluster(ctx, t, cl, 2)), []int32{1, 2, 3}) {
				return false
			}
		}
		return true
	})
	for i, cl := range cls {
		md := kmsg.NewPtrMetadataRequest()
		md.Version = 12
		mr := atSeed(ctx, t, cl, md).(*kmsg.MetadataResponse)
		for v := int16(0); v <= 2; v++ {
			r := describeCluster(ctx, t, cl, v)
			if r.ClusterID != "test" || mr.ClusterID == nil || *mr.ClusterID != r.ClusterID || r.ControllerID != mr.ControllerID || r.ControllerID != 1 {
				t.Errorf("node %d v%d: cluster %q controller %d; Metadata: %v %d", i+1, v, r.ClusterID, r.ControllerID, mr.ClusterID, mr.ControllerID)
			}
			if len(r.Brokers) != len(mr.Brokers) {
				t.Fatalf("node %d v%d: brokers %+v, Metadata's %+v", i+1, v, r.Brokers, mr.Brokers)
			}
			for j, b := range r.Brokers {
				mb := mr.Brokers[j]
				if b.NodeID != mb.NodeID || b.Host != mb.Host || b.Port != mb.Port || b.IsFenced {
					t.Errorf("node %d v%d: broker %+v, Metadata's %+v", i+1, v, b, mb)
				}
			}
		}
	}
	// Node 1, the controller, leaves: the others stop naming it, and the
	// lowest live node is the controller.
	ns[0].Close()
	testwait.For(t, 20*time.Second, "node 1 gone from DescribeCluster", func() bool {
		for _, cl := range cls[1:] {
			r := describeCluster(ctx, t, cl, 2)
			if !slices.Equal(brokerIDs(r), []int32{2, 3}) || r.ControllerID != 2 {
				return false
			}
		}
		return true
	})
}
