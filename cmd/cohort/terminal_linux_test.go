package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal and returns its terminal side; it skips
// the test where there are none.
func openPTY(t *testing.T) *os.File {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	t.Cleanup(func() { ptmx.Close() })
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Skipf("unlocking a pseudo-terminal: %v", err)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Skipf("naming a pseudo-terminal: %v", err)
	}
	pts, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("opening a pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { pts.Close() })
	return pts
}

// TestUserSetStdin: "user set" refuses a terminal as standard input (it
// would echo the password), but /dev/null is only an empty input, and a
// pipe or a file is read.
func TestUserSetStdin(t *testing.T) {
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w.Close() // an empty pipe
	file, err := os.Open(writeTemp(t, "pw", ""))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	pty := openPTY(t)

	for _, tc := range []struct {
		name     string
		stdin    *os.File
		terminal bool
	}{
		{"/dev/null", devNull, false},
		{"an empty pipe", r, false},
		{"an empty file", file, false},
		{"a pseudo-terminal", pty, true},
	} {
		if got := isTerminal(tc.stdin); got != tc.terminal {
			t.Errorf("isTerminal(%s) = %v, want %v", tc.name, got, tc.terminal)
		}
		want := "user set: no password on standard input (it is empty)"
		if tc.terminal {
			want = "user set: standard input is a terminal"
		}
		var out bytes.Buffer
		err := users(env{stdin: tc.stdin, stdout: &out, stderr: io.Discard}, "user", []string{"set", "dave", "--bootstrap", "127.0.0.1:1"})
		if err == nil || !strings.HasPrefix(err.Error(), want) || out.Len() > 0 {
			t.Errorf("user set with %s as standard input: %v (printed %q), want %q", tc.name, err, out.String(), want)
		}
	}
}
