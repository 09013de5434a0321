package sasl

import (
	"bytes"
	"context"
	"crypto/pbkdf2"
	"crypto/sha512"
	"testing"

	fscram "github.com/twmb/franz-go/pkg/sasl/scram"
)

// kafkaAdminCredential makes user's SCRAM-SHA-512 credential the way the
// clients that send AlterUserScramCredentials make it: franz-go's kadm (and so
// `cohort user set`) and Kafka's admin client (kafka-configs.sh) both salt the
// password's raw UTF-8 bytes, without SASLprep.
func kafkaAdminCredential(t *testing.T, password string) Credential {
	t.Helper()
	salt := bytes.Repeat([]byte{0x5a}, 24)
	salted, err := pbkdf2.Key(sha512.New, password, salt, DefaultIterations, sha512.Size)
	if err != nil {
		t.Fatal(err)
	}
	c, err := CredentialFromSalted(ScramSHA512, salt, salted, DefaultIterations)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// franzSCRAM runs franz-go's SCRAM-SHA-512 client (cohort's own CLI, the
// console, franz-go applications; it does not SASLprep, like Kafka's Java
// client and librdkafka) against a server session.
func franzSCRAM(t *testing.T, m Mechanism, user, password string) error {
	t.Helper()
	sess, c1, err := fscram.Auth{User: user, Pass: password}.AsSha512Mechanism().Authenticate(context.Background(), "cohort:9092")
	if err != nil {
		t.Fatal(err)
	}
	s := m.Start()
	msg := c1
	for {
		out, done, err := s.Step(msg)
		if err != nil {
			return err
		}
		cdone, next, cerr := sess.Challenge(out)
		if cerr != nil {
			t.Fatalf("client refused %q: %v", out, cerr)
		}
		if done {
			if !cdone {
				t.Fatal("server done, client not")
			}
			return nil
		}
		msg = next
	}
}

// A user whose credential was set with `cohort user set` or kafka-configs.sh
// logs in with SCRAM, and must log in with PLAIN with the same password too:
// PLAIN is documented as "checked against the same stored SCRAM credential".
// PLAIN SASLprepped the offered password before salting it, so for a
// password that SASLprep changes (a no-break space, a decomposed accent) or
// refuses (a character Unicode 3.2 did not assign, such as an emoji) the
// PLAIN check derived other keys and the correct password was refused (the
// /metrics basic authentication, which runs the PLAIN check, too).
func TestPlainAcceptsPasswordOfAdminClientCredential(t *testing.T) {
	for _, pw := range []string{"pass\u00a0word", "cafe\u0301-latte", "horse-\U0001F434-battery"} {
		creds := memCreds{{"alice", ScramSHA512}: kafkaAdminCredential(t, pw)}
		if err := franzSCRAM(t, newSCRAM(t, ScramSHA512, creds), "alice", pw); err != nil {
			t.Fatalf("%+q: SCRAM login with the password: %v", pw, err)
		}
		_, _, done, err := plainStep(NewPlain(creds), "\x00alice\x00"+pw)
		if err != nil || !done {
			t.Errorf("%+q: SCRAM accepts this password, PLAIN refuses it: %v", pw, err)
		}
	}
}

// The other direction: the bootstrap user (EnsureUser -> NewCredential) got
// a credential of the SASLprep'd password, which the SCRAM clients of the
// Kafka ecosystem, cohort's own CLI (franz-go) included, never derive.
func TestNewCredentialWorksWithFranzGoSCRAM(t *testing.T) {
	pw := "pass\u00a0word"
	c, err := NewCredential(ScramSHA512, pw, DefaultIterations)
	if err != nil {
		t.Fatal(err)
	}
	creds := memCreds{{"admin", ScramSHA512}: c}
	if err := franzSCRAM(t, newSCRAM(t, ScramSHA512, creds), "admin", pw); err != nil {
		t.Errorf("franz-go SCRAM login with the bootstrap password %+q: %v", pw, err)
	}
}

// A credential made from the SASLprep'd password (by a client that prepares
// passwords, or by cohort's bootstrap user before it stopped doing so) still
// takes the password in PLAIN; one made from another password does not.
func TestPlainAcceptsCredentialOfPreparedPassword(t *testing.T) {
	const pw = "pass\u00a0word" // SASLprep: "pass word"
	for made, want := range map[string]bool{"pass word": true, "pass\u00a0word": true, "pass  word": false} {
		creds := memCreds{{"alice", ScramSHA512}: kafkaAdminCredential(t, made)}
		_, _, done, err := plainStep(NewPlain(creds), "\x00alice\x00"+pw)
		if (err == nil && done) != want {
			t.Errorf("credential made from %+q: PLAIN with %+q accepted %v, want %v (%v)", made, pw, !want, want, err)
		}
	}
}
