package clientconfig

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// parseFlags registers the flags on a fresh set, parses args and resolves
// with the given standard input and environment.
func parseFlags(t *testing.T, args []string, stdin string, env map[string]string) (Config, error) {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var c Config
	c.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	err := c.resolve(strings.NewReader(stdin), func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	})
	return c, err
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFlags(t *testing.T) {
	props := writeFile(t, "client.properties", "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"+
		"ssl.ca.location=/props-ca.pem\nsasl.jaas.config="+scramJAAS+"\n")
	pwFile := writeFile(t, "pw", "file-pw\n")
	userOnly := writeFile(t, "user.properties", "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=dave\n")
	envPW := map[string]string{PasswordEnv: "env-pw"}
	for _, tc := range []struct {
		name  string
		args  []string
		stdin string
		env   map[string]string
		want  Config
	}{
		{"nothing", nil, "", envPW, Config{}},
		{"tls flags", []string{"--tls", "--tls-ca-file", "/ca.pem", "--tls-cert-file", "/c.pem", "--tls-key-file", "/k.pem", "--tls-server-name", "kafka.internal"}, "", nil,
			Config{TLS: true, CAFile: "/ca.pem", CertFile: "/c.pem", KeyFile: "/k.pem", ServerName: "kafka.internal"}},
		{"password from the environment", []string{"--sasl-mechanism", "PLAIN", "--sasl-username", "u"}, "", envPW,
			Config{Mechanism: "PLAIN", Username: "u", Password: "env-pw"}},
		{"password file wins over the environment", []string{"--sasl-mechanism", "PLAIN", "--sasl-username", "u", "--sasl-password-file", pwFile}, "", envPW,
			Config{Mechanism: "PLAIN", Username: "u", Password: "file-pw", PasswordFile: pwFile}},
		{"password from standard input, one newline dropped", []string{"--sasl-mechanism", "SCRAM-SHA-256", "--sasl-username", "u", "--sasl-password-file", "-"}, " in pw \n\n", nil,
			Config{Mechanism: "SCRAM-SHA-256", Username: "u", Password: " in pw \n", PasswordFile: "-"}},
		{"CRLF dropped", []string{"--sasl-mechanism", "PLAIN", "--sasl-username", "u", "--sasl-password-file", "-"}, "pw\r\n", nil,
			Config{Mechanism: "PLAIN", Username: "u", Password: "pw", PasswordFile: "-"}},
		{"oauth token file", []string{"--sasl-mechanism", "OAUTHBEARER", "--oauth-token-file", "/tok"}, "", envPW,
			Config{Mechanism: "OAUTHBEARER", TokenFile: "/tok"}},
		{"properties alone; its password wins over the environment", []string{"--command-config", props}, "", envPW,
			Config{TLS: true, CAFile: "/props-ca.pem", Mechanism: "SCRAM-SHA-512", Username: "alice", Password: "s3cret-pw", PropertiesFile: props}},
		{"flags win over properties", []string{"--command-config", props, "--tls-ca-file", "/flag-ca.pem", "--sasl-mechanism", "SCRAM-SHA-256", "--sasl-username", "erin", "--sasl-password-file", pwFile}, "", nil,
			Config{TLS: true, CAFile: "/flag-ca.pem", Mechanism: "SCRAM-SHA-256", Username: "erin", Password: "file-pw", PasswordFile: pwFile, PropertiesFile: props}},
		{"properties without a password take it from the environment", []string{"--command-config", userOnly}, "", envPW,
			Config{Mechanism: "PLAIN", Username: "dave", Password: "env-pw", PropertiesFile: userOnly}},
		{"--tls adds TLS to a SASL_PLAINTEXT file", []string{"--command-config", userOnly, "--tls"}, "", envPW,
			Config{TLS: true, Mechanism: "PLAIN", Username: "dave", Password: "env-pw", PropertiesFile: userOnly}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseFlags(t, tc.args, tc.stdin, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestFlagsErrors(t *testing.T) {
	empty := writeFile(t, "empty", "\n")
	for _, tc := range []struct {
		name  string
		args  []string
		stdin string
		env   map[string]string
		want  string
	}{
		{"no password anywhere", []string{"--sasl-mechanism", "SCRAM-SHA-256", "--sasl-username", "u"}, "", nil, "needs a password"},
		{"empty password file", []string{"--sasl-mechanism", "PLAIN", "--sasl-username", "u", "--sasl-password-file", empty}, "", nil, "is empty"},
		{"empty stdin", []string{"--sasl-mechanism", "PLAIN", "--sasl-username", "u", "--sasl-password-file", "-"}, "", nil, "standard input is empty"},
		{"missing password file", []string{"--sasl-mechanism", "PLAIN", "--sasl-username", "u", "--sasl-password-file", filepath.Join(t.TempDir(), "nope")}, "", nil, "SASL password"},
		{"password file without mechanism", []string{"--sasl-password-file", "-"}, "pw", nil, "no SASL mechanism"},
		{"CA without TLS", []string{"--tls-ca-file", "/ca.pem"}, "", nil, "TLS is off"},
		{"bad properties file", []string{"--command-config", writeFile(t, "bad", "security.protocol=SASL_SSL")}, "", nil, "GSSAPI"},
		{"environment is not used for OAUTHBEARER", []string{"--sasl-mechanism", "OAUTHBEARER"}, "", map[string]string{PasswordEnv: "x"}, "needs a token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseFlags(t, tc.args, tc.stdin, tc.env)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestNoSecretFlags: no flag takes a password or a token.
func TestNoSecretFlags(t *testing.T) {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	var c Config
	c.RegisterFlags(fs)
	n := 0
	fs.VisitAll(func(f *flag.Flag) {
		n++
		if (strings.Contains(f.Name, "password") || strings.Contains(f.Name, "token")) && !strings.HasSuffix(f.Name, "-file") {
			t.Errorf("flag --%s takes a secret", f.Name)
		}
	})
	if n != 10 {
		t.Fatalf("%d flags", n)
	}
}

func TestReadSecret(t *testing.T) {
	big := writeFile(t, "big", strings.Repeat("x", maxSecret+1))
	if _, err := ReadSecret(big, nil); err == nil || !strings.Contains(err.Error(), "not a password") {
		t.Fatalf("big file: %v", err)
	}
	if _, err := ReadSecret("-", nil); err == nil {
		t.Fatal("no stdin accepted")
	}
	if s, err := ReadSecret(writeFile(t, "pw", "a\nb\n"), nil); err != nil || s != "a\nb" {
		t.Fatalf("%q %v", s, err)
	}
}

func TestResolveOpts(t *testing.T) {
	var none Config
	if opts, err := none.ResolveOpts(); err != nil || len(opts) != 0 {
		t.Fatalf("zero config: %v %v", opts, err)
	}
	missingCA := Config{TLS: true, CAFile: filepath.Join(t.TempDir(), "missing.pem")}
	if _, err := missingCA.ResolveOpts(); err == nil || !strings.Contains(err.Error(), "TLS CA file") {
		t.Fatalf("missing CA: %v", err)
	}
	noUser := Config{Mechanism: MechanismPlain}
	if _, err := noUser.ResolveOpts(); err == nil || !strings.Contains(err.Error(), "username") {
		t.Fatalf("no user: %v", err)
	}
}
