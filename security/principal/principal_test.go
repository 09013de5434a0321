package principal

import (
	"errors"
	"strings"
	"testing"
)

// The cases below are Kafka's SslPrincipalMapperTest, with Java string
// escapes undone.

func TestParseRulesValid(t *testing.T) {
	for _, s := range []string{
		"DEFAULT",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
		"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
		"RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
		"RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
		"RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
		"RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
	} {
		if _, err := ParseRules(s); err != nil {
			t.Errorf("ParseRules(%q): %v", s, err)
		}
	}
}

func TestParseRulesInvalid(t *testing.T) {
	for _, s := range []string{
		// Kafka's.
		"default",
		"DEFAUL",
		"DEFAULT/L",
		"DEFAULT/U",
		"RULE:CN=(.*?),OU=ServiceUsers.*/$1",
		"rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
		// Patterns Go cannot compile, or that are not regexps.
		`RULE:(?<=CN=)\w+/$0/`,
		`RULE:^CN=(\w+)\1$/$1/`,
		"RULE:a)(b/x/",
		// Replacements Java rejects when they are used.
		`RULE:^CN=(.*)$/$1\/`,
		`RULE:^CN=(.*)$/$/`,
		`RULE:^CN=(.*)$/$x/`,
		`RULE:^CN=(.*)$/${/`,
		`RULE:^CN=(.*)$/${user/`,
		`RULE:^CN=(?P<user>.*)$/${nobody}/`,
		`RULE:^CN=.*$/$1/`,
		"DEFAULT, RULE:x/y/, bogus",
	} {
		if r, err := ParseRules(s); err == nil {
			t.Errorf("ParseRules(%q) = %v, want an error", s, r)
		}
	}
}

func TestRulesSplitting(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "[]"},
		{"DEFAULT", "[DEFAULT]"},
		{"RULE://", "[RULE:/]"},
		{"RULE:/.*/", "[RULE:/.*]"},
		{"RULE:/.*/L", "[RULE:/.*/L]"},
		{"RULE://,DEFAULT", "[RULE:/, DEFAULT]"},
		{"  RULE:// ,  DEFAULT  ", "[RULE:/, DEFAULT]"},
		{"  RULE:   /     / ,  DEFAULT  ", "[RULE:   /     , DEFAULT]"},
		{"  RULE:  /     /U   ,DEFAULT  ", "[RULE:  /     /U, DEFAULT]"},
		{"  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ", "[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]"},
		// Empty rules are ignored.
		{",   , , ,      , , ,   ", "[]"},
		{",,RULE://,,,DEFAULT,,", "[RULE:/, DEFAULT]"},
		{",  , RULE: /   /    ,,,   DEFAULT, ,   ", "[RULE: /   , DEFAULT]"},
		{"     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,", "[RULE:   /  /U, DEFAULT]"},
		// Escape sequences stay in the text.
		{`RULE:\/\\\(\)\n\t/\/\//`, `[RULE:\/\\\(\)\n\t/\/\/]`},
		{`RULE:\**\/+/*/L,RULE:\/*\**/**/`, `[RULE:\**\/+/*/L, RULE:\/*\**/**]`},
		// Commas and RULE: inside patterns and replacements.
		{
			`RULE:,RULE:,/,RULE:,\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT`,
			`[RULE:,RULE:,/,RULE:,\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, /DEFAULT, DEFAULT]`,
		},
	}
	for _, tt := range tests {
		r, err := ParseRules(tt.in)
		if err != nil {
			t.Errorf("ParseRules(%q): %v", tt.in, err)
			continue
		}
		if got := r.String(); got != tt.want {
			t.Errorf("ParseRules(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func mustRules(t *testing.T, s string) *Rules {
	t.Helper()
	r, err := ParseRules(s)
	if err != nil {
		t.Fatalf("ParseRules(%q): %v", s, err)
	}
	return r
}

func TestMapKafkaExamples(t *testing.T) {
	r := mustRules(t, strings.Join([]string{
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
		"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
		"RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
		"RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
		"DEFAULT",
	}, ", "))
	for dn, want := range map[string]string{
		"CN=Duke,OU=ServiceUsers,O=Org,C=US":        "duke",
		"CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US": "duke@sme",
		"cn=duke,ou=sme,dc=mycp,dc=com":             "DUKE@SME",
		"cN=duke,OU=JavaSoft,O=Sun Microsystems":    "DUKE",
		"OU=JavaSoft,O=Sun Microsystems,C=US":       "OU=JavaSoft,O=Sun Microsystems,C=US",
	} {
		if got, err := r.Map(dn); err != nil || got != want {
			t.Errorf("Map(%q) = %q, %v; want %q", dn, got, err, want)
		}
	}
	// Kafka's testCommaWithWhitespace: an escaped comma inside the CN.
	r = mustRules(t, `RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT`)
	if got, err := r.Map(`CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz`); err != nil || got != `Tkac\, Adam` {
		t.Errorf("Map = %q, %v", got, err)
	}
}

func TestMapFirstRuleWins(t *testing.T) {
	r := mustRules(t, `RULE:^CN=([^,]*),OU=admins$/admin/, RULE:^CN=([^,]*).*$/$1/U, DEFAULT`)
	for dn, want := range map[string]string{
		"CN=ann,OU=admins": "admin",
		"CN=ann,OU=dev":    "ANN",
		"O=acme":           "O=acme",
	} {
		if got, err := r.Map(dn); err != nil || got != want {
			t.Errorf("Map(%q) = %q, %v; want %q", dn, got, err, want)
		}
	}
}

func TestMapNoMatchingRule(t *testing.T) {
	for _, r := range []*Rules{nil, mustRules(t, ""), mustRules(t, `RULE:^CN=(\w*)$/$1/`)} {
		// The pattern must match the whole DN, not a part of it.
		if got, err := r.Map("CN=a,O=b"); !errors.Is(err, ErrNoMatchingRule) {
			t.Errorf("%s: Map = %q, %v; want ErrNoMatchingRule", r, got, err)
		} else if !strings.Contains(err.Error(), "CN=a,O=b") {
			t.Errorf("error %q does not name the DN", err)
		}
	}
}

func TestReplacement(t *testing.T) {
	tests := []struct{ rules, dn, want string }{
		{`RULE:^CN=(\w+),O=(\w+)$/$2-$1/`, "CN=a,O=b", "b-a"},
		{`RULE:^CN=(\w+)$/$0:$1/`, "CN=a", "CN=a:a"},
		{`RULE:^CN=(\w+),O=(\w+)$/$1$3/`, "CN=a,O=b", "a$3"},     // past the groups: literal, as Kafka
		{`RULE:^CN=(\w+),O=(\w+)$/$1x$91/`, "CN=a,O=b", "ax$91"}, // likewise
		{`RULE:^CN=(\w+)$/$12/`, "CN=a", "a2"},                   // as many digits as name a group
		{`RULE:^((((((((((((\w))))))))))))$/$12/`, "q", "q"},     // twelve groups: group 12
		{`RULE:^CN=(?P<user>\w+)$/${user}!/`, "CN=a", "a!"},      // named group
		{`RULE:^CN=(?<user>\w+)$/${user}/`, "CN=a", "a"},         // Java's syntax of a named group
		{`RULE:^CN=(\w+)$/\$1\\$1/`, "CN=a", `$1\a`},             // escapes
		{`RULE:^CN=(\w+)$/a\/b/`, "CN=a", "a/b"},                 // escaped '/'
		{`RULE:^CN=(x)?(\w*)$/[$1|$2]/`, "CN=b", "[|b]"},         // a group that did not match adds nothing
		{`RULE:^CN=(\w+)$/$1@EXAMPLE.COM/L`, "CN=Ann", "ann@example.com"},
		{`RULE:^CN=(\w+)$/$1@example.com/U`, "CN=Ann", "ANN@EXAMPLE.COM"},
		// Java's replaceAll replaces every match of the unanchored pattern,
		// which need not be the whole DN: here the first match is "a=b"
		// (lazy), and the rest, "c", is kept.
		{`RULE:(\w+)=(\w+?)/$2@$1/`, "a=bc", "b@ac"},
		{`RULE:(\w)\w??/<$1>/`, "ab", "<a><b>"}, // the pattern matches "ab" whole, but finds "a" then "b"
		// The documented difference: Kafka gives "xx" (Java also replaces
		// the empty match at the end); anchored, both give "x".
		{`RULE:.*/x/`, "CN=a", "x"},
		{`RULE:^.*$/x/`, "CN=a", "x"},
	}
	for _, tt := range tests {
		r := mustRules(t, tt.rules)
		if got, err := r.Map(tt.dn); err != nil || got != tt.want {
			t.Errorf("%s on %q = %q, %v; want %q", tt.rules, tt.dn, got, err, tt.want)
		}
	}
}
