"""The source on local-cluster (separate executor JVMs and Python workers), in a subprocess:
the session fixture's SparkContext is local[2] and there is one SparkContext per process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from samsa.broker import Broker

REPO = Path(__file__).resolve().parents[2]


def test_local_cluster_write_and_read(broker: Broker, new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        # pyspark_samsa must be visible to pkgutil.iter_modules for auto-registration; an
        # editable install hides top-level modules from it, a regular install does not.
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    done = subprocess.run([sys.executable, str(Path(__file__).with_name("cluster_job.py")),
                           broker.bootstrap_servers, topic],
                          check=False, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    # Two executors, so at least two Python worker processes read the partitions.
    worker_pids = result.pop("worker_pids")
    assert worker_pids >= 2
    assert result == {"count": 4000, "distinct_keys": 4000, "consistent": True,
                      "distinct_offsets": 4000}
