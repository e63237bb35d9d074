"""Clickstream pipeline: producer -> kafkawire -> Spark Structured Streaming -> kafkawire + Parquet.

See README.md in this directory; ``python -m examples.clickstream`` runs it end to end.
"""
