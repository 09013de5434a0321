package sasl

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

// memCreds is a Credentials keyed by user and mechanism.
type memCreds map[[2]string]Credential

func (m memCreds) Lookup(user, mechanism string) (Credential, bool) {
	c, ok := m[[2]string{user, mechanism}]
	return c, ok
}

// add stores a credential made from password for user and mechanism.
func (m memCreds) add(t testing.TB, user, mechanism, password string) {
	t.Helper()
	c, err := NewCredential(mechanism, password, MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	m[[2]string{user, mechanism}] = c
}

func b64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCredentialRFC7677 checks the derived keys against the SCRAM-SHA-256
// exchange of RFC 7677 section 3 (user "user", password "pencil").
func TestCredentialRFC7677(t *testing.T) {
	salt := b64(t, "W22ZaJ0SNY7soEsUEjb6gQ==")
	salted, err := saltPassword(hashSHA256, "pencil", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	c, err := CredentialFromSalted(ScramSHA256, salt, salted, 4096)
	if err != nil {
		t.Fatal(err)
	}
	const (
		c1b  = "n=user,r=rOprNGfwEbeRWgbNEkqO"
		s1   = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
		c2wp = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
	)
	authMsg := c1b + "," + s1 + "," + c2wp
	proof := b64(t, "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
	sig := hmacOf(hashSHA256, c.StoredKey, authMsg)
	clientKey := make([]byte, len(proof))
	for i := range proof {
		clientKey[i] = proof[i] ^ sig[i]
	}
	if h := sha256.Sum256(clientKey); !bytes.Equal(h[:], c.StoredKey) {
		t.Errorf("StoredKey does not verify RFC 7677's proof")
	}
	wantV := b64(t, "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
	if got := hmacOf(hashSHA256, c.ServerKey, authMsg); !hmac.Equal(got, wantV) {
		t.Errorf("ServerKey gives server signature %x, want %x", got, wantV)
	}
}

func TestNewCredential(t *testing.T) {
	for _, mech := range []string{ScramSHA256, ScramSHA512} {
		a, err := NewCredential(mech, "secret", MinIterations)
		if err != nil {
			t.Fatal(err)
		}
		b, err := NewCredential(mech, "secret", MaxIterations)
		if err != nil {
			t.Fatal(err)
		}
		h, _ := hashFor(mech)
		if a.Mechanism != mech || len(a.Salt) != saltLen || a.Iterations != MinIterations ||
			len(a.StoredKey) != h.size || len(a.ServerKey) != h.size {
			t.Errorf("%s: credential %+v", mech, a)
		}
		if bytes.Equal(a.Salt, b.Salt) || bytes.Equal(a.StoredKey, b.StoredKey) {
			t.Errorf("%s: two credentials share a salt or a key", mech)
		}
		// The same password and salt give the same keys by the other
		// constructor.
		salted, _ := saltPassword(h, "secret", a.Salt, a.Iterations)
		c, err := CredentialFromSalted(mech, a.Salt, salted, a.Iterations)
		if err != nil || !bytes.Equal(c.StoredKey, a.StoredKey) || !bytes.Equal(c.ServerKey, a.ServerKey) {
			t.Errorf("%s: CredentialFromSalted disagrees with NewCredential (%v)", mech, err)
		}
	}
	// The password's bytes are salted as they are, as Kafka's clients do:
	// not SASLprep's form (which maps the no-break space to a space).
	a, _ := NewCredential(ScramSHA256, "pass\u00a0word", MinIterations)
	for pw, want := range map[string]bool{"pass\u00a0word": true, "pass word": false} {
		salted, _ := saltPassword(hashSHA256, pw, a.Salt, a.Iterations)
		if stored, _ := deriveKeys(hashSHA256, salted); bytes.Equal(stored, a.StoredKey) != want {
			t.Errorf("%+q matches the credential: %v, want %v", pw, !want, want)
		}
	}
}

func TestNewCredentialErrors(t *testing.T) {
	for _, tc := range []struct {
		mech, password string
		iterations     int
	}{
		{"SCRAM-SHA-1", "pw", MinIterations},
		{ScramSHA256, "pw", MinIterations - 1},
		{ScramSHA512, "pw", MaxIterations + 1},
		{ScramSHA256, "nul\x00secret", MinIterations},
	} {
		_, err := NewCredential(tc.mech, tc.password, tc.iterations)
		if err == nil {
			t.Errorf("NewCredential(%q, %d) succeeded", tc.mech, tc.iterations)
			continue
		}
		if strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "0007") {
			t.Errorf("error reveals the password: %v", err)
		}
	}
	salted := make([]byte, 32)
	for name, f := range map[string]func() error{
		"short salted password": func() error { _, err := CredentialFromSalted(ScramSHA512, []byte("s"), salted, 4096); return err },
		"empty salt":            func() error { _, err := CredentialFromSalted(ScramSHA256, nil, salted, 4096); return err },
		"too few iterations":    func() error { _, err := CredentialFromSalted(ScramSHA256, []byte("s"), salted, 4095); return err },
		"too many iterations":   func() error { _, err := CredentialFromSalted(ScramSHA256, []byte("s"), salted, 16385); return err },
		"unknown mechanism":     func() error { _, err := CredentialFromSalted("PLAIN", []byte("s"), salted, 4096); return err },
	} {
		if f() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestCredentialBinary(t *testing.T) {
	for _, mech := range []string{ScramSHA256, ScramSHA512} {
		c, _ := NewCredential(mech, "pw", 8192)
		b, err := c.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var d Credential
		if err := d.UnmarshalBinary(b); err != nil {
			t.Fatal(err)
		}
		if d.Mechanism != c.Mechanism || d.Iterations != c.Iterations || !bytes.Equal(d.Salt, c.Salt) ||
			!bytes.Equal(d.StoredKey, c.StoredKey) || !bytes.Equal(d.ServerKey, c.ServerKey) {
			t.Errorf("%s: round trip gave %+v, want %+v", mech, d, c)
		}
		// Every truncation, an extra byte, another version or mechanism
		// is refused, and leaves the target alone.
		for i := range b {
			if err := d.UnmarshalBinary(b[:i]); err == nil {
				t.Errorf("%s: %d-byte prefix accepted", mech, i)
			}
		}
		bad := [][]byte{append(bytes.Clone(b), 0), append([]byte{2}, b[1:]...), append([]byte{1, 3}, b[2:]...)}
		for _, x := range bad {
			if err := d.UnmarshalBinary(x); err == nil {
				t.Errorf("%s: %x accepted", mech, x)
			}
		}
		if d.Iterations != 8192 {
			t.Errorf("failed UnmarshalBinary changed the credential")
		}
	}
	if _, err := (Credential{Mechanism: ScramSHA256, Iterations: 4096}).MarshalBinary(); err == nil {
		t.Errorf("MarshalBinary encoded a credential without salt or keys")
	}
	// A well-formed encoding of an iteration count below the minimum.
	c, _ := NewCredential(ScramSHA256, "pw", MinIterations)
	c.Iterations = 1000
	b := []byte{1, 1}
	b = append(b, 0xe8, 0x07, byte(len(c.Salt)))
	b = append(append(append(b, c.Salt...), c.StoredKey...), c.ServerKey...)
	var d Credential
	if err := d.UnmarshalBinary(b); err == nil || !errors.Is(err, errBadEncoding) {
		t.Errorf("1000 iterations decoded: %v", err)
	}
}
