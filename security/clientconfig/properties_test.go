package clientconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	scramJAAS = `org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="s3cret-pw";`
	plainJAAS = `org.apache.kafka.common.security.plain.PlainLoginModule required username="bob" password="pl4in-pw";`
)

func TestLoadProperties(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want Config
	}{
		{"empty", "", Config{}},
		{"plaintext ignores ssl and sasl settings", "security.protocol=PLAINTEXT\nssl.ca.location=/ca.pem\nsasl.mechanism=PLAIN\n", Config{}},
		{"ssl, librdkafka names", "security.protocol=ssl\nssl.ca.location=/ca.pem\nssl.certificate.location=/c.pem\nssl.key.location=/k.pem\n",
			Config{TLS: true, CAFile: "/ca.pem", CertFile: "/c.pem", KeyFile: "/k.pem"}},
		{"ssl, Java PEM stores", "security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location=/trust.pem\nssl.keystore.type=pem\nssl.keystore.location=/me.pem\nssl.endpoint.identification.algorithm=https\n",
			Config{TLS: true, CAFile: "/trust.pem", CertFile: "/me.pem", KeyFile: "/me.pem"}},
		{"ssl, both CA names for one file", "security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location=/ca.pem\nssl.ca.location=/ca.pem",
			Config{TLS: true, CAFile: "/ca.pem"}},
		{"ssl without a CA uses the system roots", "security.protocol=SSL", Config{TLS: true}},
		{"ssl ignores sasl settings", "security.protocol=SSL\nsasl.mechanism=PLAIN\nsasl.jaas.config=" + plainJAAS, Config{TLS: true}},
		{"librdkafka verification off", "security.protocol=SSL\nenable.ssl.certificate.verification=false", Config{TLS: true, InsecureSkipVerify: true}},
		{"sasl_ssl scram jaas", "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config=" + scramJAAS,
			Config{TLS: true, Mechanism: "SCRAM-SHA-512", Username: "alice", Password: "s3cret-pw"}},
		{"sasl_plaintext plain jaas, mechanism in lower case", "security.protocol=sasl_plaintext\nsasl.mechanism=plain\nsasl.jaas.config=" + plainJAAS,
			Config{Mechanism: "PLAIN", Username: "bob", Password: "pl4in-pw"}},
		{"librdkafka credentials and sasl.mechanisms", "security.protocol=SASL_PLAINTEXT\nsasl.mechanisms=SCRAM-SHA-256\nsasl.username=carol\nsasl.password=c-pw",
			Config{Mechanism: "SCRAM-SHA-256", Username: "carol", Password: "c-pw"}},
		{"jaas and librdkafka agreeing", "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=bob\nsasl.jaas.config=" + plainJAAS,
			Config{Mechanism: "PLAIN", Username: "bob", Password: "pl4in-pw"}},
		{"jaas across continuation lines, single quotes, comments, escapes",
			"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\nsasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule \\\n" +
				"  REQUIRED /* the admin */ username='ad\"min' \\\n  password=\"a\\\\\\\"b\\\\\\\\c\"; // trailing\n",
			Config{Mechanism: "SCRAM-SHA-256", Username: `ad"min`, Password: `a"b\c`}},
		{"jaas unquoted values", "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config=" +
			"org.apache.kafka.common.security.plain.PlainLoginModule required username=bob password=pw.1-x;",
			Config{Mechanism: "PLAIN", Username: "bob", Password: "pw.1-x"}},
		{"oauthbearer module options are ignored", "security.protocol=SASL_SSL\nsasl.mechanism=OAUTHBEARER\nsasl.jaas.config=" +
			"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub=\"x\";",
			Config{TLS: true, Mechanism: "OAUTHBEARER"}},
		{"other keys ignored", "bootstrap.servers=a:9092\nrequest.timeout.ms=1000\nssl.truststore.password=x\nsecurity.protocol=SSL", Config{TLS: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := LoadProperties(strings.NewReader(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestLoadPropertiesErrors(t *testing.T) {
	const sasl = "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
	for _, tc := range []struct{ name, in, want string }{
		{"unknown protocol", "security.protocol=TLS", `security.protocol "TLS"`},
		{"JKS truststore by default", "security.protocol=SSL\nssl.truststore.location=/t.jks", "ssl.truststore.type JKS is not supported"},
		{"PKCS12 keystore", "security.protocol=SSL\nssl.keystore.type=PKCS12\nssl.keystore.location=/k.p12", "ssl.keystore.type PKCS12 is not supported"},
		{"inline PEM", "security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.certificates=-----BEGIN", "inline"},
		{"encrypted key", "security.protocol=SSL\nssl.key.location=/k.pem\nssl.certificate.location=/c.pem\nssl.key.password=hunter2", "encrypted private keys"},
		{"two CA files", "security.protocol=SSL\nssl.ca.location=/a.pem\nssl.truststore.type=PEM\nssl.truststore.location=/b.pem", "different files"},
		{"keystore and certificate", "security.protocol=SSL\nssl.keystore.type=PEM\nssl.keystore.location=/a.pem\nssl.certificate.location=/c.pem", "both set"},
		{"hostname verification off", "security.protocol=SSL\nssl.endpoint.identification.algorithm=", "host name verification"},
		{"no mechanism", "security.protocol=SASL_SSL\nsasl.jaas.config=" + scramJAAS, "GSSAPI"},
		{"jaas without semicolon", sasl + `sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="a" password="hunter2"`, "semicolon"},
		{"jaas without flag", sasl + `sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule;`, "control flag"},
		{"jaas bad flag", sasl + `sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule mandatory;`, "control flag"},
		{"jaas option without value", sasl + `sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=;`, `option "username"`},
		// A blank in an unquoted password splits it: the rest reads as
		// an option name, and the error must not quote it.
		{"jaas unquoted password with a blank", sasl + `sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password=Hunter2 Secret;`,
			`option 3 (after option "password"): no '=' after its name`},
		{"jaas piece of a value as a key", sasl + `sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=admin Hunter2Secret=;`,
			`value not specified for option 2 (after option "username")`},
		{"jaas unknown key before a bad option", sasl + `sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required Hunter2=x = y;`,
			`option 2 (after option 1): option name expected`},
		{"jaas module that is no class name", sasl + `sasl.jaas.config=Hunter2Secret required password="x";`, "login module (the first word of the entry) is not supported"},
		{"jaas two modules", sasl + "sasl.jaas.config=" + scramJAAS + " " + scramJAAS, "exactly one"},
		{"jaas empty", sasl + "sasl.jaas.config=  /* nothing */", "not specified"},
		{"jaas module for another mechanism", sasl + "sasl.jaas.config=" + plainJAAS, "does not serve SASL SCRAM-SHA-256"},
		{"jaas unknown module", sasl + `sasl.jaas.config=com.example.Login required password="hunter2";`, "not supported"},
		{"jaas and librdkafka disagree", sasl + "sasl.password=hunter2\nsasl.jaas.config=" + scramJAAS, "disagree"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadProperties(strings.NewReader(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
			for _, secret := range []string{"hunter2", "s3cret-pw", "pl4in-pw", "Secret"} {
				if strings.Contains(strings.ToLower(err.Error()), strings.ToLower(secret)) {
					t.Fatalf("error holds a secret: %v", err)
				}
			}
		})
	}
}

func TestLoadPropertiesFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "client.properties")
	if err := os.WriteFile(p, []byte("# admin\r\nsecurity.protocol: SASL_SSL\r\nsasl.mechanism: SCRAM-SHA-256\r\nsasl.jaas.config: "+scramJAAS+"\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadPropertiesFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Config{TLS: true, Mechanism: "SCRAM-SHA-256", Username: "alice", Password: "s3cret-pw"}); c != want {
		t.Fatalf("got %+v", c)
	}
	if _, err := LoadPropertiesFile(filepath.Join(t.TempDir(), "missing")); err == nil || !strings.Contains(err.Error(), "command config") {
		t.Fatalf("missing file: %v", err)
	}
}

// TestErrorsWithholdRunTogetherValues: a line that ends in a backslash
// continues on the next, so a stray one runs a setting's value into the
// line below, which may hold a password. The error for such a value must
// not quote it (neither in LoadProperties nor in Validate); a value that
// merely names something unsupported is still quoted.
func TestErrorsWithholdRunTogetherValues(t *testing.T) {
	const next = "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"a\" password=\"hunter2\";"
	for _, tc := range []struct{ name, in, want string }{
		{"protocol", "security.protocol=SASL_SSL\\\n" + next, "security.protocol"},
		{"truststore type", "security.protocol=SSL\nssl.truststore.location=/t\nssl.truststore.type=PEM\\\nssl.keystore.password=hunter2", "ssl.truststore.type"},
		{"keystore type", "security.protocol=SSL\nssl.keystore.location=/k\nssl.keystore.type=PEM\\\nssl.key.password=hunter2", "ssl.keystore.type"},
		{"endpoint identification", "security.protocol=SSL\nssl.endpoint.identification.algorithm=https\\\nssl.key.password=hunter2", "ssl.endpoint.identification.algorithm"},
		{"certificate verification", "security.protocol=SSL\nenable.ssl.certificate.verification=true\\\nssl.key.password=hunter2", "enable.ssl.certificate.verification"},
		{"mechanism", "security.protocol=SASL_SSL\nsasl.username=a\nsasl.password=hunter2\nsasl.mechanism=PLAIN\\\nsasl.password=hunter2", "SASL mechanism"},
		{"mechanism for the module", "security.protocol=SASL_SSL\n" + next + "\nsasl.mechanism=SCRAM-SHA-256\\\nsasl.password=hunter2", "SASL mechanism"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := LoadProperties(strings.NewReader(tc.in))
			if err == nil {
				err = c.Validate()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error about %s", err, tc.want)
			}
			if strings.Contains(strings.ToLower(err.Error()), "hunter2") {
				t.Fatalf("error holds the password: %v", err)
			}
		})
	}
	for _, tc := range []struct{ in, want string }{
		{"security.protocol=TLS", `security.protocol "TLS"`},
		{"security.protocol=SSL\nssl.truststore.location=/t\nssl.truststore.type=PKCS12", "ssl.truststore.type PKCS12"},
		{"security.protocol=SSL\nssl.endpoint.identification.algorithm=ldaps", `ssl.endpoint.identification.algorithm "ldaps"`},
		{"security.protocol=SSL\nenable.ssl.certificate.verification=yes", `enable.ssl.certificate.verification "yes"`},
		{"security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-1", `unknown SASL mechanism "SCRAM-SHA-1"`},
	} {
		c, err := LoadProperties(strings.NewReader(tc.in))
		if err == nil {
			err = c.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want an error with %s", tc.in, err, tc.want)
		}
	}
}
