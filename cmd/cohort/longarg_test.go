package main

import (
	"strings"
	"testing"
)

// TestArgumentLongerThanAKafkaString: a name or id argument of more bytes
// than a Kafka string holds (32,767) is a usage error that gives its length
// and the limit, not the id, before anything is sent. It was sent on; the
// node refused the request and closed the connection, and the command
// failed asking whether SASL was missing.
func TestArgumentLongerThanAKafkaString(t *testing.T) {
	c := cli{t: t, base: []string{"--bootstrap", startNode(t, "127.0.0.1:0").Addr(), "--timeout", "5s"}}
	long := strings.Repeat("x", 32768)
	for _, args := range [][]string{{"group", "describe", long}, {"offsets", long}, {"group", "history", long}} {
		_, errOut, code := c.run(args...)
		if code != 2 || !strings.Contains(errOut, "32768 bytes") || !strings.Contains(errOut, "32767") || strings.Contains(errOut, long[:100]) {
			t.Errorf("%s %s …: exit %d, stderr %.300q; want 2 and the length, not the id", args[0], args[1], code, errOut)
		}
	}
}
