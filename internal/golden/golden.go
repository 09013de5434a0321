// Package golden keeps stored records as test fixtures: the exact key and
// value bytes one version of cohort wrote, under a package's
// testdata/golden/. A package that decodes stored records checks, with
// them, that today's code still reads what earlier versions wrote and, for
// the current fixtures, still writes the same bytes (docs/operations.md,
// "Upgrading and downgrading").
//
// A fixture file holds hex lines "key <hex>" and "value <hex>" (no value
// line: a deletion), and comment lines starting with '#'. Record writes a
// missing fixture when COHORT_TEST_WRITE_GOLDEN=1 is set, and never
// rewrites one that exists: a change of encoding shows as a failing test,
// and replacing a fixture takes deleting it, which the review sees.
// Fixtures of records written by earlier versions are captured once and
// never written by a test.
package golden

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
)

// WriteEnv is the variable that lets Record write missing fixtures.
const WriteEnv = "COHORT_TEST_WRITE_GOLDEN"

// Record returns the stored key and value of fixture name (a file under
// testdata/golden/, ".txt" added). If the file is missing and WriteEnv is
// "1", it writes key and value (what the current version encodes) there
// first, with about as a comment; otherwise a missing file fails t.
func Record(t testing.TB, name, about string, key, value []byte) (storedKey, storedValue []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name+".txt")
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) && os.Getenv(WriteEnv) == "1" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, format(about, key, value), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", path)
		data, err = os.ReadFile(path)
	}
	if err != nil {
		t.Fatalf("fixture %s: %v (a new record kind's fixture is written by running the test once with %s=1)", path, err, WriteEnv)
	}
	k, v, err := Parse(data)
	if err != nil {
		t.Fatalf("fixture %s: %v", path, err)
	}
	return k, v
}

// Load returns the key and value of a fixture that no test writes (one
// captured from an earlier version).
func Load(t testing.TB, name string) (key, value []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name+".txt")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	k, v, err := Parse(data)
	if err != nil {
		t.Fatalf("fixture %s: %v", path, err)
	}
	return k, v
}

// Parse reads a fixture file.
func Parse(data []byte) (key, value []byte, err error) {
	var haveKey bool
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		field, h, _ := strings.Cut(line, " ")
		b, err := hex.DecodeString(strings.ReplaceAll(h, " ", ""))
		if err != nil {
			return nil, nil, fmt.Errorf("line %d: %v", i+1, err)
		}
		switch {
		case field == "key" && !haveKey:
			key, haveKey = b, true
		case field == "value" && haveKey && value == nil:
			value = b
			if value == nil {
				value = []byte{}
			}
		default:
			return nil, nil, fmt.Errorf("line %d: unexpected %q", i+1, field)
		}
	}
	if !haveKey {
		return nil, nil, fmt.Errorf("no key line")
	}
	return key, value, nil
}

// format is the text of a fixture: about, the key and value as text where
// they are mostly printable (comments), then their hex.
func format(about string, key, value []byte) []byte {
	var b bytes.Buffer
	for _, l := range strings.Split(about, "\n") {
		fmt.Fprintf(&b, "# %s\n", l)
	}
	fmt.Fprintf(&b, "# Written by the test with %s=1; never rewritten (delete it to replace it, and say why).\n", WriteEnv)
	for _, f := range []struct {
		name string
		b    []byte
	}{{"key", key}, {"value", value}} {
		if f.b == nil {
			continue
		}
		fmt.Fprintf(&b, "# %s as text: %s\n", f.name, printable(f.b))
		fmt.Fprintf(&b, "%s %s\n", f.name, hex.EncodeToString(f.b))
	}
	return b.Bytes()
}

// printable is b with bytes outside printable ASCII shown as '.'.
func printable(b []byte) string {
	return strings.Map(func(r rune) rune {
		if r > unicode.MaxASCII || !unicode.IsPrint(r) {
			return '.'
		}
		return r
	}, string(b))
}
