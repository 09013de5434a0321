package clientconfig

import (
	"maps"
	"strings"
	"testing"
)

func TestParseJavaProperties(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want map[string]string
	}{
		{"equals", "a=1\nb = 2\n", map[string]string{"a": "1", "b": "2"}},
		{"colon", "a:1\nb : 2", map[string]string{"a": "1", "b": "2"}},
		{"blank separator", "a 1\nb\t\t2\nc   =  3", map[string]string{"a": "1", "b": "2", "c": "3"}},
		{"only the first separator counts", "a==b\nc=d:e=f\ng : =h", map[string]string{"a": "=b", "c": "d:e=f", "g": "=h"}},
		{"comments and blank lines", "# c\n  ! c2\n\n   \na=1\n#b=2", map[string]string{"a": "1"}},
		{"a hash inside a value is kept", "a=1 # not a comment", map[string]string{"a": "1 # not a comment"}},
		{"trailing blanks of a value are kept", "a=1  \t", map[string]string{"a": "1  \t"}},
		{"leading blanks of a key dropped", "   a=1", map[string]string{"a": "1"}},
		{"key without value", "a\nb=\nc:", map[string]string{"a": "", "b": "", "c": ""}},
		{"continuation", "a=one \\\n    two \\\n\tthree\nb=4", map[string]string{"a": "one two three", "b": "4"}},
		{"continuation inside a key", "lo\\\n  ng=1", map[string]string{"long": "1"}},
		{"even backslashes do not continue", "a=x\\\\\nb=y", map[string]string{"a": `x\`, "b": "y"}},
		{"a comment does not continue", "# c \\\na=1", map[string]string{"a": "1"}},
		{"continued line that looks like a comment", "a=1\\\n  # 2", map[string]string{"a": "1# 2"}},
		{"backslash at end of input", "a=1\\", map[string]string{"a": "1"}},
		{"escapes", `a=\t\n\r\f\\\=\:\#\!\ \q`, map[string]string{"a": "\t\n\r\f\\=:#! q"}},
		{"escaped separators in a key", `k\=e\:y\ s=v`, map[string]string{"k=e:y s": "v"}},
		{"unicode escapes", `a=caf\u00e9 \u00E9\uD83D\uDE00`, map[string]string{"a": "café é😀"}},
		{"utf-8 text", "ключ=значение", map[string]string{"ключ": "значение"}},
		{"CRLF", "a=1\r\nb=2\r\n", map[string]string{"a": "1", "b": "2"}},
		{"lone CR", "a=1\rb=2", map[string]string{"a": "1", "b": "2"}},
		{"continuation over CRLF", "a=1\\\r\n 2", map[string]string{"a": "12"}},
		{"last one wins", "a=1\na=2", map[string]string{"a": "2"}},
		{"jaas value", `sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \` + "\n" +
			`    username="alice" \` + "\n" + `    password="p=w:d";`,
			map[string]string{"sasl.jaas.config": `org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="p=w:d";`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseJavaProperties(strings.NewReader(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestParseJavaPropertiesErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"a=1\nb=x\\u12\n", "line 2: malformed"},
		{"a=1\n\n# c\nsecret=\\uzzzz", "line 4: malformed"},
		{"a=\\\n \\\n\\u00g0", "line 1: malformed"}, // the logical line starts on line 1
	} {
		_, err := parseJavaProperties(strings.NewReader(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want an error with %q", tc.in, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "zzzz") {
			t.Errorf("error quotes the line: %v", err)
		}
	}
}
