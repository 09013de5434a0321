"""kafka-python's KafkaAdminClient (and one KafkaConsumer for a group)
against a bare cohort node, driven by clients/topicadmin_bare_test.go.

Each step prints one line, "<step> <result>", the result reduced to what
the test compares (no member ids, no times). An exception is printed as
"<step> ERR <exception class>".
"""

import os
import sys
import time

from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic
from kafka.structs import OffsetAndMetadata

broker, topic, group = os.environ["BROKER"], os.environ["TOPIC"], os.environ["GROUP"]
admin = KafkaAdminClient(bootstrap_servers=broker, client_id="py-admin")


def step(name, f):
    try:
        print(name, f(), flush=True)
    except Exception as err:
        print(name, "ERR", type(err).__name__, flush=True)


def codes(resp):
    # CreateTopics v3 and CreatePartitions v1 answer topic_errors, DeleteTopics
    # v3 topic_error_codes: (topic, code[, message]) tuples.
    rows = getattr(resp, "topic_errors", None) or getattr(resp, "topic_error_codes")
    return sorted((r[0], r[1]) for r in rows)


def partitions(name):
    [t] = admin.describe_topics([name])
    return sorted((p["partition"], p["leader"], p["replicas"]) for p in t["partitions"])


step("CREATE", lambda: codes(admin.create_topics([NewTopic(topic, 3, 1)])))
step("CREATE_AGAIN", lambda: codes(admin.create_topics([NewTopic(topic, 3, 1)])))
step("LIST", lambda: topic in admin.list_topics())
step("DESCRIBE", lambda: partitions(topic))
step("CLUSTER", lambda: sorted((b["node_id"], b["port"] > 0) for b in admin.describe_cluster()["brokers"]))
step("GROW", lambda: codes(admin.create_partitions({topic: NewPartitions(5)})))
step("DESCRIBE_GROWN", lambda: len(partitions(topic)))
# DescribeConfigs v2 resources: (error_code, error_message, resource_type,
# resource_name, config_entries).
step("CONFIGS", lambda: sorted((r[2], r[3], r[0], len(r[4]))
                         for resp in admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic),
                                                             ConfigResource(ConfigResourceType.BROKER, "0")])
                         for r in resp.resources))

consumer = KafkaConsumer(topic, bootstrap_servers=broker, group_id=group, client_id="py-member",
                         session_timeout_ms=6000, enable_auto_commit=False)
deadline = time.time() + 20
while len(consumer.assignment()) < 5 and time.time() < deadline:
    consumer.poll(timeout_ms=200)
step("ASSIGNED", lambda: sorted(tp.partition for tp in consumer.assignment()))
step("COMMIT", lambda: consumer.commit({TopicPartition(topic, p): OffsetAndMetadata(10 + p, "m") for p in range(5)}))
step("GROUPS", lambda: [g for g in admin.list_consumer_groups() if g[0] == group])
step("DESCRIBE_GROUP", lambda: [(g.state, g.protocol_type, g.protocol, [(m.client_id, sorted(
    p for _, ps in m.member_assignment.assignment for p in ps)) for m in g.members])
    for g in admin.describe_consumer_groups([group])])
step("OFFSETS", lambda: sorted((tp.partition, o.offset, o.metadata) for tp, o in admin.list_consumer_group_offsets(group).items()))
step("OFFSETS_ONE", lambda: sorted((tp.partition, o.offset) for tp, o in admin.list_consumer_group_offsets(
    group, partitions=[TopicPartition(topic, 3)]).items()))
step("DELETE_LIVE_GROUP", lambda: [(g, e.__name__) for g, e in admin.delete_consumer_groups([group])])
consumer.close()
step("DESCRIBE_LEFT", lambda: [(g.state, len(g.members)) for g in admin.describe_consumer_groups([group])])
step("DELETE_GROUP", lambda: [(g, e.__name__) for g, e in admin.delete_consumer_groups([group])])
step("OFFSETS_DELETED", lambda: admin.list_consumer_group_offsets(group))
step("DELETE", lambda: codes(admin.delete_topics([topic])))
step("DELETE_AGAIN", lambda: codes(admin.delete_topics([topic])))
admin.close()
