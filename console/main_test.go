package console

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// childEnv names the environment variable that makes the test binary a
// consumer child (see runChild) instead of running the tests.
const childEnv = "COHORT_CONSOLE_CHILD"

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		runChild(spec)
		return
	}
	if os.Getenv(benchNodeEnv) != "" {
		runBenchNode()
		return
	}
	os.Exit(m.Run())
}

// runChild is a franz-go consumer in its own process, to be SIGKILLed: it
// joins the group given as "addr,group,topic,client id,session timeout"
// and prints "assigned N" whenever partitions are assigned; it never
// leaves.
func runChild(spec string) {
	f := strings.Split(spec, ",")
	session, _ := time.ParseDuration(f[4])
	cl, err := kgo.NewClient(kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelWarn, nil)), kgo.SeedBrokers(f[0]), kgo.ConsumerGroup(f[1]),
		kgo.Balancers(kgo.RangeBalancer()), kgo.ConsumeTopics(f[2]), kgo.ClientID(f[3]),
		kgo.SessionTimeout(session), kgo.HeartbeatInterval(session/5),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			n := 0
			for _, ps := range a {
				n += len(ps)
			}
			fmt.Printf("assigned %d\n", n)
		}))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	for {
		cl.PollFetches(context.Background())
	}
}
