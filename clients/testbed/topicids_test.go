package testbed

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/catalog"
)

// TestTopicIDs: the router maps kfake's topic ids to cohort's and back
// through the names Metadata answers gave, and refuses ids it never saw.
func TestTopicIDs(t *testing.T) {
	var ids topicIDs
	m := kmsg.NewPtrMetadataResponse()
	for i, name := range []string{"orders", "ledger"} {
		tp := kmsg.NewMetadataResponseTopic()
		tp.Topic, tp.TopicID = kmsg.StringPtr(name), [16]byte{byte(i + 1), 0xfa}
		m.Topics = append(m.Topics, tp)
	}
	bad := kmsg.NewMetadataResponseTopic()
	bad.Topic, bad.TopicID, bad.ErrorCode = kmsg.StringPtr("missing"), [16]byte{9}, 3
	m.Topics = append(m.Topics, bad)
	ids.learn(m)

	got, err := ids.toCohort([16]byte{1, 0xfa})
	if err != nil || got != catalog.TopicID("orders") {
		t.Fatalf("toCohort(orders) = %x, %v; want %x", got, err, catalog.TopicID("orders"))
	}
	back, err := ids.toKfake(catalog.TopicID("ledger"))
	if err != nil || back != ([16]byte{2, 0xfa}) {
		t.Fatalf("toKfake(ledger) = %x, %v", back, err)
	}
	if _, err := ids.toCohort([16]byte{9}); err == nil {
		t.Fatal("a topic Metadata answered with an error was learnt")
	}
	if _, err := ids.toKfake(catalog.TopicID("never")); err == nil {
		t.Fatal("an unknown cohort id was translated")
	}
}
