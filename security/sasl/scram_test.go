package sasl

import (
	"bytes"
	"encoding/base64"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xdg-go/scram"
)

var scramMechs = []struct {
	name string
	hash scram.HashGeneratorFcn
}{
	{ScramSHA256, scram.SHA256},
	{ScramSHA512, scram.SHA512},
}

func scramStore(t testing.TB) memCreds {
	m := memCreds{}
	for _, mech := range scramMechs {
		m.add(t, "alice", mech.name, "alice-secret")
		m.add(t, "a,b=c", mech.name, "odd-secret")
	}
	return m
}

func newSCRAM(t testing.TB, mech string, creds Credentials) Mechanism {
	t.Helper()
	m, err := NewSCRAM(mech, creds)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// scramExchange runs xdg-go/scram's client against a server session. It
// returns the session and the error of the server's failing Step, if
// any; on success it also checks that the client accepts the server's
// final message.
func scramExchange(t *testing.T, m Mechanism, h scram.HashGeneratorFcn, user, password, authzid string) (Session, error) {
	t.Helper()
	client, err := h.NewClient(user, password, authzid)
	if err != nil {
		t.Fatal(err)
	}
	conv := client.NewConversation()
	s := m.Start()
	c1, err := conv.Step("")
	if err != nil {
		t.Fatal(err)
	}
	s1, done, err := s.Step([]byte(c1))
	if err != nil {
		return s, err
	}
	if done {
		t.Fatal("done after the first message")
	}
	c2, err := conv.Step(string(s1))
	if err != nil {
		t.Fatalf("client refused the server-first message %q: %v", s1, err)
	}
	s2, done, err := s.Step([]byte(c2))
	if err != nil {
		return s, err
	}
	if !done {
		t.Fatal("success without done")
	}
	if _, err := conv.Step(string(s2)); err != nil || !conv.Valid() {
		t.Fatalf("client refused the server-final message %q: %v", s2, err)
	}
	return s, nil
}

// wantFailure checks err wraps ErrAuthFailed, names the reason, and
// reveals none of the secrets.
func wantFailure(t *testing.T, err error, reason string, secrets ...string) {
	t.Helper()
	if !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("error %v does not wrap ErrAuthFailed", err)
	}
	if !strings.Contains(err.Error(), reason) {
		t.Errorf("error %q does not say %q", err, reason)
	}
	for _, s := range secrets {
		if strings.Contains(err.Error(), s) {
			t.Errorf("error %q reveals a secret", err)
		}
	}
}

func TestSCRAMSuccess(t *testing.T) {
	store := scramStore(t)
	for _, mech := range scramMechs {
		t.Run(mech.name, func(t *testing.T) {
			m := newSCRAM(t, mech.name, store)
			if m.Name() != mech.name {
				t.Errorf("Name() = %q", m.Name())
			}
			s, err := scramExchange(t, m, mech.hash, "alice", "alice-secret", "")
			if err != nil {
				t.Fatal(err)
			}
			if s.Principal() != "User:alice" || !s.Expiry().IsZero() {
				t.Errorf("principal %q, expiry %v", s.Principal(), s.Expiry())
			}
			if _, _, err := s.Step([]byte("n,,n=alice,r=x")); !errors.Is(err, ErrAuthFailed) {
				t.Errorf("Step after success: %v", err)
			}
			// A user name with "," and "=" travels escaped.
			s, err = scramExchange(t, m, mech.hash, "a,b=c", "odd-secret", "")
			if err != nil || s.Principal() != "User:a,b=c" {
				t.Errorf("escaped user name: %v, principal %q", err, s.Principal())
			}
		})
	}
}

func TestSCRAMWrongPassword(t *testing.T) {
	store := scramStore(t)
	for _, mech := range scramMechs {
		m := newSCRAM(t, mech.name, store)
		s, err := scramExchange(t, m, mech.hash, "alice", "wrong-secret", "")
		wantFailure(t, err, `invalid proof for user "alice"`, "wrong-secret", "alice-secret")
		if s.Principal() != "" {
			t.Errorf("principal %q after failure", s.Principal())
		}
	}
}

func TestSCRAMUnknownUser(t *testing.T) {
	store := scramStore(t)
	for _, mech := range scramMechs {
		m := newSCRAM(t, mech.name, store)
		// The first message gets a normal answer; the exchange fails at the
		// proof.
		_, err := scramExchange(t, m, mech.hash, "mallory", "guess", "")
		// The name is not echoed (a password typed as the user name
		// would reach the log); its length and hash prefix are.
		wantFailure(t, err, `unknown user (name withheld: 7 bytes, sha256 c0a49776...)`, "guess", "mallory")
		// The fake salt is stable, as a real user's is, and differs
		// between users.
		salt := func(user string) string {
			s1, _, err := m.Start().Step([]byte("n,,n=" + user + ",r=abc"))
			if err != nil {
				t.Fatal(err)
			}
			// Without a stored shape to copy: cohort's own (DefaultIterations).
			m := regexp.MustCompile(`,s=([^,]+),i=8192$`).FindStringSubmatch(string(s1))
			if m == nil {
				t.Fatalf("server-first %q: want a salt and 8192 iterations", s1)
			}
			return m[1]
		}
		first, again := salt("mallory"), salt("mallory")
		if first != again || first == salt("trudy") {
			t.Errorf("fake salts are not stable per user")
		}
	}
}

// TestSCRAMNonceAndReplay tampers with the client-final message and
// replays a successful one in a second session.
func TestSCRAMNonceAndReplay(t *testing.T) {
	store := scramStore(t)
	for _, mech := range scramMechs {
		m := newSCRAM(t, mech.name, store)
		client, _ := mech.hash.NewClient("alice", "alice-secret", "")

		conv := client.NewConversation()
		s := m.Start()
		c1, _ := conv.Step("")
		s1, _, err := s.Step([]byte(c1))
		if err != nil {
			t.Fatal(err)
		}
		c2, _ := conv.Step(string(s1))
		tampered := strings.Replace(c2, ",r=", ",r=X", 1)
		_, _, err = s.Step([]byte(tampered))
		wantFailure(t, err, `nonce mismatch in the client-final message of user "alice"`)

		// A successful exchange, then its messages replayed.
		conv = client.NewConversation()
		s = m.Start()
		c1, _ = conv.Step("")
		s1, _, _ = s.Step([]byte(c1))
		c2, _ = conv.Step(string(s1))
		if _, done, err := s.Step([]byte(c2)); err != nil || !done {
			t.Fatalf("exchange failed: %v", err)
		}
		s = m.Start()
		s1b, _, err := s.Step([]byte(c1))
		if err != nil {
			t.Fatal(err)
		}
		if string(s1b) == string(s1) {
			t.Fatal("the server nonce repeated")
		}
		_, _, err = s.Step([]byte(c2))
		wantFailure(t, err, "nonce mismatch")

		// The old proof, with the nonce of a new session.
		s = m.Start()
		s1c, _, _ := s.Step([]byte(c1))
		_, _, err = s.Step([]byte(strings.Replace(c2, nonceOf(t, s1), nonceOf(t, s1c), 1)))
		wantFailure(t, err, `invalid proof for user "alice"`)
	}
}

// nonceOf returns the nonce of a server-first message.
func nonceOf(t *testing.T, s1 []byte) string {
	t.Helper()
	m := regexp.MustCompile(`^r=([^,]+),`).FindSubmatch(s1)
	if m == nil {
		t.Fatalf("server-first message %q", s1)
	}
	return string(m[1])
}

// rfcClientWithAuthzid runs an RFC 5802 client that sends an authzid
// ("n,a=...,"), written out here so that the exact messages are pinned
// (xdg-go/scram's client before v1.2.0 wrote "n,alice,").
func rfcClientWithAuthzid(t *testing.T, m Mechanism, h scramHash, user, password, authzid string) (Session, error) {
	t.Helper()
	gs2 := "n,a=" + authzid + ","
	c1b := "n=" + user + ",r=clientnonce"
	s := m.Start()
	s1, _, err := s.Step([]byte(gs2 + c1b))
	if err != nil {
		return s, err
	}
	f := regexp.MustCompile(`^r=([^,]+),s=([^,]+),i=(\d+)$`).FindStringSubmatch(string(s1))
	if f == nil {
		t.Fatalf("server-first message %q", s1)
	}
	iters, _ := strconv.Atoi(f[3])
	salted, err := saltPassword(h, password, b64(t, f[2]), iters)
	if err != nil {
		t.Fatal(err)
	}
	clientKey := hmacOf(h, salted, "Client Key")
	stored, serverKey := deriveKeys(h, salted)
	c2wop := "c=" + base64.StdEncoding.EncodeToString([]byte(gs2)) + ",r=" + f[1]
	authMsg := c1b + "," + string(s1) + "," + c2wop
	sig := hmacOf(h, stored, authMsg)
	for i := range clientKey {
		clientKey[i] ^= sig[i]
	}
	s2, done, err := s.Step([]byte(c2wop + ",p=" + base64.StdEncoding.EncodeToString(clientKey)))
	if err != nil {
		return s, err
	}
	want := "v=" + base64.StdEncoding.EncodeToString(hmacOf(h, serverKey, authMsg))
	if !done || string(s2) != want {
		t.Fatalf("server-final %q (done %v), want %q", s2, done, want)
	}
	return s, nil
}

// TestSCRAMAuthzid pins the authzid rules, and that xdg-go/scram gets the
// GS2 header as the client sent it (see scramSession.first).
func TestSCRAMAuthzid(t *testing.T) {
	store := scramStore(t)
	for _, mech := range scramMechs {
		m := newSCRAM(t, mech.name, store)
		h, _ := hashFor(mech.name)
		s, err := rfcClientWithAuthzid(t, m, h, "alice", "alice-secret", "alice")
		if err != nil || s.Principal() != "User:alice" {
			t.Errorf("%s: authzid equal to the user: %v", mech.name, err)
		}
		_, err = rfcClientWithAuthzid(t, m, h, "alice", "wrong", "alice")
		wantFailure(t, err, `invalid proof for user "alice"`)
		_, err = rfcClientWithAuthzid(t, m, h, "alice", "alice-secret", "bob")
		wantFailure(t, err, `authorization id "bob" differs from user "alice"`)
		// xdg-go/scram's own client sends the "a=" since v1.2.0.
		s, err = scramExchange(t, m, mech.hash, "alice", "alice-secret", "alice")
		if err != nil || s.Principal() != "User:alice" {
			t.Errorf("%s: xdg-go/scram client with an authzid: %v", mech.name, err)
		}
	}
}

func TestSCRAMExtensions(t *testing.T) {
	m := newSCRAM(t, ScramSHA256, scramStore(t))
	for _, c1 := range []string{"n,,n=alice,r=abc,tokenauth=true", "n,,n=alice,r=abc,tokenauth=TRUE"} {
		_, _, err := m.Start().Step([]byte(c1))
		wantFailure(t, err, "tokenauth")
	}
	for _, c1 := range []string{"n,,n=alice,r=abc,tokenauth=false", "n,,n=alice,r=abc,foo=bar,baz=1"} {
		if _, _, err := m.Start().Step([]byte(c1)); err != nil {
			t.Errorf("%q: %v", c1, err)
		}
	}
}

func TestSCRAMUnusableCredential(t *testing.T) {
	good, _ := NewCredential(ScramSHA256, "pw", MinIterations)
	weak := good
	weak.Iterations = 1000
	store := memCreds{
		{"weak", ScramSHA256}:  weak,
		{"cross", ScramSHA512}: good, // a SHA-256 credential filed under SHA-512
	}
	_, _, err := newSCRAM(t, ScramSHA256, store).Start().Step([]byte("n,,n=weak,r=abc"))
	wantFailure(t, err, `credential of user "weak" is unusable`)
	_, _, err = newSCRAM(t, ScramSHA512, store).Start().Step([]byte("n,,n=cross,r=abc"))
	wantFailure(t, err, `credential of user "cross" is unusable`)
	if _, err := NewSCRAM(Plain, store); err == nil {
		t.Errorf("NewSCRAM accepted PLAIN")
	}
}

func TestSCRAMMalformed(t *testing.T) {
	m := newSCRAM(t, ScramSHA256, scramStore(t))
	for _, c1 := range []string{
		"", ",,n=alice,r=abc", "y,,n=alice,r=abc", "p=tls-unique,,n=alice,r=abc",
		"n,,n=alice", "n,x=alice,n=alice,r=abc", "n,a=,n=alice,r=abc", "n,,m=ext,n=alice,r=abc",
		"n,,u=alice,r=abc", "n,,n=,r=abc", "n,,n=al=ice,r=abc", "n,,n=alice,r=", "n,,n=alice,r=a b",
		"n,,n=alice,x=abc", "n,,n=alice,r=abc,", "n,,n=alice,r=abc,k", "n,,n=alice,r=abc,k=v,k=w",
		"n,,n=alice,r=abc,1=v", "n,,n=al\x00ice,r=abc", "n,,n=\xff,r=abc",
		"n,,n=alice,r=abc" + strings.Repeat("x", maxSCRAMMessage),
	} {
		s := m.Start()
		_, _, err := s.Step([]byte(c1))
		wantFailure(t, err, "malformed")
		if _, _, err := s.Step([]byte(c1)); !errors.Is(err, errFinished) {
			t.Errorf("%q: Step after failure: %v", c1, err)
		}
	}
	for _, c2 := range []string{
		"", "c=biws", "c=biws,r=abc", "c=!!!,r=abc,p=AAAA", "x=biws,r=abc,p=AAAA", "c=biws,x=abc,p=AAAA",
		"c=biws,r=abc,p=AAAA", // a proof shorter than the hash
		"c=biws,r=abc,q=" + strings.Repeat("A", 44), "c=biws,r=abc,k,p=" + strings.Repeat("A", 43) + "=",
		"c=biws,r=abc,p=" + strings.Repeat("A", 43) + "!",
	} {
		s := m.Start()
		if _, _, err := s.Step([]byte("n,,n=alice,r=abc")); err != nil {
			t.Fatal(err)
		}
		_, _, err := s.Step([]byte(c2))
		wantFailure(t, err, "malformed")
	}
	// Channel binding that is not the GS2 header the client sent.
	s := m.Start()
	s1, _, _ := s.Step([]byte("n,,n=alice,r=abc"))
	_, _, err := s.Step([]byte("c=eSws,r=" + nonceOf(t, s1) + ",p=" + strings.Repeat("A", 43) + "="))
	wantFailure(t, err, "channel binding mismatch")
}

func TestSCRAMNoExpiry(t *testing.T) {
	s := newSCRAM(t, ScramSHA512, scramStore(t)).Start()
	if s.Expiry() != (time.Time{}) || s.Principal() != "" {
		t.Errorf("fresh session: principal %q, expiry %v", s.Principal(), s.Expiry())
	}
}

// shapedCreds is a store that shapes unknown users' credentials
// (UnknownUsers).
type shapedCreds struct {
	memCreds
	key             []byte
	iters, saltSize int
}

func (s shapedCreds) UnknownUser(string) ([]byte, int, int) { return s.key, s.iters, s.saltSize }

// TestSCRAMUnknownUserShapedByStore: with a store implementing
// UnknownUsers, an unknown user's first answer has the store's iteration
// count and salt length, and its salt depends only on the store's key (the
// same on every node and after a restart), not on the process; with PLAIN
// the check costs that iteration count too.
func TestSCRAMUnknownUserShapedByStore(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	first := regexp.MustCompile(`,s=([^,]+),i=(\d+)$`)
	answer := func(creds Credentials) (salt []byte, iters string) {
		s1, _, err := newSCRAM(t, ScramSHA512, creds).Start().Step([]byte("n,,n=mallory,r=abc"))
		if err != nil {
			t.Fatal(err)
		}
		m := first.FindStringSubmatch(string(s1))
		return b64(t, m[1]), m[2]
	}
	// A shape unlike cohort's own, so that taking it shows.
	nodeA := shapedCreds{memCreds: scramStore(t), key: key, iters: 16384, saltSize: 40}
	nodeB := shapedCreds{memCreds: memCreds{}, key: bytes.Clone(key), iters: 16384, saltSize: 40}
	saltA, iters := answer(nodeA)
	if len(saltA) != 40 || iters != "16384" {
		t.Fatalf("unknown user: %d-byte salt, %s iterations; want the store's 40 and 16384", len(saltA), iters)
	}
	if saltB, _ := answer(nodeB); !bytes.Equal(saltA, saltB) {
		t.Fatal("two stores with one key gave an unknown user different salts")
	}
	nodeB.key = bytes.Repeat([]byte{8}, 32)
	if saltB, _ := answer(nodeB); bytes.Equal(saltA, saltB) {
		t.Fatal("the salt does not depend on the key")
	}
	// Out-of-range shapes fall back to the defaults.
	if salt, iters := answer(shapedCreds{memCreds: memCreds{}, key: key, iters: 99, saltSize: 4}); len(salt) != saltLen || iters != "8192" {
		t.Fatalf("out-of-range shape: %d-byte salt, %s iterations", len(salt), iters)
	}
}

// TestSCRAMUserWithOnlyTheOtherMechanism: a client that authenticates with
// SCRAM-SHA-256 as a user that has only a SCRAM-SHA-512 credential (or the
// reverse: cohort user set --mechanism, or Kafka's tools, set one) fails as
// an unknown user does, the client's answer telling nothing. The log reason
// said "unknown user (name withheld ...)", which sent the operator looking
// for a missing user; it now names the user (the store knows it) and the
// mechanism it does have. The password is still never in the reason.
func TestSCRAMUserWithOnlyTheOtherMechanism(t *testing.T) {
	store := memCreds{}
	store.add(t, "bob", ScramSHA512, "bob-secret")
	store.add(t, "carol", ScramSHA256, "carol-secret")
	m := newSCRAM(t, ScramSHA256, store)
	_, err := scramExchange(t, m, scram.SHA256, "bob", "bob-secret", "")
	wantFailure(t, err, `user "bob" has no SCRAM-SHA-256 credential, only SCRAM-SHA-512`, "bob-secret")
	m = newSCRAM(t, ScramSHA512, store)
	_, err = scramExchange(t, m, scram.SHA512, "carol", "carol-secret", "")
	wantFailure(t, err, `user "carol" has no SCRAM-SHA-512 credential, only SCRAM-SHA-256`, "carol-secret")
	// A user with neither is still withheld.
	_, err = scramExchange(t, m, scram.SHA512, "mallory", "guess", "")
	wantFailure(t, err, `unknown user (name withheld`, "mallory", "guess")
}
