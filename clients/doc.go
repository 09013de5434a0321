// Package clients holds the stock-client end-to-end tests: franz-go, sarama,
// segmentio/kafka-go and confluent-kafka-go (librdkafka) in Go tests, kafkajs
// and kcat driven from them, all against cohort behind the test bed in
// clients/testbed (kfake for the data, cohort for the groups).
package clients
