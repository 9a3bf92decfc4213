"""Requests that do not parse, logged as a count rather than a traceback each: gRPC logs one
traceback per message it cannot deserialize, so a caller sending garbage would flood the log (and
block a service whose stderr is a pipe nobody reads)."""
from __future__ import annotations

import logging
import threading
import time

GRPC_LOGGER = "grpc._common"           # where gRPC logs "Exception deserializing message!"
MESSAGE = "Exception deserializing message!"
EVERY_SECONDS = 60.0


class MalformedRequests(logging.Filter):
    """Drops gRPC's per-message traceback; lets through one WARNING line per ``every`` seconds
    saying how many requests did not parse since the last one."""

    def __init__(self, every: float = EVERY_SECONDS):
        super().__init__()
        self.every = every
        self._lock = threading.Lock()
        self._count = 0
        self._last = float("-inf")

    def filter(self, record: logging.LogRecord) -> bool:
        if record.getMessage() != MESSAGE:
            return True
        with self._lock:
            self._count += 1
            now = time.monotonic()
            if now - self._last < self.every:
                return False
            record.msg = "%d requests that do not parse refused (gRPC INTERNAL) since the last such line"
            record.args = (self._count,)
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.exc_info = record.exc_text = None
            self._count, self._last = 0, now
            return True


def install() -> None:
    """Put the filter on gRPC's logger once per process."""
    logger = logging.getLogger(GRPC_LOGGER)
    if not any(isinstance(f, MalformedRequests) for f in logger.filters):
        logger.addFilter(MalformedRequests())
