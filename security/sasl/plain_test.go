package sasl

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func plainStore(t testing.TB) memCreds {
	m := memCreds{}
	m.add(t, "alice", ScramSHA512, "alice-512")
	m.add(t, "alice", ScramSHA256, "alice-256")
	m.add(t, "bob", ScramSHA256, "bob-256")
	return m
}

func plainStep(m Mechanism, msg string) (Session, []byte, bool, error) {
	s := m.Start()
	out, done, err := s.Step([]byte(msg))
	return s, out, done, err
}

func TestPlainSuccess(t *testing.T) {
	m := NewPlain(plainStore(t))
	if m.Name() != "PLAIN" {
		t.Errorf("Name() = %q", m.Name())
	}
	for _, tc := range []struct{ msg, principal string }{
		{"\x00alice\x00alice-512", "User:alice"},      // SCRAM-SHA-512 is preferred
		{"alice\x00alice\x00alice-512", "User:alice"}, // authzid equal to authcid
		{"\x00bob\x00bob-256", "User:bob"},            // only SCRAM-SHA-256
	} {
		s, out, done, err := plainStep(m, tc.msg)
		if err != nil || !done || len(out) != 0 {
			t.Errorf("%q: out %q, done %v, err %v", tc.msg, out, done, err)
			continue
		}
		if s.Principal() != tc.principal || !s.Expiry().IsZero() {
			t.Errorf("%q: principal %q, expiry %v", tc.msg, s.Principal(), s.Expiry())
		}
		if _, _, err := s.Step([]byte(tc.msg)); !errors.Is(err, errFinished) {
			t.Errorf("Step after success: %v", err)
		}
	}
}

func TestPlainFailures(t *testing.T) {
	m := NewPlain(plainStore(t))
	for _, tc := range []struct{ msg, reason string }{
		{"\x00alice\x00alice-256", `invalid password for user "alice"`}, // the SHA-256 password is not consulted
		{"\x00alice\x00wrong", `invalid password for user "alice"`},
		{"\x00alice\x00bell\x07", `invalid password for user "alice"`},                        // SASLprep refuses it
		{"\x00mallory\x00guess", `unknown user (name withheld: 7 bytes, sha256 c0a49776...)`}, // the name not echoed
		{"bob\x00alice\x00alice-512", `authorization id "bob" differs from user "alice"`},
		{"", "malformed"},
		{"alice", "malformed"},
		{"alice\x00alice-512", "malformed"},
		{"\x00\x00alice-512", "malformed"},
		{"\x00alice\x00", "malformed"},
		{"\x00alice\x00alice-512\x00", "malformed"},
		{"\x00alice\x00alice-512\x00extra", "malformed"},
		{"\x00alice\x00\xff\xfe", "malformed"},
		{"\x00alice\x00" + strings.Repeat("p", maxPlainMessage), "malformed"},
	} {
		s, _, done, err := plainStep(m, tc.msg)
		if done {
			t.Errorf("%q: done", tc.msg)
		}
		wantFailure(t, err, tc.reason, "alice-512", "alice-256", "wrong", "guess")
		if s.Principal() != "" {
			t.Errorf("%q: principal %q after failure", tc.msg, s.Principal())
		}
	}
}

func TestPlainUnusableCredential(t *testing.T) {
	c, _ := NewCredential(ScramSHA512, "pw", MinIterations)
	c.Iterations = MaxIterations + 1
	store := memCreds{{"carol", ScramSHA512}: c}
	store.add(t, "carol", ScramSHA256, "pw256")
	// The broken SHA-512 credential is skipped for the SHA-256 one.
	if _, _, done, err := plainStep(NewPlain(store), "\x00carol\x00pw256"); err != nil || !done {
		t.Errorf("fallback to SCRAM-SHA-256: %v", err)
	}
	delete(store, [2]string{"carol", ScramSHA256})
	_, _, _, err := plainStep(NewPlain(store), "\x00carol\x00pw")
	wantFailure(t, err, `unknown user (name withheld: 5 bytes, sha256 4c26d907...)`, "carol")
}

// TestPlainChecksBounded: at most cap(plainSlots) PLAIN password checks
// (PBKDF2) run at once, however many connections ask; the others wait and
// are then answered.
func TestPlainChecksBounded(t *testing.T) {
	m := NewPlain(plainStore(t))
	var mu sync.Mutex
	running, most := 0, 0
	release := make(chan struct{})
	testHookPBKDF2 = func() {
		mu.Lock()
		running++
		most = max(most, running)
		mu.Unlock()
		<-release
		mu.Lock()
		running--
		mu.Unlock()
	}
	defer func() { testHookPBKDF2 = nil }()
	const n = 12
	errs := make(chan error, n)
	for i := range n {
		go func() {
			msg := "\x00bob\x00bob-256"
			if i%2 == 1 {
				msg = "\x00nobody\x00guess"
			}
			_, _, _, err := plainStep(m, msg)
			if i%2 == 0 && err != nil {
				errs <- err
				return
			}
			errs <- nil
		}()
	}
	// Let the checks in one slot at a time: every one is answered, never
	// more than the bound at once.
	for range n {
		release <- struct{}{}
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if most < 1 || most > cap(plainSlots) {
		t.Fatalf("%d PLAIN checks ran at once, bound %d", most, cap(plainSlots))
	}
}

// BenchmarkPlainCheck is the CPU one PLAIN login costs the server: a
// PBKDF2 of the stored iteration count (the reason plainSlots bounds them).
func BenchmarkPlainCheck(b *testing.B) {
	for _, iters := range []int{MinIterations, MaxIterations} {
		b.Run(fmt.Sprintf("SCRAM-SHA-512/iterations=%d", iters), func(b *testing.B) {
			c, err := NewCredential(ScramSHA512, "pw", iters)
			if err != nil {
				b.Fatal(err)
			}
			m := NewPlain(memCreds{{"u", ScramSHA512}: c})
			for b.Loop() {
				if _, _, err := m.Start().Step([]byte("\x00u\x00pw")); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestPlainGivesUpWaitingCheck: a PLAIN check waiting for a slot ends as a
// failure once its context is done (the client left, or its authentication
// time ran out), without checking the password; the checks under way and
// those that come after are not affected.
func TestPlainGivesUpWaitingCheck(t *testing.T) {
	m := NewPlain(plainStore(t))
	var checks atomic.Int32
	release := make(chan struct{})
	testHookPBKDF2 = func() {
		checks.Add(1)
		<-release
	}
	defer func() { testHookPBKDF2 = nil }()
	// Fill every slot with a check that waits for release.
	held := make(chan error, cap(plainSlots))
	for range cap(plainSlots) {
		go func() {
			_, _, err := m.Start().Step([]byte("\x00bob\x00bob-256"))
			held <- err
		}()
	}
	for checks.Load() < int32(cap(plainSlots)) {
		runtime.Gosched()
	}
	ctx, cancel := context.WithCancel(context.Background())
	waited := make(chan error, 1)
	go func() {
		_, done, err := m.Start().(ContextStepper).StepContext(ctx, []byte("\x00bob\x00bob-256"))
		if done {
			err = errors.New("done")
		}
		waited <- err
	}()
	cancel()
	select {
	case err := <-waited:
		wantFailure(t, err, "given up", "bob-256")
	case <-time.After(10 * time.Second):
		t.Fatal("a PLAIN check waiting for a slot outlived its context by 10s")
	}
	// A context already done never checks, even with a slot free.
	close(release)
	for range cap(plainSlots) {
		if err := <-held; err != nil {
			t.Fatalf("a check under way: %v", err)
		}
	}
	before := checks.Load()
	if _, _, err := m.Start().(ContextStepper).StepContext(ctx, []byte("\x00bob\x00bob-256")); err == nil {
		t.Fatal("a done context was authenticated")
	}
	if checks.Load() != before {
		t.Fatal("a done context's password was checked")
	}
	if _, done, err := m.Start().Step([]byte("\x00bob\x00bob-256")); err != nil || !done {
		t.Fatalf("a check after: done %v, %v", done, err)
	}
}
