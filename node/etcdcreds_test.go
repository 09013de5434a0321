package node

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestEtcdEndpointWithPasswordRefused: an --etcd endpoint written with a
// user and password (http://user:password@host:port) puts the password on
// the command line and, as the endpoints are quoted in connection errors,
// in the node's error and log. The etcd client does not authenticate with
// it either. It is refused before any dial, and the refusal does not
// repeat it.
func TestEtcdEndpointWithPasswordRefused(t *testing.T) {
	const secret = "s3cret-in-url"
	for _, ep := range []string{"http://cohort:" + secret + "@127.0.0.1:1", "https://cohort:" + secret + "@127.0.0.1:1",
		"cohort:" + secret + "@127.0.0.1:1"} {
		_, err := DialEtcd(context.Background(), &ClusterConfig{Endpoints: []string{"127.0.0.1:2", ep}, DialTimeout: 300 * time.Millisecond})
		if err == nil {
			t.Fatalf("%s: dialled", ep)
		}
		msg := err.Error()
		if strings.Contains(msg, secret) {
			t.Errorf("the error repeats the password in the endpoint: %s", msg)
		}
		if !strings.Contains(msg, "--etcd-password-file") {
			t.Errorf("%s: error %q; want it to say where the password goes", ep, msg)
		}
	}
}
