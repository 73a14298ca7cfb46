// kafkajs 2.2 peer: node kafkajs.mjs COMMAND 'JSON config'.
import kafkajs from 'kafkajs'
import { buf, deadline, main, recordOf, row, runProducers } from './common.mjs'

const { Kafka, CompressionTypes, logLevel } = kafkajs
const CODECS = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP }

function client (config, clientId) {
  return new Kafka({ clientId, brokers: config.brokers, logLevel: logLevel.ERROR })
}

// As platformatic.mjs: records 0..count-1 of `tag` in sends of `batch`; each acknowledged
// record where the broker put it (a send's records for a partition follow its base offset).
async function produceRecords (producer, config, tag, count, partitionOf, written = []) {
  for (let start = 0; start < count; start += config.batch) {
    const sent = []
    for (let i = start; i < Math.min(start + config.batch, count); i++) {
      sent.push({ ...recordOf(tag, i, config.timestampBase), partition: partitionOf(i) })
    }
    const result = await producer.send({
      topic: config.topic,
      acks: -1,
      compression: CODECS[config.codec ?? 'none'],
      messages: sent.map(r => ({
        partition: r.partition,
        key: r.key,
        value: r.value,
        headers: Object.fromEntries(r.headers),
        timestamp: String(r.timestamp)
      }))
    })
    const next = new Map(result.map(m => {
      if (m.errorCode !== 0) throw new Error(`partition ${m.partition}: error ${m.errorCode}`)
      return [m.partition, BigInt(m.baseOffset)]
    }))
    for (const r of sent) {
      const offset = next.get(r.partition)
      written.push(row(r.partition, offset, r.key, r.value, r.headers, r.timestamp))
      next.set(r.partition, offset + 1n)
    }
  }
  return written
}

function newProducer (kafka, idempotent) {
  return kafka.producer({ idempotent, maxInFlightRequests: idempotent ? 1 : 5, allowAutoTopicCreation: false })
}

async function produce (config) {
  const producer = newProducer(client(config, 'samsa-test-kafkajs'), config.idempotent ?? false)
  await producer.connect()
  try {
    return {
      written: await produceRecords(producer, config, config.tag, config.count,
        i => i % config.partitions)
    }
  } finally {
    await producer.disconnect()
  }
}

async function idempotentProducers (config) {
  const producers = Array.from({ length: config.producers },
    (_, j) => newProducer(client(config, `samsa-test-kafkajs-${j}`), true))
  await Promise.all(producers.map(p => p.connect()))
  try {
    const { written, failures } = await runProducers(config.producers, (j, written) =>
      produceRecords(producers[j], config, `${config.tag}${j}`, config.perProducer, () => 0, written))
    return {
      written,
      failures
    }
  } finally {
    await Promise.all(producers.map(p => p.disconnect()))
  }
}

// As platformatic.mjs: one group member takes `want` records, commits the offset after the last
// one it took on each partition (autoCommit off), and leaves.
async function consumeOnce (config, want, expired) {
  if (want <= 0) return { taken: [], timedOut: false }
  const consumer = client(config, 'samsa-test-kafkajs-consumer').consumer({
    groupId: config.group, sessionTimeout: 10000, heartbeatInterval: 500, maxWaitTimeInMs: 200
  })
  await consumer.connect()
  const taken = []
  const next = new Map()
  let timedOut = false
  try {
    await consumer.subscribe({ topics: [config.topic], fromBeginning: true })
    let done
    const finished = new Promise((resolve, reject) => {
      done = resolve
      // kafkajs reports a consumer that gave up (an error it will not retry) only as an event.
      consumer.on(consumer.events.CRASH, event => reject(event.payload.error))
    })
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message: m }) => {
        if (taken.length >= want) return
        taken.push(row(partition, m.offset, buf(m.key), buf(m.value),
          Object.entries(m.headers ?? {}).map(([k, v]) => [k, buf(v)]), m.timestamp))
        next.set(partition, BigInt(m.offset) + 1n)
        if (taken.length >= want) done()
      }
    })
    const watchdog = setInterval(() => { if (expired()) { timedOut = true; done() } }, 100)
    await finished
    clearInterval(watchdog)
    await consumer.commitOffsets([...next].map(([partition, offset]) =>
      ({ topic: config.topic, partition, offset: String(offset) })))
  } finally {
    await consumer.disconnect()
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
