"""The cost of TLS and SASL: producers over PLAINTEXT vs SASL_SSL to one samsa broker, same run.

    .venv/bin/python bench/security.py [--num-records N] [--clients samsa,confluent]

An embedded samsa Broker in this process listens on PLAINTEXT and on SASL_SSL (SCRAM-SHA-512,
TLS 1.3, a certificate made for the run by trustme, from the test extras).  Each (client,
listener) run happens in its own subprocess and sends one warm-up record, then N records of
100-byte values (acks=all, no compression) to a fresh topic and flushes; the clock covers
sending plus the final flush, CPU seconds are that process's.  Each client runs with its
defaults (samsa: linger.ms=5, batch.size=16384; confluent-kafka: librdkafka's linger.ms=5,
batch.size=1000000), the same settings on both listeners.

Prints records/s, MB/s and CPU seconds per run, then per client the SASL_SSL/PLAINTEXT ratio
(the TLS + SASL cost), and samsa's records/s over confluent-kafka's on each listener.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from producer import VALUE_SIZE, payload  # bench/producer.py: the same records

CLIENTS = ("samsa", "confluent")
LISTENERS = ("PLAINTEXT", "SASL_SSL")
USER, PASSWORD = "bench", "bench-secret"


def samsa_security(listener: str, ca: str) -> dict[str, Any]:
    if listener == "PLAINTEXT":
        return {}
    return {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": USER, "sasl.password": PASSWORD, "ssl.ca.location": ca}


# --- workers (run in a subprocess) ------------------------------------------------------


def run_samsa(bootstrap: str, topic: str, n: int, security: dict[str, Any]) -> dict[str, Any]:
    from samsa import KafkaProducer

    producer = KafkaProducer({"bootstrap.servers": bootstrap, "acks": "all", **security})
    value = payload(VALUE_SIZE)
    producer.send(topic, value).get(timeout=60)
    send = producer.send
    cpu0, t0 = time.process_time(), time.perf_counter()
    for _ in range(n):
        send(topic, value)
    producer.flush()
    t1, cpu1 = time.perf_counter(), time.process_time()
    errors = producer.metrics()["record-error-total"]
    producer.close()
    return {"seconds": t1 - t0, "cpu": cpu1 - cpu0, "errors": errors}


def run_confluent(bootstrap: str, topic: str, n: int, security: dict[str, Any]) -> dict[str, Any]:
    from confluent_kafka import Producer

    errors = 0

    def on_delivery(err: Any, _msg: Any) -> None:
        nonlocal errors
        if err is not None:
            errors += 1

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", **security})
    value = payload(VALUE_SIZE)
    producer.produce(topic, value)
    producer.flush(60)
    cpu0, t0 = time.process_time(), time.perf_counter()
    for _ in range(n):
        while True:
            try:
                producer.produce(topic, value, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)
    t1, cpu1 = time.perf_counter(), time.process_time()
    return {"seconds": t1 - t0, "cpu": cpu1 - cpu0, "errors": errors}


WORKERS = {"samsa": run_samsa, "confluent": run_confluent}


def run_one(client: str, bootstrap: str, n: int, security: dict[str, Any]) -> dict[str, Any]:
    topic = f"bench-security-{uuid.uuid4().hex[:8]}"
    out = subprocess.run(
        [sys.executable, __file__, "--worker", client, "--bootstrap", bootstrap, "--topic", topic,
         "--num-records", str(n), "--security", json.dumps(security)],
        capture_output=True, text=True, check=True)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-records", "-n", type=int, default=500_000)
    parser.add_argument("--clients", default=",".join(CLIENTS))
    parser.add_argument("--worker", choices=CLIENTS, help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    parser.add_argument("--security", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        result = WORKERS[args.worker](args.bootstrap, args.topic, args.num_records,
                                      json.loads(args.security))
        print(json.dumps(result))
        return 0

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from samsa.broker import Broker
    from samsa.broker.scram_credentials import ScramCredentialStore
    from samsa.security.scram import SCRAM_SHA_512, ScramCredential
    from tests.support.certs import make_tls_files

    clients = [c for c in args.clients.split(",") if c]
    with tempfile.TemporaryDirectory() as tmp:
        files = make_tls_files(Path(tmp) / "certs")
        data = Path(tmp) / "data"
        data.mkdir()
        ScramCredentialStore(data).apply(
            [(USER, SCRAM_SHA_512, ScramCredential.from_password(SCRAM_SHA_512, PASSWORD))], [])
        config = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
                  "num.partitions": 8, "sasl.enabled.mechanisms": "SCRAM-SHA-512",
                  "ssl.keystore.type": "PEM", "ssl.keystore.location": str(files.broker_keystore)}
        with Broker(data, config=config) as broker:
            results: dict[tuple[str, str], dict[str, Any]] = {}
            print(f"{'client':<10} {'listener':<10} {'records/s':>12} {'MB/s':>8} {'CPU s':>7}")
            for client in clients:
                for listener in LISTENERS:
                    security = samsa_security(listener, str(files.ca))
                    r = run_one(client, broker.bootstrap_servers_for(listener),
                                args.num_records, security)
                    if r["errors"]:
                        print(f"{client} over {listener}: {r['errors']} records failed")
                        return 1
                    rate = args.num_records / r["seconds"]
                    results[(client, listener)] = {**r, "rate": rate}
                    print(f"{client:<10} {listener:<10} {rate:>12,.0f} "
                          f"{rate * VALUE_SIZE / 1e6:>8.1f} {r['cpu']:>7.2f}")
            print()
            for client in clients:
                ratio = results[(client, "SASL_SSL")]["rate"] / results[(client, "PLAINTEXT")]["rate"]
                print(f"{client}: SASL_SSL / PLAINTEXT = {ratio:.2f}x")
            if "samsa" in clients and "confluent" in clients:
                for listener in LISTENERS:
                    ratio = results[("samsa", listener)]["rate"] / results[("confluent", listener)]["rate"]
                    print(f"samsa / confluent-kafka over {listener} = {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
