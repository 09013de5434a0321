"""kafka-python over SASL_SSL with SCRAM-SHA-512 against the secure test bed
(clients/testbed.Secure), driven by clients/security_test.go. Configuration
comes from the environment, the password too (never from argv, where other
users of the machine could read it). As the bed's app user it commits OFFSET
for GROUP on TOPIC partition 0 with a consumer, fetches it back, lists and
describes groups, and tries to describe DENIED_GROUP, printing one line per
result:

    COMMITTED <offset>       the consumer's commit was acknowledged
    OFFSETS <list>           list_consumer_group_offsets(GROUP)
    GROUPS <list>            list_consumer_groups: the group ids, sorted
    DESCRIBE <list>          describe_consumer_groups([GROUP]): (group, state)
    DENIED <class>           describe_consumer_groups([DENIED_GROUP]) failed so
    ERROR <class>            the first failure; the exit code is 2

kafka-python 2.0.2 authenticates with SaslHandshake v0 and the SCRAM
messages framed by their length alone (no SaslAuthenticate). Error lines
carry the exception's class, never its message.
"""

import os
import sys
import time

from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata

env = os.environ
common = dict(
    bootstrap_servers=env["BROKER"],
    security_protocol="SASL_SSL",
    ssl_cafile=env["CA_FILE"],
    sasl_mechanism="SCRAM-SHA-512",
    sasl_plain_username=env["SASL_USERNAME"],
    sasl_plain_password=env["SASL_PASSWORD"],
    reconnect_backoff_ms=100,
    reconnect_backoff_max_ms=1000,
)


def out(line):
    print(line, flush=True)


try:
    admin = KafkaAdminClient(client_id="py-secure-admin", **common)
    group, topic, offset = env["GROUP"], env["TOPIC"], int(env["OFFSET"])
    consumer = KafkaConsumer(group_id=group, client_id="py-secure-member", enable_auto_commit=False, **common)
    consumer.assign([TopicPartition(topic, 0)])  # no subscription: commits as a simple consumer (generation -1)
    consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(offset, "")})
    consumer.close()
    out(f"COMMITTED {offset}")
    out("OFFSETS " + repr(sorted((tp.topic, tp.partition, o.offset) for tp, o in admin.list_consumer_group_offsets(group).items())))
    out("GROUPS " + repr(sorted(g for g, _ in admin.list_consumer_groups())))
    out("DESCRIBE " + repr([(g.group, g.state) for g in admin.describe_consumer_groups([group])]))
    if env.get("DENIED_GROUP"):
        try:
            admin.describe_consumer_groups([env["DENIED_GROUP"]])
            out("DENIED none")
        except Exception as err:
            out(f"DENIED {type(err).__name__}")
    admin.close()
except Exception as err:
    out(f"ERROR {type(err).__name__}")
    sys.exit(2)
