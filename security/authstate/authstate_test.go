package authstate_test

import (
	"bytes"
	"context"
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"hash"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cohort-dev/cohort/security/acl"
	"github.com/cohort-dev/cohort/security/authstate"
	"github.com/cohort-dev/cohort/security/sasl"
	"github.com/cohort-dev/cohort/server"
	"github.com/cohort-dev/cohort/store"
	"github.com/cohort-dev/cohort/store/disk"
	"github.com/cohort-dev/cohort/store/memstore"
)

var ctx = context.Background()

// quiet discards logs (the tests that check logs make their own).
var quiet = slog.New(slog.DiscardHandler)

func open(t *testing.T, st store.Store) *authstate.State {
	t.Helper()
	return openWith(t, authstate.Options{Store: st})
}

// openShared opens st as a cluster node does (Options.Shared): other
// States write the same records.
func openShared(t *testing.T, st store.Store) *authstate.State {
	t.Helper()
	return openWith(t, authstate.Options{Store: st, Shared: true})
}

func openWith(t *testing.T, opts authstate.Options) *authstate.State {
	t.Helper()
	opts.Logger, opts.Authorizer = quiet, acl.Authorizer{SuperUsers: []string{"User:root"}}
	s, err := authstate.Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// upsert is what a Kafka admin client sends for user's password: it salts
// the password itself.
func upsert(t *testing.T, user, mechanism, password string, iterations int) server.UserUpsert {
	t.Helper()
	h, size := func() hash.Hash { return sha256.New() }, sha256.Size
	if mechanism == sasl.ScramSHA512 {
		h, size = func() hash.Hash { return sha512.New() }, sha512.Size
	}
	salt := []byte("salt-of-" + user)
	salted, err := pbkdf2.Key(h, password, salt, iterations, size)
	if err != nil {
		t.Fatal(err)
	}
	return server.UserUpsert{User: user, Mechanism: mechanism, Iterations: iterations, Salt: salt, SaltedPassword: salted}
}

// plainLogin authenticates with PLAIN, which checks the password against
// the stored SCRAM credentials.
func plainLogin(creds sasl.Credentials, user, password string) error {
	_, _, err := sasl.NewPlain(creds).Start().Step([]byte("\x00" + user + "\x00" + password))
	return err
}

func mustNil(t *testing.T, errs []error) {
	t.Helper()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("change %d: %v", i, err)
		}
	}
}

var readOrders = acl.Binding{ResourceType: acl.ResourceTopic, ResourceName: "orders", PatternType: acl.PatternLiteral,
	Principal: "User:alice", Host: "*", Operation: acl.OpRead, Permission: acl.PermissionAllow}

func TestSurvivesRestartOnDisk(t *testing.T) {
	dir := t.TempDir()
	openDisk := func() *disk.Store {
		d, err := disk.Open(disk.Options{Dir: dir, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	d := openDisk()
	s := open(t, d)
	if err := s.SetPassword(ctx, "alice", sasl.ScramSHA256, "alice-pw", 8192); err != nil {
		t.Fatal(err)
	}
	mustNil(t, s.AlterUsers(ctx, []server.UserUpsert{upsert(t, "bob", sasl.ScramSHA512, "bob-pw", 4096)}, nil))
	mustNil(t, s.CreateACLs(ctx, []acl.Binding{readOrders}))
	if created, err := s.EnsureUser(ctx, "admin", "admin-pw"); err != nil || !created {
		t.Fatalf("EnsureUser = %v, %v", created, err)
	}
	d.Close()

	d = openDisk()
	s = open(t, d)
	for _, u := range []struct{ user, pw string }{{"alice", "alice-pw"}, {"bob", "bob-pw"}, {"admin", "admin-pw"}} {
		if err := plainLogin(s, u.user, u.pw); err != nil {
			t.Errorf("%s after restart: %v", u.user, err)
		}
	}
	if got := s.ACLs(acl.Filter{ResourceType: acl.ResourceAny, PatternType: acl.PatternAny, Operation: acl.OpAny, Permission: acl.PermissionAny}); !slices.Equal(got, []acl.Binding{readOrders}) {
		t.Errorf("ACLs after restart = %v", got)
	}
	if !s.Authorize("User:alice", "10.0.0.1", acl.OpRead, acl.ResourceTopic, "orders") {
		t.Error("alice may not read orders after restart")
	}
	if err := s.DeleteUser(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, errs := s.DeleteACLs(ctx, []acl.Filter{{ResourceType: acl.ResourceTopic, PatternType: acl.PatternAny, Operation: acl.OpAny, Permission: acl.PermissionAny}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	d.Close()

	d = openDisk()
	defer d.Close()
	s = open(t, d)
	if _, ok := s.Lookup("alice", sasl.ScramSHA256); ok {
		t.Error("deleted user alice is back after restart")
	}
	if s.Authorize("User:alice", "10.0.0.1", acl.OpRead, acl.ResourceTopic, "orders") {
		t.Error("deleted ACL still applies after restart")
	}
	if got := s.Users(nil); len(got) != 2 || got["bob"] == nil || got["admin"] == nil {
		t.Errorf("Users after restart = %v", got)
	}
}

func TestUsersListsMechanismsAndIterations(t *testing.T) {
	s := open(t, memstore.New())
	mustNil(t, s.AlterUsers(ctx, []server.UserUpsert{
		upsert(t, "alice", sasl.ScramSHA512, "pw", 8192),
		upsert(t, "bob", sasl.ScramSHA256, "pw", 4096),
	}, nil))
	mustNil(t, s.AlterUsers(ctx, []server.UserUpsert{upsert(t, "alice", sasl.ScramSHA256, "pw", 4096)}, nil))
	want := map[string][]server.UserCredential{
		"alice": {{Mechanism: sasl.ScramSHA256, Iterations: 4096}, {Mechanism: sasl.ScramSHA512, Iterations: 8192}},
		"bob":   {{Mechanism: sasl.ScramSHA256, Iterations: 4096}},
	}
	if got := s.Users(nil); !equalUsers(got, want) {
		t.Errorf("Users(nil) = %v, want %v", got, want)
	}
	if got := s.Users([]string{"alice", "nobody", "alice"}); !equalUsers(got, map[string][]server.UserCredential{"alice": want["alice"]}) {
		t.Errorf("Users(alice, nobody) = %v", got)
	}
}

func equalUsers(a, b map[string][]server.UserCredential) bool {
	if len(a) != len(b) {
		return false
	}
	for u, cs := range a {
		if !slices.Equal(cs, b[u]) {
			return false
		}
	}
	return true
}

// TestAlterUsersKafkaRules follows Kafka's ScramControlManager: one result
// per user, duplicates and validation errors per user, deletions checked
// before upserts.
func TestAlterUsersKafkaRules(t *testing.T) {
	st := memstore.New()
	s := open(t, st)
	if err := s.SetPassword(ctx, "carol", sasl.ScramSHA256, "carol-pw", 4096); err != nil {
		t.Fatal(err)
	}
	if err := s.SetPassword(ctx, "dave", sasl.ScramSHA256, "dave-pw", 4096); err != nil {
		t.Fatal(err)
	}
	badSalted := upsert(t, "frank", sasl.ScramSHA256, "pw", 4096)
	badSalted.SaltedPassword = badSalted.SaltedPassword[:10]
	ups := []server.UserUpsert{
		upsert(t, "alice", sasl.ScramSHA256, "a", 4096),  // 0 ok
		upsert(t, "bob", sasl.ScramSHA256, "b", 4096),    // 1 dup with 2
		upsert(t, "bob", sasl.ScramSHA512, "b", 4096),    // 2
		upsert(t, "carol", sasl.ScramSHA512, "c", 4096),  // 3 dup with deletion 0
		upsert(t, "erin", sasl.ScramSHA256, "e", 4095),   // 4 too few
		upsert(t, "erin2", sasl.ScramSHA256, "e", 16385), // 5 too many
		{User: "gina", Mechanism: "", Iterations: 4096},  // 6 unknown mechanism
		upsert(t, "", sasl.ScramSHA256, "x", 4096),       // 7 empty user
		badSalted, // 8 salted password of the wrong size
		upsert(t, "nobody", sasl.ScramSHA256, "n", 4096), // 9: its deletion failed first
		upsert(t, "dave", sasl.ScramSHA512, "d", 4096),   // 10 dup with deletion 2
		upsert(t, "dave", sasl.ScramSHA256, "d", 4096),   // 11 third change: still dup
	}
	dels := []server.UserDeletion{
		{User: "carol", Mechanism: sasl.ScramSHA256},  // 12
		{User: "nobody", Mechanism: sasl.ScramSHA256}, // 13 not found
		{User: "dave", Mechanism: sasl.ScramSHA256},   // 14
	}
	appends := st.Appends()
	errs := s.AlterUsers(ctx, ups, dels)
	want := []error{nil, server.ErrAdminDuplicate, server.ErrAdminDuplicate, server.ErrAdminDuplicate,
		server.ErrUnacceptableCredential, server.ErrUnacceptableCredential, server.ErrUnsupportedMechanism,
		server.ErrUnacceptableCredential, server.ErrUnacceptableCredential, server.ErrAdminNotFound,
		server.ErrAdminDuplicate, server.ErrAdminDuplicate,
		server.ErrAdminDuplicate, server.ErrAdminNotFound, server.ErrAdminDuplicate}
	if len(errs) != len(want) {
		t.Fatalf("%d results for %d changes", len(errs), len(want))
	}
	for i := range want {
		if !errors.Is(errs[i], want[i]) || (want[i] == nil) != (errs[i] == nil) {
			t.Errorf("change %d: %v, want %v", i, errs[i], want[i])
		}
	}
	if st.Appends() != appends+1 {
		t.Errorf("%d appends for one request", st.Appends()-appends)
	}
	if err := plainLogin(s, "alice", "a"); err != nil {
		t.Errorf("the valid upsert was not applied: %v", err)
	}
	for _, u := range []string{"bob", "erin", "gina", "frank", "nobody"} {
		if got := s.Users([]string{u}); len(got) != 0 {
			t.Errorf("rejected user %s stored: %v", u, got)
		}
	}
	// The duplicates changed nothing of carol and dave.
	if err := plainLogin(s, "carol", "carol-pw"); err != nil {
		t.Errorf("carol: %v", err)
	}
	if got := s.Users([]string{"dave"})["dave"]; len(got) != 1 || got[0].Mechanism != sasl.ScramSHA256 {
		t.Errorf("dave = %v", got)
	}
	for _, err := range errs {
		if err != nil && strings.Contains(err.Error(), "pw") {
			t.Errorf("error names a password: %v", err)
		}
	}
}

func TestDeleteUserCredentialStopsLoginAtOnce(t *testing.T) {
	s := open(t, memstore.New())
	mustNil(t, s.AlterUsers(ctx, []server.UserUpsert{upsert(t, "alice", sasl.ScramSHA512, "pw", 4096)}, nil))
	if err := plainLogin(s, "alice", "pw"); err != nil {
		t.Fatal(err)
	}
	mustNil(t, s.AlterUsers(ctx, nil, []server.UserDeletion{{User: "alice", Mechanism: sasl.ScramSHA512}}))
	if err := plainLogin(s, "alice", "pw"); err == nil {
		t.Fatal("login after the credential was deleted")
	}
	if errs := s.AlterUsers(ctx, nil, []server.UserDeletion{{User: "alice", Mechanism: sasl.ScramSHA512}}); !errors.Is(errs[0], server.ErrAdminNotFound) {
		t.Errorf("deleting it again: %v", errs[0])
	}
	if err := s.DeleteUser(ctx, "alice"); !errors.Is(err, server.ErrAdminNotFound) {
		t.Errorf("DeleteUser of a user without credentials: %v", err)
	}
}

func TestEnsureUserKeepsAnExistingUser(t *testing.T) {
	s := open(t, memstore.New())
	created, err := s.EnsureUser(ctx, "admin", "first")
	if err != nil || !created {
		t.Fatalf("EnsureUser = %v, %v", created, err)
	}
	for _, m := range []string{sasl.ScramSHA256, sasl.ScramSHA512} {
		// The shape of cohort user set's credentials (kadm draws 24-byte
		// salts; 8192 iterations by default), so that the bootstrap super
		// user does not stand out among the users, nor from the made-up
		// credentials of unknown users.
		if c, ok := s.Lookup("admin", m); !ok || c.Iterations != 8192 || len(c.Salt) != 24 {
			t.Errorf("%s: %v, %d iterations, %d-byte salt; want 8192 and 24", m, ok, c.Iterations, len(c.Salt))
		}
	}
	if err := s.SetPassword(ctx, "admin", sasl.ScramSHA512, "changed", 4096); err != nil {
		t.Fatal(err)
	}
	if created, err := s.EnsureUser(ctx, "admin", "first"); err != nil || created {
		t.Fatalf("second EnsureUser = %v, %v", created, err)
	}
	if err := plainLogin(s, "admin", "changed"); err != nil {
		t.Errorf("EnsureUser overwrote the changed password: %v", err)
	}
	if _, err := s.EnsureUser(ctx, "", "pw"); !errors.Is(err, server.ErrUnacceptableCredential) {
		t.Errorf("empty user: %v", err)
	}
}

func TestSetPasswordChecks(t *testing.T) {
	s := open(t, memstore.New())
	for _, c := range []struct {
		user, mech string
		iters      int
		want       error
	}{
		{"a", "PLAIN", 4096, server.ErrUnsupportedMechanism},
		{"a", sasl.ScramSHA256, 100, server.ErrUnacceptableCredential},
		{"a", sasl.ScramSHA256, 1 << 20, server.ErrUnacceptableCredential},
		{"", sasl.ScramSHA256, 4096, server.ErrUnacceptableCredential},
	} {
		if err := s.SetPassword(ctx, c.user, c.mech, "pw", c.iters); !errors.Is(err, c.want) {
			t.Errorf("SetPassword(%q, %s, %d) = %v, want %v", c.user, c.mech, c.iters, err, c.want)
		}
	}
	if err := s.SetPassword(ctx, "a", sasl.ScramSHA256, "bad\x00pw", 4096); !errors.Is(err, server.ErrUnacceptableCredential) || strings.Contains(err.Error(), "bad") {
		t.Errorf("password with a NUL: %v", err)
	}
	if got := s.Users(nil); len(got) != 0 {
		t.Errorf("rejected credentials stored: %v", got)
	}
}

func TestACLsAuthorizeAtOnce(t *testing.T) {
	st := memstore.New()
	s := open(t, st)
	can := func() bool { return s.Authorize("User:alice", "10.0.0.1", acl.OpRead, acl.ResourceTopic, "orders") }
	if can() {
		t.Fatal("allowed without an ACL (AllowEveryoneIfNoACLFound is off)")
	}
	if !s.Authorize("User:root", "10.0.0.1", acl.OpAlter, acl.ResourceCluster, acl.ClusterName) {
		t.Fatal("super user refused")
	}
	invalid := readOrders
	invalid.Host = ""
	errs := s.CreateACLs(ctx, []acl.Binding{readOrders, invalid, readOrders})
	if errs[0] != nil || errs[2] != nil || !errors.Is(errs[1], acl.ErrInvalid) {
		t.Fatalf("CreateACLs = %v", errs)
	}
	if !can() {
		t.Fatal("the new ACL does not apply at once")
	}
	if ops := s.AuthorizedOperations("User:alice", "10.0.0.1", acl.ResourceTopic, "orders"); ops&(1<<acl.OpRead) == 0 {
		t.Errorf("AuthorizedOperations = %b", ops)
	}
	appends := st.Appends()
	if errs := s.CreateACLs(ctx, []acl.Binding{readOrders}); errs[0] != nil {
		t.Fatalf("creating an existing binding: %v", errs[0])
	}
	if st.Appends() != appends {
		t.Error("creating an existing binding wrote")
	}
	deny := readOrders
	deny.Permission = acl.PermissionDeny
	deny.Host = "10.0.0.1"
	mustNil(t, s.CreateACLs(ctx, []acl.Binding{deny}))
	if can() {
		t.Fatal("DENY does not apply at once")
	}
	any := acl.Filter{ResourceType: acl.ResourceAny, PatternType: acl.PatternAny, Operation: acl.OpAny, Permission: acl.PermissionAny}
	denies := any
	denies.Permission = acl.PermissionDeny
	bad := any
	bad.Operation = acl.OpUnknown
	deleted, errs := s.DeleteACLs(ctx, []acl.Filter{denies, bad, any})
	if errs[0] != nil || !errors.Is(errs[1], acl.ErrInvalid) || errs[2] != nil {
		t.Fatalf("DeleteACLs errors = %v", errs)
	}
	// Each filter reports what it matched before the request, as Kafka does.
	if !slices.Equal(deleted[0], []acl.Binding{deny}) || len(deleted[1]) != 0 || len(deleted[2]) != 2 {
		t.Errorf("DeleteACLs = %v", deleted)
	}
	if can() || len(s.ACLs(any)) != 0 {
		t.Error("deleted ACLs still apply")
	}
}

func TestStoreFailureChangesNothing(t *testing.T) {
	st := memstore.New()
	s := open(t, st)
	mustNil(t, s.CreateACLs(ctx, []acl.Binding{readOrders}))
	if err := s.SetPassword(ctx, "alice", sasl.ScramSHA256, "pw", 4096); err != nil {
		t.Fatal(err)
	}
	st.FailWith(errors.New("disk on fire"))
	other := readOrders
	other.ResourceName = "payments"
	if errs := s.CreateACLs(ctx, []acl.Binding{other}); !errors.Is(errs[0], server.ErrAdminStorage) {
		t.Errorf("CreateACLs: %v", errs[0])
	}
	_, errs := s.DeleteACLs(ctx, []acl.Filter{{ResourceType: acl.ResourceAny, PatternType: acl.PatternAny, Operation: acl.OpAny, Permission: acl.PermissionAny}})
	if !errors.Is(errs[0], server.ErrAdminStorage) {
		t.Errorf("DeleteACLs: %v", errs[0])
	}
	if errs := s.AlterUsers(ctx, []server.UserUpsert{upsert(t, "bob", sasl.ScramSHA256, "b", 4096)},
		[]server.UserDeletion{{User: "alice", Mechanism: sasl.ScramSHA256}}); !errors.Is(errs[0], server.ErrAdminStorage) || !errors.Is(errs[1], server.ErrAdminStorage) {
		t.Errorf("AlterUsers: %v", errs)
	}
	if err := s.DeleteUser(ctx, "alice"); !errors.Is(err, server.ErrAdminStorage) {
		t.Errorf("DeleteUser: %v", err)
	}
	if s.Authorize("User:alice", "h", acl.OpRead, acl.ResourceTopic, "payments") ||
		!s.Authorize("User:alice", "h", acl.OpRead, acl.ResourceTopic, "orders") {
		t.Error("a failed ACL change is visible")
	}
	if err := plainLogin(s, "alice", "pw"); err != nil {
		t.Error("a failed deletion is visible")
	}
	if _, ok := s.Lookup("bob", sasl.ScramSHA256); ok {
		t.Error("a failed upsert is visible")
	}
}

// TestApplyRecordsFromElsewhere feeds one State the records another one
// wrote, as the etcd watch does.
func TestApplyRecordsFromElsewhere(t *testing.T) {
	src := memstore.New()
	a := open(t, src)
	b := open(t, memstore.New())
	copyAll := func() {
		err := src.Load(ctx, authstate.Partition, func(r store.Record) error {
			b.Apply(r.Key, r.Value)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := a.SetPassword(ctx, "alice", sasl.ScramSHA256, "pw", 4096); err != nil {
		t.Fatal(err)
	}
	mustNil(t, a.CreateACLs(ctx, []acl.Binding{readOrders}))
	copyAll()
	if err := plainLogin(b, "alice", "pw"); err != nil {
		t.Fatal(err)
	}
	if !b.Authorize("User:alice", "h", acl.OpRead, acl.ResourceTopic, "orders") {
		t.Fatal("applied ACL does not authorize")
	}
	copyAll() // applying the same records again changes nothing
	if len(b.ACLs(acl.Filter{ResourceType: acl.ResourceAny, PatternType: acl.PatternAny, Operation: acl.OpAny, Permission: acl.PermissionAny})) != 1 {
		t.Fatal("re-applied binding listed twice")
	}
	b.Apply([]byte("u/"+sasl.ScramSHA256+"/alice"), nil)
	b.Apply([]byte("a/"+readOrders.Key()), []byte{})
	if _, ok := b.Lookup("alice", sasl.ScramSHA256); ok {
		t.Error("deletion of a credential not applied")
	}
	if b.Authorize("User:alice", "h", acl.OpRead, acl.ResourceTopic, "orders") {
		t.Error("deletion of a binding not applied")
	}
	// Malformed records are ignored; the previous value stays.
	copyAll()
	b.Apply([]byte("u/"+sasl.ScramSHA256+"/alice"), []byte("junk"))
	b.Apply([]byte("a/"+readOrders.Key()), []byte("junk"))
	b.Apply([]byte("x/what"), []byte("junk"))
	if err := plainLogin(b, "alice", "pw"); err != nil {
		t.Error("a malformed credential replaced a good one")
	}
	if !b.Authorize("User:alice", "h", acl.OpRead, acl.ResourceTopic, "orders") {
		t.Error("a malformed binding removed a good one")
	}
}

// TestOpenRefusesMalformedRecords: a record that cannot be read might be
// a DENY, so the state does not load without it.
func TestOpenRefusesMalformedRecords(t *testing.T) {
	for _, rec := range []store.Record{
		{Key: []byte("a/TOPIC/LITERAL/1:x/6:User:x/1:*/READ/DENY"), Value: []byte{0xff}},
		{Key: []byte("u/" + sasl.ScramSHA256 + "/alice"), Value: []byte{1}},
		{Key: []byte("u/MD5/alice"), Value: []byte{1}},
	} {
		st := memstore.New()
		if err := st.Append(ctx, authstate.Partition, []store.Record{rec}); err != nil {
			t.Fatal(err)
		}
		if _, err := authstate.Open(ctx, authstate.Options{Store: st, Logger: quiet}); err == nil {
			t.Errorf("Open accepted record %q", rec.Key)
		}
	}
}

// TestConcurrentAuthorizeDuringChanges is for -race: readers never lock.
func TestConcurrentAuthorizeDuringChanges(t *testing.T) {
	s := open(t, memstore.New())
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				s.Authorize("User:alice", "h", acl.OpRead, acl.ResourceTopic, "orders")
				s.Lookup("alice", sasl.ScramSHA256)
			}
		}()
	}
	for i := range 50 {
		mustNil(t, s.CreateACLs(ctx, []acl.Binding{readOrders}))
		s.DeleteACLs(ctx, []acl.Filter{{ResourceType: acl.ResourceAny, PatternType: acl.PatternAny, Operation: acl.OpAny, Permission: acl.PermissionAny}})
		if i%10 == 0 {
			if err := s.SetPassword(ctx, "alice", sasl.ScramSHA256, "pw", 4096); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(stop)
	wg.Wait()
}

// ACLVersion moves with every change of the ACLs, local or applied from
// elsewhere, and only then: the group coordinator keys its regex filtering
// on it.
func TestACLVersionFollowsACLChanges(t *testing.T) {
	src := memstore.New()
	a := open(t, src)
	b := open(t, memstore.New())
	v := a.ACLVersion()
	mustNil(t, a.CreateACLs(ctx, []acl.Binding{readOrders}))
	if a.ACLVersion() == v {
		t.Fatal("CreateACLs left the version")
	}
	v = a.ACLVersion()
	mustNil(t, a.CreateACLs(ctx, []acl.Binding{readOrders})) // exists: no change
	if err := a.SetPassword(ctx, "alice", sasl.ScramSHA256, "pw", 4096); err != nil {
		t.Fatal(err)
	}
	if a.ACLVersion() != v {
		t.Fatal("an unchanged binding or a credential moved the version")
	}
	any := acl.Filter{ResourceType: acl.ResourceAny, PatternType: acl.PatternAny, Operation: acl.OpAny, Permission: acl.PermissionAny}
	if _, errs := a.DeleteACLs(ctx, []acl.Filter{any}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if a.ACLVersion() == v {
		t.Fatal("DeleteACLs left the version")
	}
	vb := b.ACLVersion()
	b.Apply([]byte("a/"+readOrders.Key()), mustMarshal(t, readOrders))
	if b.ACLVersion() == vb {
		t.Fatal("a binding applied from elsewhere left the version")
	}
	vb = b.ACLVersion()
	if err := b.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if b.ACLVersion() == vb {
		t.Fatal("Reload left the version")
	}
}

func mustMarshal(t *testing.T, b acl.Binding) []byte {
	t.Helper()
	v, err := b.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestUnknownUserKeyAndShape: a store without users gets no key record
// (an earlier cohort could not read it); the first credential stored brings
// a random key for the credentials made up for unknown users; a later Open
// of the same store (a restart) and another node (Apply) use that same key,
// so an unknown user's salt never changes; a store with users but no key (an
// earlier version's) gets one at Open; and the made-up credentials take the
// most common iteration count and salt length of the stored ones.
func TestUnknownUserKeyAndShape(t *testing.T) {
	records := func(st store.Store) map[string]int {
		out := map[string]int{}
		if err := st.Load(ctx, authstate.Partition, func(r store.Record) error {
			out[string(r.Key)] = len(r.Value)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	st := memstore.New()
	a := open(t, st)
	mustNil(t, a.CreateACLs(ctx, []acl.Binding{readOrders}))
	if key, _, _ := a.UnknownUser(sasl.ScramSHA512); key != nil || records(st)["k/unknown-users"] != 0 {
		t.Fatalf("a store without users got an unknown-user key: %v", records(st))
	}
	if err := a.SetPassword(ctx, "first", sasl.ScramSHA512, "pw", 4096); err != nil {
		t.Fatal(err)
	}
	key, _, _ := a.UnknownUser(sasl.ScramSHA512)
	if len(key) != 32 || records(st)["k/unknown-users"] != 32 {
		t.Fatalf("after the first user: key of %d bytes, records %v", len(key), records(st))
	}
	if again, _, _ := open(t, st).UnknownUser(sasl.ScramSHA512); !bytes.Equal(again, key) {
		t.Fatal("reopening the store changed the unknown-user key")
	}
	// An earlier version's store: a user, no key.
	old := memstore.New()
	cred, err := sasl.NewCredential(sasl.ScramSHA512, "pw", 4096)
	if err != nil {
		t.Fatal(err)
	}
	val, _ := cred.MarshalBinary()
	if err := old.Append(ctx, authstate.Partition, []store.Record{{Key: []byte("u/SCRAM-SHA-512/olduser"), Value: val}}); err != nil {
		t.Fatal(err)
	}
	other := open(t, old)
	if k, _, _ := other.UnknownUser(sasl.ScramSHA512); len(k) != 32 || bytes.Equal(k, key) || records(old)["k/unknown-users"] != 32 {
		t.Fatalf("an earlier version's store with a user: key of %d bytes, records %v", len(k), records(old))
	}
	// Another node writing its own key first (a race at a new cluster's
	// start): the watch hands every node the record etcd kept.
	err = st.Load(ctx, authstate.Partition, func(r store.Record) error {
		other.Apply(r.Key, r.Value)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if k, _, _ := other.UnknownUser(sasl.ScramSHA512); !bytes.Equal(k, key) {
		t.Fatal("Apply of the unknown-user record did not replace the key")
	}
	// A later version's k/ record is skipped, not refused.
	if err := st.Append(ctx, authstate.Partition, []store.Record{{Key: []byte("k/from-the-future"), Value: []byte{1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := authstate.Open(ctx, authstate.Options{Store: st, Logger: quiet}); err != nil {
		t.Fatalf("a later version's k/ record: %v", err)
	}

	// Two users as kadm makes them (24-byte salts here), one bootstrap-like.
	mustNil(t, a.AlterUsers(ctx, []server.UserUpsert{upsert(t, "alice", sasl.ScramSHA512, "a", 8192),
		upsert(t, "brian", sasl.ScramSHA512, "b", 8192)}, nil))
	_, iters, saltLen := a.UnknownUser(sasl.ScramSHA512)
	if want := len("salt-of-alice"); iters != 8192 || saltLen != want {
		t.Fatalf("shape %d iterations, %d-byte salt; want 8192 and %d (alice's and brian's)", iters, saltLen, want)
	}
	// A mechanism no user has: the shape over all credentials.
	if _, iters, _ = a.UnknownUser(sasl.ScramSHA256); iters != 8192 {
		t.Fatalf("SCRAM-SHA-256 (no user): %d iterations", iters)
	}
	// The store's records still load: the key record is a known record.
	if _, err := authstate.Open(ctx, authstate.Options{Store: st, Logger: quiet}); err != nil {
		t.Fatal(err)
	}
}

// TestSyncPublishesAChangeWhole: a DeleteACLs of node A that removes a DENY
// and the ALLOW it overrode is one write; node B, applying it from the
// watch (Sync), must never authorize by the ALLOW without the DENY, which
// no node ever held. Each read below checks what B decides at that moment.
func TestSyncPublishesAChangeWhole(t *testing.T) {
	src := memstore.New()
	a := open(t, src)
	b := open(t, memstore.New())
	allowAll := acl.Binding{ResourceType: acl.ResourceTopic, ResourceName: "orders", PatternType: acl.PatternLiteral,
		Principal: "User:*", Host: "*", Operation: acl.OpRead, Permission: acl.PermissionAllow}
	denyBob := acl.Binding{ResourceType: acl.ResourceTopic, ResourceName: "orders", PatternType: acl.PatternLiteral,
		Principal: "User:bob", Host: "*", Operation: acl.OpRead, Permission: acl.PermissionDeny}
	mustNil(t, a.CreateACLs(ctx, []acl.Binding{allowAll, denyBob}))
	keys := [][]byte{[]byte("a/" + denyBob.Key()), []byte("a/" + allowAll.Key())}
	current := func(key []byte) ([]byte, error) {
		var v []byte
		err := src.Load(ctx, authstate.Partition, func(r store.Record) error {
			if bytes.Equal(r.Key, key) {
				v = r.Value
			}
			return nil
		})
		return v, err
	}
	if err := b.Sync(keys, current); err != nil {
		t.Fatal(err)
	}
	if b.Authorize("User:bob", "h", acl.OpRead, acl.ResourceTopic, "orders") {
		t.Fatal("bob is allowed before the change")
	}
	// One DeleteACLs removes both: bob ends up without access.
	orders := "orders"
	if _, errs := a.DeleteACLs(ctx, []acl.Filter{{ResourceType: acl.ResourceTopic, ResourceName: &orders,
		PatternType: acl.PatternLiteral, Operation: acl.OpAny, Permission: acl.PermissionAny}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	err := b.Sync(keys, func(key []byte) ([]byte, error) {
		if b.Authorize("User:bob", "h", acl.OpRead, acl.ResourceTopic, "orders") {
			t.Errorf("bob is allowed while B applies the deletion (reading %s): the DENY is gone, the ALLOW not yet", key)
		}
		return current(key)
	})
	if err != nil {
		t.Fatal(err)
	}
	if b.Authorize("User:bob", "h", acl.OpRead, acl.ResourceTopic, "orders") || len(b.ACLs(acl.Filter{ResourceType: acl.ResourceAny,
		PatternType: acl.PatternAny, Operation: acl.OpAny, Permission: acl.PermissionAny})) != 0 {
		t.Fatal("the deletion is not applied")
	}
}
