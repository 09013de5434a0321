package cluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cohort-dev/cohort/internal/etcdwatch"
	etcdstore "github.com/cohort-dev/cohort/store/etcd"
)

// LeaseID names a lease granted by a LeaseStore (0: none).
type LeaseID int64

// ErrLeaseNotFound: the lease has expired or was revoked.
var ErrLeaseNotFound = errors.New("cluster: lease not found")

// LeaseStore is what the cluster needs from etcd: leases, node registrations
// and ownership keys attached to leases, with create-if-absent and
// compare-and-delete, read at one revision and followed by a watch. EtcdLeases
// is the real one; MemLeases is a deterministic one for tests, driven by a
// fake clock.
type LeaseStore interface {
	// Grant creates a lease of ttl (whole seconds) and returns the TTL the
	// store granted.
	Grant(ctx context.Context, ttl time.Duration) (LeaseID, time.Duration, error)
	// KeepAlive renews the lease once and returns its TTL from now;
	// ErrLeaseNotFound if it is gone.
	KeepAlive(ctx context.Context, id LeaseID) (time.Duration, error)
	// Revoke ends the lease and deletes its keys (ErrLeaseNotFound if it
	// is gone already).
	Revoke(ctx context.Context, id LeaseID) error
	// Register creates node id's registration with value info, attached to
	// lease, if no registration of id exists (false otherwise).
	Register(ctx context.Context, id int32, info []byte, lease LeaseID) (bool, error)
	// Acquire creates partition p's ownership key for node, attached to
	// lease, if no key exists; it returns the key's create revision.
	Acquire(ctx context.Context, p, node int32, lease LeaseID) (createRev int64, ok bool, err error)
	// Release deletes p's ownership key if it is the one created at
	// createRev; it returns the revision of the delete.
	Release(ctx context.Context, p int32, createRev int64) (rev int64, ok bool, err error)
	// Load reads every registration and ownership key at one revision.
	Load(ctx context.Context) (Snapshot, error)
	// Watch follows changes after revision rev. A batch with Err set, or
	// the channel closing, means the watch is over: Load again.
	Watch(ctx context.Context, rev int64) <-chan WatchBatch
}

// Snapshot is the registry and the ownership keys at revision Rev.
type Snapshot struct {
	Rev    int64
	Nodes  []NodeKV
	Owners []OwnerKV
}

// NodeKV is a node registration (or its deletion, in a watch).
type NodeKV struct {
	ID      int32
	Info    []byte
	Deleted bool
}

// OwnerKV is a partition's ownership key (or its deletion, in a watch).
type OwnerKV struct {
	P int32
	Holder
	ModRev  int64
	Deleted bool
}

// Holder is who holds an ownership key: the node, the key's create revision
// (what fenced writes compare) and the lease it is attached to.
type Holder struct {
	Node      int32
	CreateRev int64
	Lease     LeaseID
}

// WatchBatch is one batch of watched changes.
type WatchBatch struct {
	Nodes  []NodeKV
	Owners []OwnerKV
	Err    error
}

// EtcdLeases is the LeaseStore on etcd, under prefix: registrations at
// <prefix>nodes/<id>, ownership keys at <prefix>own/<p> (store/etcd's
// OwnerKey, which its fenced writes compare). Use it through a pointer: its
// keepalives share one etcd stream.
type EtcdLeases struct {
	Client *clientv3.Client
	Prefix string

	ka keepAliveStream
}

var _ LeaseStore = (*EtcdLeases)(nil)

func (e *EtcdLeases) nodeKey(id int32) string { return e.Prefix + "nodes/" + strconv.Itoa(int(id)) }
func (e *EtcdLeases) nodePrefix() string      { return e.Prefix + "nodes/" }

func etcdErr(err error) error {
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return ErrLeaseNotFound
	}
	return err
}

// Grant implements LeaseStore.
func (e *EtcdLeases) Grant(ctx context.Context, ttl time.Duration) (LeaseID, time.Duration, error) {
	r, err := e.Client.Grant(ctx, int64(ttl/time.Second))
	if err != nil {
		return 0, 0, err
	}
	return LeaseID(r.ID), time.Duration(r.TTL) * time.Second, nil
}

// KeepAlive implements LeaseStore: one request on the keepalive stream the
// node keeps open to etcd, and its answer.
//
// Not a stream per keepalive (etcd client's KeepAliveOnce): with etcd's
// authentication on, the etcd client logs in again for every stream it
// opens, and each login is a bcrypt check of the password and a raft write
// on etcd and leaves a token in etcd's memory until --auth-token-ttl; a node
// renewing every TTL/3 did that for as long as it ran (etcd's operators have
// seen their members stall under such tokens when the TTL is long). One
// stream logs in once; etcd checks its token at each renewal, and a stream
// whose token etcd no longer accepts (expired, or etcd restarted) ends, after
// which one new stream is tried at once.
func (e *EtcdLeases) KeepAlive(ctx context.Context, id LeaseID) (time.Duration, error) {
	return e.ka.renew(ctx, e.Client, id)
}

// keepAliveStream is the one LeaseKeepAlive stream of a client, used by one
// keepalive at a time. A keepalive that fails in any way closes it, so that
// a late answer to one request is never taken for the answer to the next:
// the cluster counts its lease from the time of the request answered.
type keepAliveStream struct {
	mu     sync.Mutex
	stream pb.Lease_LeaseKeepAliveClient
	cancel context.CancelFunc
}

func (k *keepAliveStream) renew(ctx context.Context, cli *clientv3.Client, id LeaseID) (time.Duration, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for {
		fresh := k.stream == nil
		if fresh {
			// The stream lives as long as the client, not as one
			// keepalive's ctx; it requires a leader, as the etcd client's
			// own keepalive stream does, so that a member cut off from the
			// others ends it rather than leaving each request to time out.
			// Opening it is bounded by the keepalive's ctx all the same:
			// the etcd client logs in first (authentication on) with the
			// stream's context, so a login etcd was slow to answer held
			// this keepalive, and every later one (mu), past the lease's
			// deadline.
			sctx, cancel := context.WithCancel(clientv3.WithRequireLeader(cli.Ctx()))
			stop := context.AfterFunc(ctx, cancel)
			s, err := pb.NewLeaseClient(cli.ActiveConnection()).LeaseKeepAlive(sctx)
			if !stop() && err == nil {
				err = ctx.Err() // ended while opening: the stream is cancelled
			}
			if err != nil {
				cancel()
				return 0, etcdErr(rpctypes.Error(err))
			}
			k.stream, k.cancel = s, cancel
		}
		ttl, err := k.once(ctx, id)
		if err == nil || errors.Is(err, ErrLeaseNotFound) {
			return ttl, err
		}
		k.close()
		if ctx.Err() != nil {
			return 0, err
		}
		if fresh {
			// A new stream failed too: try again while the keepalive has
			// time if etcd was unreachable (the client may not have
			// noticed yet that the member it picked is gone), as the etcd
			// client's KeepAliveOnce does; not on a refusal.
			if !unavailable(err) {
				return 0, err
			}
			select {
			case <-ctx.Done():
				return 0, err
			case <-time.After(100 * time.Millisecond):
			}
		}
		// A stream that had served ended (its etcd member went away,
		// its token expired): a new stream right away.
	}
}

// unavailable tells an error of an etcd that could not be reached, or had
// no leader, from a refusal.
func unavailable(err error) bool {
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return ee.Code() == codes.Unavailable
	}
	return status.Code(err) == codes.Unavailable
}

func (k *keepAliveStream) once(ctx context.Context, id LeaseID) (time.Duration, error) {
	s := k.stream
	if err := s.Send(&pb.LeaseKeepAliveRequest{ID: int64(id)}); err != nil {
		return 0, etcdErr(rpctypes.Error(err))
	}
	type answer struct {
		r   *pb.LeaseKeepAliveResponse
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		r, err := s.Recv()
		ch <- answer{r, err}
	}()
	select {
	case a := <-ch:
		if a.err != nil {
			return 0, etcdErr(rpctypes.Error(a.err))
		}
		if a.r.ID != int64(id) {
			return 0, fmt.Errorf("cluster: keepalive of lease %x answered for lease %x", int64(id), a.r.ID)
		}
		if a.r.TTL <= 0 {
			return 0, ErrLeaseNotFound
		}
		return time.Duration(a.r.TTL) * time.Second, nil
	case <-ctx.Done():
		// close (by the caller) ends the Recv.
		return 0, ctx.Err()
	}
}

func (k *keepAliveStream) close() {
	if k.cancel != nil {
		k.cancel()
	}
	k.stream, k.cancel = nil, nil
}

// Revoke implements LeaseStore.
func (e *EtcdLeases) Revoke(ctx context.Context, id LeaseID) error {
	_, err := e.Client.Revoke(ctx, clientv3.LeaseID(id))
	return etcdErr(err)
}

func (e *EtcdLeases) createIfAbsent(ctx context.Context, key, val string, lease LeaseID) (int64, bool, error) {
	resp, err := e.Client.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, val, clientv3.WithLease(clientv3.LeaseID(lease)))).Commit()
	if err != nil {
		return 0, false, err
	}
	return resp.Header.Revision, resp.Succeeded, nil
}

// Register implements LeaseStore.
func (e *EtcdLeases) Register(ctx context.Context, id int32, info []byte, lease LeaseID) (bool, error) {
	_, ok, err := e.createIfAbsent(ctx, e.nodeKey(id), string(info), lease)
	return ok, err
}

// Acquire implements LeaseStore.
func (e *EtcdLeases) Acquire(ctx context.Context, p, node int32, lease LeaseID) (int64, bool, error) {
	return e.createIfAbsent(ctx, etcdstore.OwnerKey(e.Prefix, p), strconv.Itoa(int(node)), lease)
}

// Release implements LeaseStore.
func (e *EtcdLeases) Release(ctx context.Context, p int32, createRev int64) (int64, bool, error) {
	k := etcdstore.OwnerKey(e.Prefix, p)
	resp, err := e.Client.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", createRev)).
		Then(clientv3.OpDelete(k)).Commit()
	if err != nil {
		return 0, false, err
	}
	return resp.Header.Revision, resp.Succeeded, nil
}

// Load implements LeaseStore.
func (e *EtcdLeases) Load(ctx context.Context) (Snapshot, error) {
	nresp, err := e.Client.Get(ctx, e.nodePrefix(), clientv3.WithPrefix())
	if err != nil {
		return Snapshot{}, err
	}
	oresp, err := e.Client.Get(ctx, etcdstore.OwnerPrefix(e.Prefix), clientv3.WithPrefix(), clientv3.WithRev(nresp.Header.Revision))
	if err != nil {
		return Snapshot{}, err
	}
	s := Snapshot{Rev: nresp.Header.Revision}
	for _, kv := range nresp.Kvs {
		if n, ok := e.node(kv, false); ok {
			s.Nodes = append(s.Nodes, n)
		}
	}
	for _, kv := range oresp.Kvs {
		if o, ok := e.owner(kv, false); ok {
			s.Owners = append(s.Owners, o)
		}
	}
	return s, nil
}

func (e *EtcdLeases) node(kv *mvccpb.KeyValue, deleted bool) (NodeKV, bool) {
	id, ok := parseKeyID(string(kv.Key), e.nodePrefix())
	if !ok {
		return NodeKV{}, false
	}
	return NodeKV{ID: id, Info: kv.Value, Deleted: deleted}, true
}

func (e *EtcdLeases) owner(kv *mvccpb.KeyValue, deleted bool) (OwnerKV, bool) {
	p, ok := parseKeyID(string(kv.Key), etcdstore.OwnerPrefix(e.Prefix))
	if !ok {
		return OwnerKV{}, false
	}
	o := OwnerKV{P: p, ModRev: kv.ModRevision, Deleted: deleted}
	if !deleted {
		id, ok := parseID(string(kv.Value))
		if !ok {
			return OwnerKV{}, false
		}
		o.Holder = Holder{Node: id, CreateRev: kv.CreateRevision, Lease: LeaseID(kv.Lease)}
	}
	return o, true
}

// parseKeyID reads the id of key, which must be prefix followed by the id
// (parseID): a key without the prefix is no key of cohort's, whatever it
// ends with.
func parseKeyID(key, prefix string) (int32, bool) {
	rest, ok := strings.CutPrefix(key, prefix)
	if !ok {
		return 0, false
	}
	return parseID(rest)
}

// parseID reads a node id or a partition as cohort writes it into a key or
// an ownership value (strconv.Itoa of an int32). Anything else is no id: a
// number past int32 would otherwise wrap onto another node or partition
// ("4294967296" is partition 0 cut to 32 bits), and a sign or leading
// zeros that Itoa never writes would make a second key for the same one.
func parseID(s string) (int32, bool) {
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil || strconv.FormatInt(n, 10) != s {
		return 0, false
	}
	return int32(n), true
}

// Watch implements LeaseStore: one etcd watch on the registrations and one on
// the ownership keys, merged. Both require a leader: an etcd member cut off
// from the others ends them (instead of delivering nothing more while the
// node's keepalives, through other endpoints, keep its lease), and the node
// reads again and watches anew.
func (e *EtcdLeases) Watch(ctx context.Context, rev int64) <-chan WatchBatch {
	out := make(chan WatchBatch)
	go func() {
		defer close(out)
		wctx, cancel := context.WithCancel(etcdwatch.Context(ctx))
		defer cancel()
		wn := e.Client.Watch(wctx, e.nodePrefix(), clientv3.WithPrefix(), clientv3.WithRev(rev))
		wo := e.Client.Watch(wctx, etcdstore.OwnerPrefix(e.Prefix), clientv3.WithPrefix(), clientv3.WithRev(rev))
		for {
			var b WatchBatch
			select {
			case <-ctx.Done():
				return
			case wr, ok := <-wn:
				b.Err = watchErr("registry", wr, ok, func(ev *clientv3.Event) {
					if n, ok := e.node(ev.Kv, ev.Type == mvccpb.DELETE); ok {
						b.Nodes = append(b.Nodes, n)
					}
				})
			case wr, ok := <-wo:
				b.Err = watchErr("ownership", wr, ok, func(ev *clientv3.Event) {
					if o, ok := e.owner(ev.Kv, ev.Type == mvccpb.DELETE); ok {
						b.Owners = append(b.Owners, o)
					}
				})
			}
			select {
			case out <- b:
			case <-ctx.Done():
				return
			}
			if b.Err != nil {
				return
			}
		}
	}()
	return out
}

// watchErr passes a watch response's events to each, or says why the watch
// (of what) has ended.
func watchErr(what string, wr clientv3.WatchResponse, ok bool, each func(*clientv3.Event)) error {
	if !ok || wr.Err() != nil {
		return errors.Join(fmt.Errorf("cluster: %s watch ended", what), wr.Err())
	}
	for _, ev := range wr.Events {
		each(ev)
	}
	return nil
}
