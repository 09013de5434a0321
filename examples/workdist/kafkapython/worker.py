"""A work-distribution worker on kafka-python: the partitions of a cohort
catalog topic are units of work, and the consumer's rebalance listener says
which ones this process owns. See docs/workdist.md.

    apt-get install python3-kafka     # kafka-python 2.0.2, as Debian 12 ships it
    python3 examples/workdist/kafkapython/worker.py \\
        --bootstrap 127.0.0.1:9092 --group workers --topic jobs --client-id w1

(or `pip install kafka-python` in a virtual environment).

It commits position 0 of its partitions after each assignment, from its poll
loop (see below), and prints one line per change of ownership on stdout:

    assigned 0,2 generation=3 at=<t>   the group was joined with these partitions
    revoked 0,2 generation=3 at=<t>    a rebalance began or the worker stops: all are given up
    stopped                            after leaving the group on SIGINT/SIGTERM

<t> is when the line was written, in Unix nanoseconds, as the Go workers
print it: lines of workers on one machine compare directly.

kafka-python's assignors (range, round robin) are eager: every rebalance
revokes every partition. kafka-python tells the generation but not the
member id through its public API. Errors go to stderr, the worker's own as
"error: ...", kafka-python's log as "[WARN] ..." and "[ERROR] ...".
"""

import argparse
import logging
import signal
import sys
import time

from kafka import KafkaConsumer, TopicPartition
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.errors import KafkaError
from kafka.structs import OffsetAndMetadata

parser = argparse.ArgumentParser()
parser.add_argument("--bootstrap", default="127.0.0.1:9092", help="host:port[,host:port...]")
parser.add_argument("--group", default="workers")
parser.add_argument("--topic", default="jobs")
parser.add_argument("--client-id", default="kafka-python-worker")
parser.add_argument("--session-timeout-ms", type=int, default=6000)
parser.add_argument("--fetch-max-wait-ms", type=int, default=500, help="how long cohort holds each (empty) fetch")
opt = parser.parse_args()

# --bootstrap is one address or a comma-separated list (the nodes of a
# cohort cluster).
brokers = [b.strip() for b in opt.bootstrap.split(",") if b.strip()]
if not brokers:
    print(f"error: --bootstrap {opt.bootstrap!r}: no address", file=sys.stderr)
    sys.exit(2)

logging.addLevelName(logging.WARNING, "WARN")
logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="[%(levelname)s] %(name)s: %(message)s")


def say(line):
    print(line, flush=True)


consumer = KafkaConsumer(
    bootstrap_servers=brokers,
    group_id=opt.group,
    client_id=opt.client_id,
    session_timeout_ms=opt.session_timeout_ms,
    heartbeat_interval_ms=max(opt.session_timeout_ms // 6, 100),
    fetch_max_wait_ms=opt.fetch_max_wait_ms,
    enable_auto_commit=False,
    # Round robin first, as kafkajs; range as well, so that the worker
    # shares a group with range-only members.
    partition_assignment_strategy=(RoundRobinPartitionAssignor, RangePartitionAssignor),
)

owned = []
generation = -1
to_commit = None  # the partitions of the last assignment, until committed


def report(what):
    say(f"{what} {','.join(map(str, owned)) if owned else 'none'} generation={generation} at={time.time_ns()}")


class Listener(ConsumerRebalanceListener):
    def on_partitions_revoked(self, revoked):
        # Called at the start of every rebalance (eager), also the first
        # with nothing owned: stop the work on owned partitions here.
        global owned, to_commit
        if owned:
            report("revoked")
        owned, to_commit = [], None

    def on_partitions_assigned(self, assigned):
        # Start the work on these partitions here. The commit waits for the
        # poll loop: a commit from inside the listener would run the
        # client's network loop from within its own rebalance.
        global owned, generation, to_commit
        owned = sorted(tp.partition for tp in assigned if tp.topic == opt.topic)
        # kafka-python's public API has no generation accessor; the
        # coordinator's Generation tuple (2.0.2) is read for the printed line
        # only, and -1 printed where a version keeps it elsewhere.
        generation = getattr(getattr(getattr(consumer, "_coordinator", None), "_generation", None), "generation_id", -1)
        report("assigned")
        to_commit = owned or None


stopping = False


def stop(signum, frame):
    global stopping
    stopping = True


signal.signal(signal.SIGINT, stop)
signal.signal(signal.SIGTERM, stop)

consumer.subscribe(topics=[opt.topic], listener=Listener())
while not stopping:
    # The topic is empty: poll returns nothing, the consumer only fetches
    # (and heartbeats, joins and syncs inside poll).
    consumer.poll(timeout_ms=opt.fetch_max_wait_ms)
    if to_commit and not stopping:
        parts, to_commit = to_commit, None
        try:
            consumer.commit({TopicPartition(opt.topic, p): OffsetAndMetadata(0, "") for p in parts})
        except KafkaError as err:  # a rebalance began: the next assignment commits
            print(f"error: commit: {err}", file=sys.stderr, flush=True)

# Give the partitions up (their work stops) before leaving the group: once the
# leave is sent, the next generation may give them to another worker at once.
Listener().on_partitions_revoked(set())
consumer.close(autocommit=False)  # leaves the group
say("stopped")
