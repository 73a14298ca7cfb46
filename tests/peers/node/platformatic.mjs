// @platformatic/kafka peer (needs Node >= 22.22): node platformatic.mjs COMMAND 'JSON config'.
// API as in node_modules/@platformatic/kafka/dist/clients/{producer,consumer}/*.d.ts.
import { Consumer, Producer } from '@platformatic/kafka'
import { buf, deadline, main, recordOf, row, runProducers } from './common.mjs'

function newProducer (config, clientId, idempotent) {
  return new Producer({
    clientId,
    bootstrapBrokers: config.brokers,
    idempotent,
    compression: config.codec ?? 'none',
    autocreateTopics: false
  })
}

// The (producer id, epoch) an idempotent producer was first given: it forgets them on an error.
const firstIds = new WeakMap()

// Sends records 0..count-1 of `tag` (record i to partition i % partitions) in sends of `batch`
// and returns each acknowledged record where the broker said it put it: a send's records for a
// partition follow that partition's base offset in order.
async function produceRecords (producer, config, tag, count, partitionOf, written = []) {
  for (let start = 0; start < count; start += config.batch) {
    const sent = []
    for (let i = start; i < Math.min(start + config.batch, count); i++) {
      const r = recordOf(tag, i, config.timestampBase)
      sent.push({ ...r, partition: partitionOf(i) })
    }
    const result = await producer.send({
      messages: sent.map(r => ({
        topic: config.topic,
        partition: r.partition,
        key: Buffer.from(r.key),
        value: Buffer.from(r.value),
        headers: new Map(r.headers.map(([k, v]) => [Buffer.from(k), Buffer.from(v)])),
        timestamp: BigInt(r.timestamp)
      }))
    })
    if (producer.producerId !== undefined && !firstIds.has(producer)) {
      firstIds.set(producer, { id: String(producer.producerId), epoch: producer.producerEpoch })
    }
    const next = new Map((result.offsets ?? []).map(o => [o.partition, o.offset]))
    for (const r of sent) {
      const offset = next.get(r.partition)
      if (offset === undefined) throw new Error(`the send answered no offset for partition ${r.partition}`)
      written.push(row(r.partition, offset, r.key, r.value, r.headers, r.timestamp))
      next.set(r.partition, offset + 1n)
    }
  }
  return written
}

async function produce (config) {
  const producer = newProducer(config, 'samsa-test-platformatic', config.idempotent ?? false)
  try {
    const written = await produceRecords(producer, config, config.tag, config.count,
      i => i % config.partitions)
    return { written }
  } finally {
    await producer.close()
  }
}

// `producers` idempotent producers, each its own Producer (own connections, own
// InitProducerId), send to partition 0 at the same time.
async function idempotentProducers (config) {
  const producers = Array.from({ length: config.producers },
    (_, j) => newProducer(config, `samsa-test-platformatic-${j}`, true))
  try {
    const { written, failures } = await runProducers(config.producers, (j, written) =>
      produceRecords(producers[j], config, `${config.tag}${j}`, config.perProducer, () => 0, written))
    return {
      written,
      failures,
      producers: producers.map(p => firstIds.get(p) ?? null)
    }
  } finally {
    await Promise.all(producers.map(p => p.close()))
  }
}

// One consumer-group member reads until it has taken `want` records (or the deadline), commits
// the offset after the last record it took on each partition, and leaves. Records delivered
// after that are not taken: a later member of the group must read them.
async function consumeOnce (config, want, expired) {
  if (want <= 0) return { taken: [], timedOut: false }
  const consumer = new Consumer({
    clientId: 'samsa-test-platformatic-consumer',
    groupId: config.group,
    bootstrapBrokers: config.brokers,
    maxWaitTime: 200,
    sessionTimeout: 10000,
    heartbeatInterval: 500
  })
  const taken = []
  const last = new Map()
  let timedOut = false
  try {
    const stream = await consumer.consume({
      topics: [config.topic], mode: 'committed', fallbackMode: 'earliest', autocommit: false
    })
    const watchdog = setInterval(() => {
      if (expired()) { timedOut = true; stream.close() }
    }, 100)
    try {
      for await (const m of stream) {
        taken.push(row(m.partition, m.offset, buf(m.key), buf(m.value),
          [...m.headers].map(([k, v]) => [buf(k), buf(v)]), m.timestamp))
        last.set(m.partition, m)
        if (taken.length >= want) break
      }
    } finally {
      clearInterval(watchdog)
    }
    for (const m of last.values()) await m.commit() // commits m.offset + 1
    await stream.close()
  } finally {
    await consumer.close()
  }
  return { taken, timedOut }
}

async function consume (config) {
  const expired = deadline(config.timeoutMs)
  const first = await consumeOnce(config, config.split, expired)
  const second = await consumeOnce(config, config.count - first.taken.length, expired)
  return { phases: [first.taken, second.taken], timedOut: first.timedOut || second.timedOut }
}

await main({ produce, 'idempotent-producers': idempotentProducers, consume })
