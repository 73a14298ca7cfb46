// Shared by the node peers: the records they write, the run deadline, and the JSON report on
// stdout that tests/broker/test_node_clients.py reads. A failure prints a stack and exits 1.

// Record i of a run tagged `tag`: distinct, a little compressible, printable (JSON-safe).
export function recordOf (tag, i, base) {
  return {
    key: `key-${tag}-${i}`,
    value: `value-${tag}-${i}-` + 'abcdefgh'.repeat(i % 5),
    headers: [['seq', String(i)], ['origin', 'node']],
    timestamp: base + i
  }
}

// One record as the report lists it: [partition, offset, key, value, headers, timestamp].
export function row (partition, offset, key, value, headers, timestamp) {
  return [partition, Number(offset), key, value, headers, Number(timestamp)]
}

export function buf (b) {
  return b === null || b === undefined ? null : Buffer.from(b).toString('utf8')
}

// Resolves once written: stdout is a pipe, which process.exit would cut short.
export function report (result) {
  return new Promise(resolve => process.stdout.write(JSON.stringify(result) + '\n', resolve))
}

// A run that stops making progress gives up after `ms` and reports what it has, so the test can
// say which records are missing instead of hanging until pytest's own timeout.
export function deadline (ms) {
  const end = Date.now() + ms
  return () => Date.now() > end
}

export async function main (commands) {
  const [command, config] = [process.argv[2], JSON.parse(process.argv[3] ?? '{}')]
  const run = commands[command]
  if (!run) throw new Error(`unknown command ${command}; one of ${Object.keys(commands)}`)
  try {
    await report(await run(config))
    process.exit(0)
  } catch (error) {
    console.error(error?.stack ?? error)
    if (error?.errors) console.error(error.errors)
    process.exit(1)
  }
}

// One line for an error and the errors it wraps (Kafka error names where the client has them).
export function describeError (error) {
  const inner = (error?.errors ?? []).map(e => describeError(e))
  const name = error?.apiId ?? error?.type ?? error?.name ?? 'Error'
  const text = `${name}: ${error?.message ?? error}`
  return inner.length ? `${text} [${inner.join('; ')}]` : text
}

// Runs producer j's `produce(j, written)` for every producer at once. A producer that fails
// keeps what it had acknowledged in `written`; its error is reported with it, so the test still
// checks every acknowledged record.
export async function runProducers (count, produce) {
  const written = []
  const failures = []
  await Promise.all(Array.from({ length: count }, async (_, j) => {
    try {
      await produce(j, written)
    } catch (error) {
      failures.push(`producer ${j}: ${describeError(error)}`)
    }
  }))
  return { written, failures }
}
