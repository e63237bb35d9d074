"""The two Spark Structured Streaming jobs of the clickstream pipeline.

1. :func:`start_pageviews` reads click events (JSON) from Kafka, takes the event time from the
   payload, keeps a 2-minute watermark, counts page views and dwell time per page per 1-minute
   tumbling window and appends each closed window as one JSON record to the results topic.
2. :func:`start_archive` copies the results topic into Parquet files (exactly once, through the
   file sink's own log).

Both use ``Trigger.AvailableNow`` with a checkpoint: each run processes what has arrived since
the previous one, like a scheduled incremental job, and the watermark and the open windows
carry over between runs in the checkpoint.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from examples.clickstream.events import WATERMARK_DELAY_MS, WINDOW_MS

CLICK_SCHEMA = "event_id BIGINT, user STRING, page STRING, ts BIGINT, dwell_ms BIGINT"
RESULT_SCHEMA = "window_start BIGINT, window_end BIGINT, page STRING, views BIGINT, dwell_ms BIGINT"


def _kafka_stream(spark: Any, bootstrap: str, topic: str) -> Any:
    return (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
    )


def pageviews(spark: Any, bootstrap: str, clicks_topic: str) -> Any:
    """The windowed aggregate as a streaming DataFrame of Kafka records (key, value)."""
    from pyspark.sql import functions as F

    events = (
        _kafka_stream(spark, bootstrap, clicks_topic)
        .select(F.from_json(F.col("value").cast("string"), CLICK_SCHEMA).alias("e"))
        .select("e.*")
        .withColumn("event_time", F.timestamp_millis(F.col("ts")))
    )
    # No filter for the heartbeat: Spark's optimizer pushes a filter that does not use the
    # event-time column below the watermark, and then the heartbeat could not move it. The
    # heartbeat's own window ends after the watermark it sets, so it is never emitted.
    counts = (
        events.withWatermark("event_time", f"{WATERMARK_DELAY_MS // 1000} seconds")
        .groupBy(F.window("event_time", f"{WINDOW_MS // 1000} seconds"), F.col("page"))
        .agg(F.count(F.lit(1)).alias("views"), F.sum("dwell_ms").alias("dwell_ms"))
    )
    result = F.struct(
        F.unix_millis(F.col("window.start")).alias("window_start"),
        F.unix_millis(F.col("window.end")).alias("window_end"),
        F.col("page"),
        F.col("views"),
        F.col("dwell_ms"),
    )
    return counts.select(F.col("page").alias("key"), F.to_json(result).alias("value"))


def start_pageviews(
    spark: Any, bootstrap: str, clicks_topic: str, results_topic: str, checkpoint: Path
) -> Any:
    return (
        pageviews(spark, bootstrap, clicks_topic)
        .writeStream.format("kafka")
        .outputMode("append")  # a window is written once, when the watermark closes it
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", results_topic)
        .option("checkpointLocation", str(checkpoint))
        .queryName("pageviews")
        .trigger(availableNow=True)
        .start()
    )


def start_archive(
    spark: Any, bootstrap: str, results_topic: str, parquet_dir: Path, checkpoint: Path
) -> Any:
    from pyspark.sql import functions as F

    rows = (
        _kafka_stream(spark, bootstrap, results_topic)
        .select(F.from_json(F.col("value").cast("string"), RESULT_SCHEMA).alias("r"))
        .select("r.*")
    )
    return (
        rows.writeStream.format("parquet")
        .option("path", str(parquet_dir))
        .option("checkpointLocation", str(checkpoint))
        .queryName("archive")
        .trigger(availableNow=True)
        .start()
    )


def read_results_topic(spark: Any, bootstrap: str, results_topic: str) -> list[Any]:
    """Every record of the results topic (batch read), parsed."""
    from pyspark.sql import functions as F

    df = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", results_topic)
        .load()
        .select(F.from_json(F.col("value").cast("string"), RESULT_SCHEMA).alias("r"))
        .select("r.*")
    )
    return list(df.collect())
