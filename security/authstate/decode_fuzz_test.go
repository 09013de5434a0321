package authstate

import (
	"bytes"
	"errors"
	"testing"

	"github.com/cohort-dev/cohort/security/acl"
	"github.com/cohort-dev/cohort/security/sasl"
)

// FuzzDecodeRecord feeds arbitrary security records (partition -2, read
// back from the disk store or from etcd, where anyone with access to the
// prefix can write) to decode. A record is refused with errBadRecord, or
// skipped, or taken whole: what it takes encodes back to the very key and
// value it came from, so nothing is read partly or as another record.
func FuzzDecodeRecord(f *testing.F) {
	cred, err := sasl.NewCredential(sasl.ScramSHA256, "pw", sasl.MinIterations)
	if err != nil {
		f.Fatal(err)
	}
	cv, err := cred.MarshalBinary()
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(credID{user: "alice", mechanism: sasl.ScramSHA256}.key()), cv)
	f.Add([]byte(credID{user: "bob/x", mechanism: sasl.ScramSHA512}.key()), []byte{})
	b := acl.Binding{ResourceType: acl.ResourceTopic, ResourceName: "orders", PatternType: acl.PatternLiteral,
		Principal: "User:alice", Host: "*", Operation: acl.OpRead, Permission: acl.PermissionAllow}
	bv, err := b.MarshalBinary()
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(aclKey(b)), bv)
	f.Add([]byte(aclKey(b)), []byte{})
	f.Add([]byte(unknownKeyRecord), bytes.Repeat([]byte{7}, unknownKeyLen))
	f.Add([]byte(keyPrefix+"later"), []byte("x"))
	f.Fuzz(func(t *testing.T, key, value []byte) {
		e, err := decode(key, value)
		if err != nil {
			if !errors.Is(err, errBadRecord) {
				t.Fatalf("%q = %x: error %v does not wrap errBadRecord", key, value, err)
			}
			return
		}
		if e.key != string(key) || e.present != (len(value) > 0) {
			t.Fatalf("%q = %x: entry %+v", key, value, e)
		}
		if e.skip {
			return
		}
		r, err := e.record()
		if err != nil {
			t.Fatalf("%q = %x: taken, but it does not encode: %v", key, value, err)
		}
		if !bytes.Equal(r.Key, key) || !bytes.Equal(r.Value, value) {
			t.Fatalf("%q = %x taken as a record that encodes as %q = %x", key, value, r.Key, r.Value)
		}
		if e.cred != nil && e.id.key() != string(key) {
			t.Fatalf("%q: credential of %+v, whose key is %q", key, e.id, e.id.key())
		}
	})
}
