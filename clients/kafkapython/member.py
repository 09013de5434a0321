"""One kafka-python consumer-group member, driven by clients/process_test.go.

Configuration comes from the environment; every processed record is written
to stdout as "REC <partition> <value>" (flushed) before the next poll, and
the automatic commit commits a poll's records only during a later poll, so a
SIGKILL never loses a line whose offset was committed. SIGTERM closes the
consumer: a last commit, then LeaveGroup.
"""

import logging
import os
import signal
import sys
import time

from kafka import KafkaConsumer
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

env = os.environ
logging.addLevelName(logging.WARNING, "WARN")
logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="[%(levelname)s] %(name)s: %(message)s")

assignors = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}
consumer = KafkaConsumer(
    env["TOPIC"],
    bootstrap_servers=[env["BROKER"]],
    group_id=env["GROUP"],
    client_id=env["CLIENT_ID"],
    session_timeout_ms=int(env["SESSION_MS"]),
    heartbeat_interval_ms=int(env["HEARTBEAT_MS"]),
    max_poll_interval_ms=int(env["REBALANCE_MS"]),
    auto_offset_reset="earliest",
    enable_auto_commit=True,
    auto_commit_interval_ms=300,
    fetch_max_wait_ms=200,
    partition_assignment_strategy=(assignors[env.get("PROTOCOL", "roundrobin")],),
)

stopping = False


def stop(signum, frame):
    global stopping
    stopping = True


signal.signal(signal.SIGTERM, stop)
pause = int(env.get("PROCESS_MS", "2")) / 1000
print("RUNNING", flush=True)
while not stopping:
    for tp, records in consumer.poll(timeout_ms=200).items():
        for r in records:
            sys.stdout.write(f"REC {tp.partition} {r.value.decode()}\n")
            sys.stdout.flush()
            time.sleep(pause)
consumer.close()  # commits what poll returned, then leaves the group
print("CLOSED", flush=True)
