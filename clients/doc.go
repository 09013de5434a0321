// Package clients holds the stock-client end-to-end tests: franz-go, sarama,
// segmentio/kafka-go and confluent-kafka-go (librdkafka) in Go tests, kafkajs,
// kafka-python and kcat driven from them. Most run against cohort behind the test bed's
// router in clients/testbed (kfake for the data, cohort for the groups); the
// bare-cohort tests (bare_test.go) run the work-distribution examples of
// examples/workdist and kcat as child processes against a cohort node alone.
package clients
