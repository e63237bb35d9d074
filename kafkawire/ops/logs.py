"""Logging set-up for ``kafkawire serve``: plain text (default) or one JSON object per line.

``--log-format json`` writes ``{"ts": ..., "level": ..., "logger": ..., "message": ...}`` lines
(plus ``"exception"`` when there is a traceback) for log shippers (Loki, Elasticsearch,
CloudWatch) that index fields instead of parsing text.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

LOG_LEVELS = ("CRITICAL", "ERROR", "WARNING", "INFO", "DEBUG")
LOG_FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False)


def log_level(value: str) -> str:
    """argparse type: a level name, any case; anything else is refused with the choices."""
    level = value.strip().upper()
    if level not in LOG_LEVELS:
        import argparse

        raise argparse.ArgumentTypeError(
            f"invalid log level {value!r} (choose from {', '.join(LOG_LEVELS)})")
    return level


def setup_logging(level: str, fmt: str = "text") -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(getattr(logging, level))
