// kafkajs admin operations against a cohort SASL_SSL listener, driven by
// clients/security_test.go. Configuration comes from the environment (the
// password too: never from argv, where other users of the machine could read
// it). It sets the offset of GROUP on TOPIC partition 0 to OFFSET (setOffsets:
// kafkajs joins the group with a paused consumer and commits the seek) and
// fetches it back, then lists and describes groups, printing one line per
// result:
//
//   SET <offset>     setOffsets done
//   OFFSETS <json>   fetchOffsets
//   GROUPS <json>    listGroups (group ids, sorted)
//   DESCRIBE <json>  describeGroups([GROUP])
//   DENIED <type>    describeGroups([DENIED_GROUP]) failed with this error type
//   ERROR <name> <type> <retriable>   the first failure; the exit code is 2
//
// Error lines carry the error's class and Kafka type, never its message (a
// message could echo configuration).
'use strict'
const fs = require('fs')
const { Kafka, logLevel } = require('kafkajs')

const env = process.env
const out = (line) => fs.writeSync(1, line + '\n')

async function main () {
  const kafka = new Kafka({
    clientId: env.CLIENT_ID || 'kafkajs-admin',
    brokers: [env.BROKER],
    ssl: { ca: [fs.readFileSync(env.CA_FILE, 'utf8')] },
    sasl: { mechanism: 'scram-sha-512', username: env.SASL_USERNAME, password: env.SASL_PASSWORD },
    connectionTimeout: 5000,
    authenticationTimeout: 5000,
    logLevel: env.KAFKAJS_LOG ? logLevel.INFO : logLevel.NOTHING,
    retry: { initialRetryTime: 100, maxRetryTime: 1000, retries: Number(env.RETRIES || 5) }
  })
  const admin = kafka.admin()
  await admin.connect()
  try {
    const offset = env.OFFSET
    await admin.setOffsets({ groupId: env.GROUP, topic: env.TOPIC, partitions: [{ partition: 0, offset }] })
    out(`SET ${offset}`)
    const fetched = await admin.fetchOffsets({ groupId: env.GROUP, topics: [env.TOPIC] })
    out(`OFFSETS ${JSON.stringify(fetched)}`)

    const listed = await admin.listGroups()
    out(`GROUPS ${JSON.stringify(listed.groups.map((g) => g.groupId).sort())}`)

    const described = await admin.describeGroups([env.GROUP])
    out(`DESCRIBE ${JSON.stringify(described.groups.map((g) => ({ groupId: g.groupId, state: g.state, errorCode: g.errorCode })))}`)

    if (env.DENIED_GROUP) {
      try {
        await admin.describeGroups([env.DENIED_GROUP])
        out('DENIED none')
      } catch (err) {
        out(`DENIED ${err.type || err.name}`)
      }
    }
  } finally {
    await admin.disconnect()
  }
}

main().catch((err) => {
  out(`ERROR ${err && err.name} ${(err && err.type) || '-'} ${err && err.retriable}`)
  process.exit(2)
})
