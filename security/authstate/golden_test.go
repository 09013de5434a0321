package authstate_test

import (
	"bytes"
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/sha512"
	"reflect"
	"testing"

	"github.com/cohort-dev/cohort/internal/golden"
	"github.com/cohort-dev/cohort/security/acl"
	"github.com/cohort-dev/cohort/security/authstate"
	"github.com/cohort-dev/cohort/security/sasl"
	"github.com/cohort-dev/cohort/store"
	"github.com/cohort-dev/cohort/store/memstore"
)

// TestStoredRecordsGolden holds, under testdata/golden/, the stored bytes of
// each kind of security record (store partition -2: a SCRAM credential of
// each mechanism, ACL bindings, the unknown users' key) as this version
// writes them, and checks that a State opened on exactly those records
// serves them: the credentials (a PLAIN login with the password they were
// made from), the bindings (listed and enforced) and the key; and that
// encoding what it holds gives the stored bytes again. It fails when a key
// or value encoding changes: users' stores hold the earlier one. A new
// record kind gets a case here; running the test once with
// COHORT_TEST_WRITE_GOLDEN=1 writes its fixture (package internal/golden).
func TestStoredRecordsGolden(t *testing.T) {
	salt := []byte("golden-salt-0123456789ab")
	salted256, err := pbkdf2.Key(sha256.New, "alice-pw", salt, 8192, sha256.Size)
	if err != nil {
		t.Fatal(err)
	}
	salted512, err := pbkdf2.Key(sha512.New, "alice-pw", salt, 4096, sha512.Size)
	if err != nil {
		t.Fatal(err)
	}
	cred256, err := sasl.CredentialFromSalted(sasl.ScramSHA256, salt, salted256, 8192)
	if err != nil {
		t.Fatal(err)
	}
	cred512, err := sasl.CredentialFromSalted(sasl.ScramSHA512, salt, salted512, 4096)
	if err != nil {
		t.Fatal(err)
	}
	allowGroups := acl.Binding{ResourceType: acl.ResourceGroup, PatternType: acl.PatternPrefixed, ResourceName: "cg-",
		Principal: "User:alice", Host: "*", Operation: acl.OpRead, Permission: acl.PermissionAllow}
	denyWrite := acl.Binding{ResourceType: acl.ResourceTopic, PatternType: acl.PatternLiteral, ResourceName: "orders",
		Principal: "User:alice", Host: "10.0.0.1", Operation: acl.OpWrite, Permission: acl.PermissionDeny}
	unknownKey := []byte("0123456789abcdef0123456789abcdef")
	encode := func(v interface{ MarshalBinary() ([]byte, error) }) []byte {
		b, err := v.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	type fixture struct{ name, about, key string }
	fixtures := []struct {
		fixture
		value []byte
	}{
		{fixture{"user-scram-sha-256", "SCRAM-SHA-256 credential of user alice (key u/<mechanism>/<user>, credential encoding 1): password alice-pw, 8192 iterations", "u/SCRAM-SHA-256/alice"}, encode(cred256)},
		{fixture{"user-scram-sha-512", "SCRAM-SHA-512 credential of user alice (key u/<mechanism>/<user>, credential encoding 1): password alice-pw, 4096 iterations", "u/SCRAM-SHA-512/alice"}, encode(cred512)},
		{fixture{"acl-allow", "ACL binding (key a/<binding key>, binding encoding 1): ALLOW User:alice from * READ on GROUP PREFIXED cg-", "a/" + allowGroups.Key()}, encode(allowGroups)},
		{fixture{"acl-deny", "ACL binding (key a/<binding key>, binding encoding 1): DENY User:alice from 10.0.0.1 WRITE on TOPIC LITERAL orders", "a/" + denyWrite.Key()}, encode(denyWrite)},
		{fixture{"unknown-users-key", "the key of unknown users' made-up credentials (k/unknown-users): 32 bytes as they are", "k/unknown-users"}, unknownKey},
	}
	st := memstore.New()
	stored := map[string][]byte{}
	var recs []store.Record
	for _, f := range fixtures {
		k, v := golden.Record(t, f.name, f.about, []byte(f.key), f.value)
		stored[f.name] = v
		if string(k) != f.key {
			t.Errorf("%s: stored key %q, this version's %q", f.name, k, f.key)
		}
		if !bytes.Equal(v, f.value) {
			t.Errorf("%s: encoding changed:\nstored  %x\nencoded %x", f.name, v, f.value)
		}
		recs = append(recs, store.Record{Key: k, Value: v})
	}
	if err := st.Append(ctx, authstate.Partition, recs); err != nil {
		t.Fatal(err)
	}
	s := open(t, st)

	for _, c := range []struct {
		mech, fixture string
		want          sasl.Credential
	}{{sasl.ScramSHA256, "user-scram-sha-256", cred256}, {sasl.ScramSHA512, "user-scram-sha-512", cred512}} {
		got, ok := s.Lookup("alice", c.mech)
		if !ok || !reflect.DeepEqual(got, c.want) {
			t.Errorf("alice's %s credential: %+v (%v), want %+v", c.mech, got, ok, c.want)
			continue
		}
		if b := encode(got); !bytes.Equal(b, stored[c.fixture]) {
			t.Errorf("alice's %s credential encodes to %x, stored %x", c.mech, b, stored[c.fixture])
		}
	}
	if err := plainLogin(s, "alice", "alice-pw"); err != nil {
		t.Errorf("PLAIN login with the password of the stored credentials: %v", err)
	}
	if err := plainLogin(s, "alice", "alice-pw2"); err == nil {
		t.Error("PLAIN login with another password succeeded")
	}

	got := s.ACLs(acl.Filter{ResourceType: acl.ResourceAny, PatternType: acl.PatternAny, Operation: acl.OpAny, Permission: acl.PermissionAny})
	if want := []acl.Binding{allowGroups, denyWrite}; !sameBindings(got, want) {
		t.Errorf("bindings %v, want %v", got, want)
	}
	for _, b := range got {
		name := map[acl.Permission]string{acl.PermissionAllow: "acl-allow", acl.PermissionDeny: "acl-deny"}[b.Permission]
		if e := encode(b); !bytes.Equal(e, stored[name]) {
			t.Errorf("%v encodes to %x, stored %x", b, e, stored[name])
		}
	}
	if !s.Authorize("User:alice", "10.0.0.2", acl.OpRead, acl.ResourceGroup, "cg-orders") {
		t.Error("the stored ALLOW on groups cg-* is not enforced")
	}
	if s.Authorize("User:alice", "10.0.0.1", acl.OpWrite, acl.ResourceTopic, "orders") {
		t.Error("the stored DENY is not enforced")
	}

	if key, _, _ := s.UnknownUser(sasl.ScramSHA256); !bytes.Equal(key, unknownKey) {
		t.Errorf("unknown users' key %x, stored %x", key, unknownKey)
	}
}

func sameBindings(a, b []acl.Binding) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		found := false
		for _, y := range b {
			found = found || x == y
		}
		if !found {
			return false
		}
	}
	return true
}
