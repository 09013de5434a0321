package console

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestGroupPageShowsPartitionsStillToRevoke: a consumer-protocol member told
// to give partitions up, which has not acknowledged it yet, still holds them
// and the group waits for it. The group page must show them on that member:
// it showed only its assignment (ConsumerGroupDescribe leaves them out, as
// Kafka's), so the member holding up the reconciliation read as holding
// only its share and the others' partitions as held by no one (staged with
// a franz-go member 20 s in its revoke callback: "slowC ... events 0,1").
func TestGroupPageShowsPartitionsStillToRevoke(t *testing.T) {
	n := startNode(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := kafkaClient(t, n, false)
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 4, 1, nil, "work"); err != nil {
		t.Fatal(err)
	}
	g := newHandConsumers(ctx, t, cl, "rv", "work")
	g.join("m-a")
	g.converge() // m-a holds all four
	g.join("m-b")
	// m-a heartbeats once, still owning all four: it is told to keep two.
	// It does not heartbeat again, so it has not given the others up.
	g.beat("m-a")
	if kept := g.st["m-a"].owned; len(kept) != 1 || len(kept[0].Partitions) != 2 {
		t.Fatalf("m-a was not told to give two partitions up: %+v", kept)
	}
	code, page := get(t, "http://"+n.HTTPAddr()+"/console/groups/rv", "", "")
	if code != 200 {
		t.Fatalf("group page: %d", code)
	}
	// m-a's row: from the <tr> before the first cell naming it.
	at := strings.Index(page, `<td title="m-a">`)
	if at < 0 {
		t.Fatalf("no row for m-a:\n%s", page)
	}
	row := page[strings.LastIndex(page[:at], "<tr"):]
	row = row[:strings.Index(row, "</tr>")]
	if !strings.Contains(row, `still holds, to give up: <b>work</b>`) {
		t.Fatalf("m-a's row does not show the partitions it still holds:\n%s", row)
	}
	// The host as the CLI shows it, without the "/" of the node's
	// InetAddress-style text.
	if !strings.Contains(row, "<td>127.0.0.1</td>") {
		t.Errorf("m-a's host is not shown as 127.0.0.1:\n%s", row)
	}
}

// TestTimelineNamesHostsAsTheCLI: the timeline's "who" drops the "/" of a
// host reported in Java's InetAddress form, as the members table and the
// CLI do.
func TestTimelineNamesHostsAsTheCLI(t *testing.T) {
	if got, want := who("m1", "", "c1", "/10.0.0.1"), "c1 on 10.0.0.1 (m1)"; got != want {
		t.Fatalf("who: %q, want %q", got, want)
	}
}
