"""Run by test_cluster.py in its own process: write and read through "samsa" on local-cluster.

local-cluster[2,1,1024] starts two executor JVMs, each with its own Python workers, so the
source's classes and state travel the way they do on a real cluster.  No register() call:
the "samsa" name comes from the pyspark_samsa module on the Python path.
"""

from __future__ import annotations

import json
import sys

from pyspark.sql import SparkSession


def main(bootstrap: str, topic: str) -> None:
    spark = (
        SparkSession.builder.master("local-cluster[2,1,1024]")
        .appName("samsa-local-cluster")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.executor.memory", "512m")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        kafka = {"kafka.bootstrap.servers": bootstrap}
        df = spark.range(0, 4000, numPartitions=4).selectExpr(
            "cast(id as string) as key", "concat('v', cast(id as string)) as value")
        df.write.format("samsa").options(**kafka).option("topic", topic).mode("append").save()
        back = spark.read.format("samsa").options(**kafka).option("subscribe", topic).load()
        rows = back.selectExpr("cast(key as string) k", "cast(value as string) v", "partition", "offset").collect()
        hosts = (back.rdd.mapPartitions(lambda _: [__import__("os").getpid()]).distinct().count())
        print(json.dumps({
            "count": len(rows),
            "distinct_keys": len({r.k for r in rows}),
            "consistent": all(r.v == "v" + r.k for r in rows),
            "distinct_offsets": len({(r.partition, r.offset) for r in rows}),
            "worker_pids": hosts,
        }))
    finally:
        spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
