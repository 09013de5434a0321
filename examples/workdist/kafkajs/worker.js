// A work-distribution worker on kafkajs: the partitions of a cohort catalog
// topic are units of work, and the consumer's GROUP_JOIN event says which
// ones this process owns. See docs/workdist.md.
//
//   npm ci --prefix clients/kafkajs     # once: kafkajs, as pinned for the tests
//   NODE_PATH=clients/kafkajs/node_modules node examples/workdist/kafkajs/worker.js \
//     --bootstrap 127.0.0.1:9092 --group workers --topic jobs --client-id w1
//
// (or `npm install kafkajs` next to this file and drop NODE_PATH).
//
// It commits position 0 of its partitions at its first fetch in each
// generation (see FETCH_START below), and prints one line per change of
// ownership on stdout:
//
//   assigned 0,2 member=<id> at=<t>  the group was joined with these partitions (GROUP_JOIN)
//   revoked 0,2 member=<id> at=<t>   a rebalance began (REBALANCING) or the worker stops: all are given up
//   lost 0,2 member=<id> at=<t>      the consumer crashed (CRASH, e.g. every broker was unreachable): another
//                                    worker may own them already
//   stopped                          after leaving the group on SIGINT/SIGTERM
//
// <t> is when the line was written, in Unix nanoseconds (the wall clock at
// sub-millisecond resolution), as the Go workers print it: lines of
// workers on one machine compare directly.
//
// kafkajs's protocols are eager: every rebalance revokes every partition.
// kafkajs does not expose the generation.
'use strict'
const { parseArgs } = require('node:util')
const { Kafka, logLevel } = require('kafkajs')

const { values: opt } = parseArgs({
  options: {
    bootstrap: { type: 'string', default: '127.0.0.1:9092' }, // host:port[,host:port...]
    group: { type: 'string', default: 'workers' },
    topic: { type: 'string', default: 'jobs' },
    'client-id': { type: 'string', default: 'kafkajs-worker' },
    'session-timeout-ms': { type: 'string', default: '6000' },
    'fetch-max-wait-ms': { type: 'string', default: '500' } // how long cohort holds each (empty) fetch
  }
})

// --bootstrap is one address or a comma-separated list (the nodes of a
// cohort cluster); kafkajs wants an array.
const brokers = opt.bootstrap.split(',').map((s) => s.trim()).filter((s) => s !== '')
if (brokers.length === 0) {
  console.error(`error: --bootstrap ${JSON.stringify(opt.bootstrap)}: no address`)
  process.exit(2)
}
const kafka = new Kafka({ clientId: opt['client-id'], brokers, logLevel: logLevel.WARN })
const consumer = kafka.consumer({
  groupId: opt.group,
  sessionTimeout: Number(opt['session-timeout-ms']),
  maxWaitTimeInMs: Number(opt['fetch-max-wait-ms'])
})

let owned = []
let stopping = false // SIGINT/SIGTERM: the worker gives its partitions up and leaves
let member = ''
let toCommit = null // the partitions of the last join, until they are committed
// unixNanos is the wall-clock time in Unix nanoseconds: the process's start
// time plus the monotonic time since, both in milliseconds with a fraction.
const unixNanos = () => BigInt(Math.round((performance.timeOrigin + performance.now()) * 1e6))
const report = (what) =>
  console.log(`${what} ${owned.length ? owned.join(',') : 'none'} member=${member} at=${unixNanos()}`)

consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
  if (stopping) return // given up already: a join while leaving starts no work
  member = payload.memberId
  owned = (payload.memberAssignment[opt.topic] || []).slice().sort((a, b) => a - b)
  report('assigned') // start their work here
  toCommit = owned.length ? owned : null
})
// Commit position 0 of each owned partition in this generation (a catalog
// topic has no records, so 0 is its only position) at the first fetch after
// the join, not in GROUP_JOIN: kafkajs (2.2.4) drops a commit while its
// consumer is not running yet, without an error, and the join of the first
// generation (and of the first after a restart on a crash) comes before it
// runs. FETCH_START is sent only by a running consumer, right after the
// join; a rebalance that begins before it clears toCommit (revokeAll), and a
// later join replaces it, so the commit is always of the current generation.
consumer.on(consumer.events.FETCH_START, () => {
  if (!toCommit) return
  const parts = toCommit
  toCommit = null
  consumer.commitOffsets(parts.map((partition) => ({ topic: opt.topic, partition, offset: '0' })))
    .catch((err) => console.error(`error: commit: ${err.message}`))
})
const revokeAll = () => {
  if (owned.length) report('revoked') // stop their work here
  owned = []
  toCommit = null
}
consumer.on(consumer.events.REBALANCING, revokeAll)
// A crash (a lost connection to every broker, say while cohort restarts)
// ends the consumer's membership: kafkajs restarts the consumer, which joins
// as a new member, and the old member's partitions go to others once its
// session expires on the coordinator, with no REBALANCING event here. So
// they are this worker's no more: stop their work now.
// A crash kafkajs does not restart from (a non-retriable error, such as
// INVALID_SESSION_TIMEOUT for a session timeout outside the node's bounds)
// leaves the process with nothing to do: it ends with status 1, so that a
// supervisor does not take it for a clean stop.
consumer.on(consumer.events.CRASH, ({ payload }) => {
  console.error(`error: crash: ${payload.error.message}`)
  if (owned.length) report('lost')
  owned = []
  toCommit = null
  if (!payload.restart && !stopping) {
    console.error('error: the consumer stopped and will not restart')
    process.exit(1)
  }
})

const stop = async () => {
  if (stopping) return
  stopping = true
  // Give the partitions up (their work stops) before leaving the group: once
  // the leave is sent, the next generation may give them to another worker.
  revokeAll()
  await consumer.disconnect() // leaves the group
  console.log('stopped')
  process.exit(0)
}
process.on('SIGINT', stop)
process.on('SIGTERM', stop)

async function main () {
  await consumer.connect()
  await consumer.subscribe({ topics: [opt.topic] })
  // The topic is empty: eachMessage never runs, the consumer only fetches.
  await consumer.run({ eachMessage: async () => {} })
}
main().catch((err) => {
  console.error(`error: ${err.message}`)
  process.exit(1)
})
