// One kafkajs consumer-group member, driven by clients/kafkajs_test.go.
// Configuration comes from the environment; every processed record is
// written to stdout synchronously as "REC <partition> <value>" before its
// offset can be committed, so a SIGKILL never loses a line whose offset was
// committed. SIGTERM disconnects (commits and leaves the group).
'use strict'
const fs = require('fs')
const { Kafka, logLevel } = require('kafkajs')

const env = process.env
const out = (line) => fs.writeSync(1, line + '\n')
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

async function main () {
  const kafka = new Kafka({
    clientId: env.CLIENT_ID,
    brokers: [env.BROKER],
    logLevel: env.KAFKAJS_LOG ? logLevel.INFO : logLevel.NOTHING,
    retry: { initialRetryTime: 100, maxRetryTime: 1000, retries: 50 }
  })
  const consumer = kafka.consumer({
    groupId: env.GROUP,
    sessionTimeout: Number(env.SESSION_MS),
    heartbeatInterval: Number(env.HEARTBEAT_MS),
    rebalanceTimeout: Number(env.REBALANCE_MS),
    maxWaitTimeInMs: 200,
    retry: { initialRetryTime: 100, maxRetryTime: 1000, retries: 50 }
  })
  consumer.on(consumer.events.GROUP_JOIN, (e) => {
    out(`JOIN ${e.payload.groupId} ${e.payload.memberId} ${e.payload.isLeader}`)
  })
  consumer.on(consumer.events.CRASH, (e) => {
    out(`CRASH ${e.payload.error && e.payload.error.message} restart=${e.payload.restart}`)
  })
  let stopping = false
  process.on('SIGTERM', async () => {
    if (stopping) return
    stopping = true
    try {
      await consumer.disconnect()
    } finally {
      out('CLOSED')
      process.exit(0)
    }
  })
  await consumer.connect()
  await consumer.subscribe({ topics: [env.TOPIC], fromBeginning: true })
  await consumer.run({
    autoCommitInterval: 300,
    eachMessage: async ({ partition, message }) => {
      out(`REC ${partition} ${message.value.toString()}`)
      await sleep(Number(env.PROCESS_MS || 2))
    }
  })
  out('RUNNING')
}

main().catch((err) => {
  out(`FATAL ${err && err.stack}`)
  process.exit(1)
})
