package cluster

import (
	"strconv"
	"testing"

	etcdstore "github.com/cohort-dev/cohort/store/etcd"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// FuzzLeaseKV feeds arbitrary etcd keys and values, as a damaged etcd or
// another program writing under the prefix would leave them, to the
// decoders of the registration and ownership keys. A key is taken only if
// it is exactly what cohort writes for the id or partition it decodes to
// (nodeKey, OwnerKey, strconv.Itoa of the holder): anything else must be
// refused, not read as some other node's or partition's key.
func FuzzLeaseKV(f *testing.F) {
	const prefix = "cohort/"
	e := &EtcdLeases{Prefix: prefix}
	f.Add([]byte(e.nodeKey(3)), []byte(`{"id":3,"host":"127.0.0.1","port":9092}`), false)
	f.Add([]byte(e.nodeKey(0)), []byte{}, true)
	f.Add([]byte(etcdstore.OwnerKey(prefix, 7)), []byte("3"), false)
	f.Add([]byte(etcdstore.OwnerKey(prefix, 49)), []byte{}, true)
	f.Fuzz(func(t *testing.T, key, value []byte, deleted bool) {
		kv := &mvccpb.KeyValue{Key: key, Value: value, CreateRevision: 5, ModRevision: 6, Lease: 7}
		if n, ok := e.node(kv, deleted); ok {
			if got := e.nodeKey(n.ID); got != string(key) {
				t.Fatalf("key %q read as node %d, whose key is %q", key, n.ID, got)
			}
			if n.Deleted != deleted || string(n.Info) != string(value) {
				t.Fatalf("key %q: %+v, want deleted %v and the value as it is", key, n, deleted)
			}
		}
		if o, ok := e.owner(kv, deleted); ok {
			if got := etcdstore.OwnerKey(prefix, o.P); got != string(key) {
				t.Fatalf("key %q read as partition %d, whose key is %q", key, o.P, got)
			}
			if o.Deleted != deleted || o.ModRev != 6 {
				t.Fatalf("key %q: %+v, want deleted %v, mod revision 6", key, o, deleted)
			}
			if deleted {
				if o.Holder != (Holder{}) {
					t.Fatalf("deleted key %q has a holder %+v", key, o.Holder)
				}
			} else if got := strconv.Itoa(int(o.Holder.Node)); got != string(value) || o.Holder.CreateRev != 5 || o.Holder.Lease != 7 {
				t.Fatalf("value %q read as holder %+v (node %s)", value, o.Holder, got)
			}
		}
	})
}
