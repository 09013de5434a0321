// kafkajs's admin client managing topics on a bare cohort node, driven by
// clients/topicadmin_bare_test.go (BROKER from the environment). It creates
// TOPIC with 3 partitions and a config, tries to create it again, describes
// its configs and the broker's, grows it to 5 partitions, reads its metadata
// and deletes it, printing one line per step:
//
//   CREATED <bool>             createTopics (true: created)
//   AGAIN <bool|type>          the second createTopics: false (kafkajs's answer for a topic
//                              that exists), or the Kafka error type it failed with
//   CONFIGS <json>             describeConfigs: [resourceType, resourceName, errorCode, number of configs] per resource
//   PARTITIONS <n>             fetchTopicMetadata after createPartitions
//   DELETED                    deleteTopics done
//   ERROR <name> <type>        the first unexpected failure; the exit code is 2
'use strict'
const fs = require('fs')
const { Kafka, logLevel, ConfigResourceTypes } = require('kafkajs')

const env = process.env
const out = (line) => fs.writeSync(1, line + '\n')

async function main () {
  const kafka = new Kafka({
    clientId: 'kafkajs-topics',
    brokers: [env.BROKER],
    connectionTimeout: 5000,
    logLevel: env.KAFKAJS_LOG ? logLevel.INFO : logLevel.NOTHING,
    retry: { initialRetryTime: 100, maxRetryTime: 1000, retries: 3 }
  })
  const admin = kafka.admin()
  await admin.connect()
  const topic = env.TOPIC
  try {
    const spec = { topic, numPartitions: 3, replicationFactor: 1, configEntries: [{ name: 'retention.ms', value: '86400000' }] }
    out(`CREATED ${await admin.createTopics({ topics: [spec], waitForLeaders: true })}`)
    try {
      out(`AGAIN ${await admin.createTopics({ topics: [spec] })}`)
    } catch (err) {
      out(`AGAIN ${err.type || err.name}`)
    }
    const described = await admin.describeConfigs({
      includeSynonyms: false,
      resources: [{ type: ConfigResourceTypes.TOPIC, name: topic }, { type: ConfigResourceTypes.BROKER, name: '0' }]
    })
    out(`CONFIGS ${JSON.stringify(described.resources.map((r) => [r.resourceType, r.resourceName, r.errorCode, r.configEntries.length]))}`)
    await admin.createPartitions({ topicPartitions: [{ topic, count: 5 }] })
    const md = await admin.fetchTopicMetadata({ topics: [topic] })
    out(`PARTITIONS ${md.topics[0].partitions.length}`)
    await admin.deleteTopics({ topics: [topic] })
    out('DELETED')
  } finally {
    await admin.disconnect()
  }
}

main().catch((err) => {
  out(`ERROR ${err.name} ${err.type || ''}`)
  process.exit(2)
})
