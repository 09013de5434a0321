package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docsRefusedServeValues are the `--flag VALUE` examples of cohort serve
// that the documents give as refused (docs/cli.md's exit codes): they must
// be refused, where every other documented value must be accepted.
var docsRefusedServeValues = map[string]bool{
	"--offsets-retention 0":                true,
	"--offsets-retention-check-interval 0": true,
}

// sharedFlagNames are flags of cohort serve that other commands have too,
// with other meanings or values (topic create --partitions 6): a document's
// value for them is not necessarily serve's.
var sharedFlagNames = map[string]bool{"partitions": true, "tls-cert-file": true, "tls-key-file": true}

var (
	docCodeSpan   = regexp.MustCompile("`([^`]+)`")
	docFlagValue  = regexp.MustCompile(`(?:^|[\s(])--([a-z][a-z0-9-]*)(=|\s+)([^\s` + "`" + `;,)]+)`)
	docPlaceholdr = regexp.MustCompile(`…|\.\.\.|<|\||(^|[:/'])(DIR|FILE|NAME|HOST|PORT|N|W|D|ID)\b`)
	docNegative   = regexp.MustCompile(`^-\d`)
)

// docCode returns the code of a Markdown document: its code spans (a span
// may run over a line break) and the lines of its fenced blocks (a line
// ending in a backslash joined with the next).
func docCode(text string) []string {
	var (
		out     []string
		prose   []string
		inFence bool
		pending string
	)
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
			continue
		}
		if !inFence {
			prose = append(prose, line)
			continue
		}
		if s, ok := strings.CutSuffix(strings.TrimRight(line, " "), `\`); ok {
			pending += s + " "
			continue
		}
		out = append(out, pending+line)
		pending = ""
	}
	for _, m := range docCodeSpan.FindAllStringSubmatch(strings.Join(prose, " "), -1) {
		out = append(out, m[1])
	}
	return out
}

// TestDocumentedServeFlagValues parses every value README.md and docs/*.md
// give a flag of cohort serve (`--group-history 0`, `--lease-ttl 5s`, a
// command line of the README) with serve's own flag checks: a value the
// flags refuse (a negative --group-history, which the help once offered)
// must not be shown as one to use. Placeholders (DIR, N/W, …) are skipped;
// the values the documents show as refused must be refused.
func TestDocumentedServeFlagValues(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../README.md")
	noEnv := func(string) (string, bool) { return "", false }
	checked, refusedSeen := 0, map[string]bool{}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, code := range docCode(string(b)) {
			for _, m := range docFlagValue.FindAllStringSubmatch(code, -1) {
				name, sep, value := m[1], m[2], strings.Trim(m[3], `'"`)
				f := newServeFlags().fs.Lookup(name)
				if f == nil || sharedFlagNames[name] || value == "" || docPlaceholdr.MatchString(m[3]) {
					continue
				}
				if bf, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && bf.IsBoolFlag() && sep != "=" {
					continue // "--http-tls without ...": the next word is prose
				}
				if strings.HasPrefix(value, "-") && !docNegative.MatchString(value) {
					continue // the next flag
				}
				example := "--" + name + " " + value
				s := newServeFlags()
				err := s.parse([]string{"--" + name + "=" + value}, noEnv)
				checked++
				switch {
				case docsRefusedServeValues[example]:
					refusedSeen[example] = true
					if err == nil {
						t.Errorf("%s shows `%s` as refused, but cohort serve accepts it", filepath.Base(file), example)
					}
				case err != nil:
					t.Errorf("%s shows `%s`, which cohort serve refuses: %v", filepath.Base(file), example, err)
				}
			}
		}
	}
	for ex := range docsRefusedServeValues {
		if !refusedSeen[ex] {
			t.Errorf("no document shows `%s` any more: drop it from docsRefusedServeValues", ex)
		}
	}
	if checked < 30 {
		t.Fatalf("checked only %d documented values: the parser no longer finds them", checked)
	}
	t.Logf("%d documented values of cohort serve flags checked", checked)
}
