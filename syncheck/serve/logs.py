"""Structured logs: with ``--log-format json``, one JSON line per request on stderr, and the server's own messages
(uvicorn's included) as JSON lines too.

A request's line::

    {"ts": "2026-11-28T03:30:00.123Z", "level": "INFO", "logger": "syncheck.serve.requests", "message": "request",
     "request_id": "4be1...", "method": "POST", "route": "/v1/chat/completions", "status": 200, "latency_s": 1.84,
     "decoder": "monitor", "tokens": 48, "sentences": 3, "flagged": 1, "error": null, "replica": null}

The request id is the client's ``X-Request-Id`` when it sends one (it comes back in the response's header either
way). Headers are never logged, so neither is an API key. ``--log-format text`` (the default) keeps uvicorn's
warnings only, as before.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from syncheck.serve.observe import RequestRecord

#: the logger of the request lines
REQUEST_LOGGER = "syncheck.serve.requests"
#: a record's fields that are not part of a JSON line's ``extra``
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """A log record as one JSON line: time, level, logger, message, and the fields passed as ``extra``."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname, "logger": record.name, "message": record.getMessage()}
        line.update({k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")})
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def request_fields(record: RequestRecord) -> dict[str, Any]:
    """What a request's line says about it."""
    stats = record.stats
    return {"request_id": record.request_id, "method": record.method, "route": record.route,
            "status": record.status, "latency_s": round(record.latency_s, 4),
            "decoder": stats.method if stats else None, "tokens": stats.tokens if stats else None,
            "sentences": stats.sentences if stats else None, "flagged": stats.flagged if stats else None,
            "error": record.error, "replica": record.replica}


class RequestLog:
    """An observer of :class:`~syncheck.serve.observe.ObservedRequests` that logs one line per request."""

    def __init__(self) -> None:
        self.logger = logging.getLogger(REQUEST_LOGGER)

    def observe(self, record: RequestRecord) -> None:
        self.logger.info("request", extra=request_fields(record))


def json_logging() -> dict[str, Any]:
    """A ``logging.config.dictConfig`` (also uvicorn's ``log_config``) that writes every message of the server,
    uvicorn's and the request lines, as JSON lines on stderr."""
    handler = {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}
    quiet = {"handlers": ["json"], "level": "WARNING", "propagate": False}
    return {
        "version": 1, "disable_existing_loggers": False,
        "formatters": {"json": {"()": JsonFormatter}},
        "handlers": {"json": handler},
        "loggers": {"uvicorn": quiet, "uvicorn.error": quiet, "uvicorn.access": quiet,
                    "syncheck.serve": {"handlers": ["json"], "level": "INFO", "propagate": False}},
    }


def use_json_logging() -> None:
    """Apply :func:`json_logging` in this process (a Ray ingress, which has no uvicorn config of its own)."""
    import logging.config

    logging.config.dictConfig(json_logging())


__all__ = ["REQUEST_LOGGER", "JsonFormatter", "RequestLog", "json_logging", "request_fields", "use_json_logging"]
