// Package script runs scenario files: text files of commands, each followed
// by the output it must produce, in the shape of etcd raft's testdata. A test
// package supplies the commands (a function from a command line to output
// lines); this package parses the files, compares the output, and with
// -rewrite writes what the code produced back into the file, so that a
// behaviour change shows up as a diff of readable text.
//
// The format: a command line, a line "----", then the expected output, which
// ends at the first blank line (an empty output is "----" followed by a blank
// line). Lines starting with '#' and blank lines between steps are comments,
// kept as they are on a rewrite. Arguments are key=value words (Args).
package script

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Step is one command of a file with the text around it.
type Step struct {
	Pre  []string // comment and blank lines before the command, verbatim
	Line int      // 1-based line of the command
	Cmd  string
	Want []string // expected output lines
}

// Parse splits a file into steps; trailer holds the lines after the last
// step.
func Parse(text string) (steps []Step, trailer []string, err error) {
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	var pre []string
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			pre = append(pre, l)
			continue
		}
		st := Step{Pre: pre, Line: i + 1, Cmd: strings.TrimSpace(l)}
		pre = nil
		if i+1 >= len(lines) || lines[i+1] != "----" {
			return nil, nil, fmt.Errorf("line %d: command %q not followed by ----", i+1, l)
		}
		i += 2
		for ; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
			st.Want = append(st.Want, lines[i])
		}
		i-- // the blank line (if any) is the next step's pre
		steps = append(steps, st)
	}
	return steps, pre, nil
}

// RunDir runs every *.txt file of dir as a subtest named after the file,
// each with a fresh runner from newRun. rewriteHint is the command that
// accepts changed output (printed with a mismatch).
func RunDir(t *testing.T, dir string, rewrite bool, rewriteHint string, newRun func(t *testing.T) func(cmd string) []string) {
	files, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no scenario files in %s", dir)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			t.Helper()
			RunFile(t, f, rewrite, rewriteHint, newRun(t))
		})
	}
}

// RunFile runs the steps of the file at path through run and compares each
// step's output with the file's; an output line starting with "error:" fails
// the test whatever the file says. With rewrite, the file's expected output
// is replaced by what run produced.
func RunFile(t *testing.T, path string, rewrite bool, rewriteHint string, run func(cmd string) []string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	steps, trailer, err := Parse(string(data))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var b strings.Builder
	for i := range steps {
		st := &steps[i]
		got := run(st.Cmd)
		for _, l := range got {
			if strings.HasPrefix(l, "error:") {
				t.Errorf("%s:%d: %s: %s", path, st.Line, st.Cmd, l)
			}
		}
		if rewrite {
			st.Want = got
		} else if !slices.Equal(got, st.Want) {
			t.Errorf("%s:%d: %s\ngot:\n%s\nwant:\n%s\n(if the change is intended: %s, then review git diff %s)",
				path, st.Line, st.Cmd, strings.Join(got, "\n"), strings.Join(st.Want, "\n"), rewriteHint, path)
		}
		for _, l := range st.Pre {
			b.WriteString(l + "\n")
		}
		b.WriteString(st.Cmd + "\n----\n")
		for _, l := range st.Want {
			b.WriteString(l + "\n")
		}
	}
	for _, l := range trailer {
		b.WriteString(l + "\n")
	}
	if rewrite && b.String() != string(data) {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Args is a command's key=value arguments (a bare word is a key with an
// empty value). Every accessor marks its key used, so that a runner can
// report arguments nobody read (Unused); values that do not parse are
// collected in Errs.
type Args struct {
	kv   map[string]string
	used map[string]bool
	Errs []string
}

// ParseArgs reads key=value words.
func ParseArgs(fields []string) *Args {
	a := &Args{kv: map[string]string{}, used: map[string]bool{}}
	for _, f := range fields {
		k, v, _ := strings.Cut(f, "=")
		a.kv[k] = v
	}
	return a
}

// Has reports whether key k was given.
func (a *Args) Has(k string) bool { a.used[k] = true; _, ok := a.kv[k]; return ok }

// Str is k's value, def when absent.
func (a *Args) Str(k, def string) string {
	a.used[k] = true
	if v, ok := a.kv[k]; ok {
		return v
	}
	return def
}

// Int is k's value as an integer, def when absent.
func (a *Args) Int(k string, def int64) int64 {
	a.used[k] = true
	v, ok := a.kv[k]
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		a.Errs = append(a.Errs, fmt.Sprintf("%s=%q: not a number", k, v))
	}
	return n
}

// Dur is k's value as a duration (time.ParseDuration), def when absent.
func (a *Args) Dur(k string, def time.Duration) time.Duration {
	a.used[k] = true
	v, ok := a.kv[k]
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		a.Errs = append(a.Errs, fmt.Sprintf("%s=%q: %v", k, v, err))
	}
	return d
}

// List splits a comma-separated value; absent gives nil, empty or "[]"
// gives an empty list.
func (a *Args) List(k string) []string {
	a.used[k] = true
	v, ok := a.kv[k]
	if !ok {
		return nil
	}
	if v == "" || v == "[]" {
		return []string{}
	}
	return strings.Split(v, ",")
}

// Keys lists, sorted, every key given, and marks them used: for commands
// whose keys are names (topics a=4 b=2).
func (a *Args) Keys() []string {
	out := make([]string, 0, len(a.kv))
	for k := range a.kv {
		a.used[k] = true
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Use marks keys used that the command read some other way (positional
// words).
func (a *Args) Use(keys ...string) {
	for _, k := range keys {
		a.used[k] = true
	}
}

// Unused lists, sorted, the keys no accessor asked for.
func (a *Args) Unused() []string {
	var out []string
	for k := range a.kv {
		if !a.used[k] {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
