package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/internal/testready"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/store/disk"
)

// TestServeNotifiesReady: cohort serve started with NOTIFY_SOCKET sends
// READY=1 once it serves: by then its store is open (a second open finds it
// locked) and its listener, the one its STATUS names, answers a request. On
// SIGTERM it sends STOPPING=1 before it exits.
func TestServeNotifiesReady(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "data")
	cmd := cohortCommand(ctx, t, "serve", "--listen", "127.0.0.1:0", "--data-dir", dir, "--log-level", "warn")
	sock, err := testready.Listen()
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	cmd.Env = append(cmd.Env, sock.Env())
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var exitErr error
	go func() { exitErr = cmd.Wait(); close(exited) }()
	defer func() { cmd.Process.Kill(); <-exited }()
	if err := sock.Wait(30*time.Second, exited); err != nil {
		t.Fatalf("%v\n%s", err, logs.String())
	}
	status := sock.Status()
	m := regexp.MustCompile(`^serving Kafka clients on (127\.0\.0\.1:\d+) as node 0$`).FindStringSubmatch(status)
	if m == nil {
		t.Fatalf("STATUS=%q, want serving Kafka clients on 127.0.0.1:<port> as node 0", status)
	}
	if st, err := disk.Open(disk.Options{Dir: dir}); !errors.Is(err, disk.ErrLocked) {
		if err == nil {
			st.Close()
		}
		t.Errorf("opening the store once cohort is ready: %v, want %v (cohort holds it)", err, disk.ErrLocked)
	}
	// The first request, with no retries: answered.
	cl, err := kgo.NewClient(kgo.SeedBrokers(m[1]), kgo.RequestRetries(0), kgo.DialTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
	defer rcancel()
	if _, err := kmsg.NewPtrApiVersionsRequest().RequestWith(rctx, cl); err != nil {
		t.Errorf("ApiVersions to %s once cohort is ready: %v", m[1], err)
	}

	cmd.Process.Signal(syscall.SIGTERM)
	<-exited
	if exitErr != nil {
		t.Errorf("exit after SIGTERM: %v\n%s", exitErr, logs.String())
	}
	// The datagram was sent before the exit; the socket's reader may
	// not have taken it yet.
	testwait.For(t, 10*time.Second, "STATUS of the shutdown", func() bool { return sock.Status() == "shutting down on terminated" })
}

// TestServeFailedStartNotReady: a start that fails (its port is taken)
// never sends READY=1: a manager waiting for it sees the process exit.
func TestServeFailedStartNotReady(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := cohortCommand(ctx, t, "serve", "--listen", taken.Addr().String(), "--data-dir", filepath.Join(t.TempDir(), "d"),
		"--log-level", "warn")
	sock, err := testready.Listen()
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	cmd.Env = append(cmd.Env, sock.Env())
	exited := make(chan struct{})
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); close(exited) }()
	if err := sock.Wait(30*time.Second, exited); !errors.Is(err, testready.ErrExited) {
		t.Errorf("wait for a start on a taken port: %v, want %v", err, testready.ErrExited)
	}
	if got := sock.Status(); got != "" {
		t.Errorf("a failed start sent STATUS=%q", got)
	}
}

// TestNotifierWarnsOnABadSocket: a NOTIFY_SOCKET cohort cannot send to is
// logged as a warning naming the state, and the node goes on.
func TestNotifierWarnsOnABadSocket(t *testing.T) {
	for _, socket := range []string{"vsock:2:1234", filepath.Join(t.TempDir(), "absent")} {
		var out bytes.Buffer
		n := notifier{socket: socket, log: slog.New(slog.NewTextHandler(&out, nil))}
		n.ready("serving")
		if got := out.String(); !strings.Contains(got, "level=WARN") || !strings.Contains(got, `state="READY=1"`) {
			t.Errorf("NOTIFY_SOCKET=%s: logged %q, want a warning naming READY=1", socket, got)
		}
	}
	var out bytes.Buffer
	notifier{log: slog.New(slog.NewTextHandler(&out, nil))}.ready("serving")
	if out.Len() != 0 {
		t.Errorf("without NOTIFY_SOCKET: logged %q, want nothing", out.String())
	}
}
