package testwait

import (
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

func TestUntilSeesAConditionSoon(t *testing.T) {
	var n atomic.Int32
	go func() {
		for i := 0; i < 3; i++ {
			n.Add(1)
		}
	}()
	start := time.Now()
	if !Until(10*time.Second, func() bool { return n.Load() == 3 }) {
		t.Fatal("condition not seen")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %v", d)
	}
}

func TestUntilIsBounded(t *testing.T) {
	checks := 0
	start := time.Now()
	if Until(30*time.Millisecond, func() bool { checks++; return false }) {
		t.Fatal("a false condition reported true")
	}
	if d := time.Since(start); d < 30*time.Millisecond || d > 5*time.Second {
		t.Fatalf("returned after %v, want about 30ms", d)
	}
	if checks < 2 {
		t.Fatalf("%d checks", checks)
	}
}

func TestErrReturnsTheLastError(t *testing.T) {
	calls := 0
	if err := Err(time.Second, func() error {
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	}); err != nil || calls != 3 {
		t.Fatalf("err %v after %d calls", err, calls)
	}
	want := errors.New("never")
	if err := Err(10*time.Millisecond, func() error { return want }); err != want {
		t.Fatalf("err %v, want %v", err, want)
	}
}

func TestListening(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	Listening(t, 5*time.Second, addr)
	ln.Close()
	if Dials(addr) {
		t.Fatalf("%s still dials after its listener closed", addr)
	}
}
