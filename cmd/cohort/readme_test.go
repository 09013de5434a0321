//go:build unix

package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tryItBlock returns the first ```sh block after the README heading that
// starts with heading.
func tryItBlock(t *testing.T, readme, heading string) string {
	t.Helper()
	lines := strings.Split(readme, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, heading) {
			continue
		}
		for j := i + 1; j < len(lines); j++ {
			if strings.HasPrefix(lines[j], "## ") {
				break
			}
			if lines[j] != "```sh" {
				continue
			}
			for k := j + 1; k < len(lines); k++ {
				if lines[k] == "```" {
					return strings.Join(lines[j+1:k], "\n") + "\n"
				}
			}
		}
	}
	t.Fatalf("README has no ```sh block under %q", heading)
	return ""
}

// needOrSkip skips the test with why, or fails it under CI=true (CI
// installs what the test needs, see .ci/run).
func needOrSkip(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(why)
	}
	t.Skip(why)
}

// TestREADMETryIt runs the README's "Try it with a real client" block as
// written: with bash -e, in the repository's root, the way a reader pastes
// it. So it builds ./cohort there (the path is in .gitignore), serves on
// 127.0.0.1:9092 with its data in /tmp/cohort-try, and runs kcat -G as a
// group member. Without kcat, or with port 9092 taken, it skips (fails
// under CI=true). The block stops its own background jobs (kill %2, kill
// %1); the test then checks that nothing listens on 9092 any more. Only if
// the block fails or overruns its time does the test kill the block's
// process group itself, as a safety net, and fail.
func TestREADMETryIt(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds cohort, runs a server and kcat")
	}
	if _, err := exec.LookPath("kcat"); err != nil {
		needOrSkip(t, "the README's try-it block needs kcat: apt-get install -y kcat")
	}
	const addr = "127.0.0.1:9092"
	if ln, err := net.Listen("tcp", addr); err != nil {
		needOrSkip(t, "the README's try-it block serves on "+addr+", which is taken: "+err.Error())
	} else {
		ln.Close()
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "try-it.sh")
	if err := os.WriteFile(script, []byte(tryItBlock(t, string(readme), "## Try it with a real client")), 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", script)
	cmd.Dir = root
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	killGroup := func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.Cancel = func() error { killGroup(); return nil }
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	runErr := cmd.Run()
	if runErr != nil {
		killGroup() // what the block started and did not stop
		t.Fatalf("the README's try-it block failed: %v\n%s", runErr, out.String())
	}
	output := out.String()
	t.Logf("output of the README's try-it block:\n%s", output)

	// kcat printed its assignment: all six partitions, as the one member.
	assigned := regexp.MustCompile(`% Group try-group rebalanced \(memberid [^)]+\): assigned: (.*)`).FindStringSubmatch(output)
	if assigned == nil {
		t.Fatal("kcat printed no assignment for try-group")
	}
	for p := range 6 {
		if !strings.Contains(assigned[1], "events ["+string(rune('0'+p))+"]") {
			t.Errorf("kcat's assignment %q lacks events [%d]", assigned[1], p)
		}
	}
	// cohort groups lists try-group, and group describe shows kcat as a
	// member with partitions of events.
	var listed, member bool
	for _, l := range strings.Split(output, "\n") {
		listed = listed || (strings.HasPrefix(l, "try-group ") && strings.Contains(l, "Stable"))
		member = member || (strings.Contains(l, "rdkafka") && strings.Contains(l, "events"))
	}
	if !listed {
		t.Error("cohort groups did not list try-group as Stable")
	}
	if !member {
		t.Error("cohort group describe did not show kcat (client rdkafka) with partitions of events")
	}
	// The block's own stop commands stopped cohort.
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		killGroup()
		t.Fatalf("something still listens on %s after the block's kill %%1", addr)
	}
}
