"""Spark's own output kept off the operator's terminal: the driver JVM reads the audit's log4j2
settings (errors only), and the one start-up line the JVM itself prints before any logging is set
up (the incubator module Spark's launcher always adds) is dropped from the JVM's stderr; every other
line the JVM or its Python workers write there still reaches the terminal, until Ctrl-C
(``quiet_interrupts``): the audit is cancelled, and what Spark says about the jobs it stops is not news."""
from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import sys
import threading
import warnings
from collections.abc import Iterator
from subprocess import PIPE

LOG4J2_PROPERTIES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "log4j2.properties")
DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
# Printed by the JVM (java.lang.module bootstrap), not by Spark's logging: nothing can configure it away.
JVM_NOISE = re.compile(r"^WARNING: Using incubator modules: ")


def with_log_settings(settings: dict[str, str]) -> dict[str, str]:
    """``settings`` with the driver JVM pointed at the audit's log4j2 settings, unless the operator's
    own Java options already name a log4j2 configuration."""
    opts = settings.get(DRIVER_JAVA_OPTIONS, "")
    if "log4j2.configurationFile" in opts or "log4j.configurationFile" in opts:
        return settings
    ours = f"-Dlog4j2.configurationFile=file:{LOG4J2_PROPERTIES}"
    return dict(settings, **{DRIVER_JAVA_OPTIONS: f"{opts} {ours}".strip()})


def start_gateway(settings: dict[str, str], master: str | None, app: str) -> None:
    """Start the driver JVM as the session builder would, its stderr passed on line by line without
    JVM_NOISE. Nothing to do under spark-submit (the JVM is already there) or with a JVM running."""
    from pyspark import SparkConf, SparkContext  # the optional extra 'audit', as in audit.job
    from pyspark.java_gateway import launch_gateway
    if "PYSPARK_GATEWAY_PORT" in os.environ or SparkContext._gateway is not None:
        return
    conf = SparkConf(loadDefaults=False).setAll(list(settings.items())).setAppName(app)
    if master is not None:
        conf.setMaster(master)
    gateway = launch_gateway(conf, popen_kwargs={"stderr": PIPE})
    proc = gateway.proc
    threading.Thread(target=_pass_on, args=(proc.stderr,), name="spark-stderr", daemon=True).start()
    with SparkContext._lock:
        if SparkContext._gateway is None:
            SparkContext._gateway, SparkContext._jvm = gateway, gateway.jvm


def _pass_on(stream) -> None:
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", "replace")
        if not JVM_NOISE.match(line) and not _interrupted.is_set():
            sys.stderr.write(line)
            sys.stderr.flush()


_interrupted = threading.Event()   # set by Ctrl-C: the JVM's stderr is no longer passed on


class _NotPy4J(logging.Filter):
    """Drops py4j's records: an interrupted call's tracebacks, logged on the root logger by py4j itself."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.name.startswith("py4j") or f"{os.sep}py4j{os.sep}" in record.pathname)


def _cancel(_signum, _frame) -> None:
    _interrupted.set()
    raise KeyboardInterrupt


def take_interrupts() -> None:
    """Make Ctrl-C raise KeyboardInterrupt at once (again after a SparkContext started: it installs
    PySpark's handler, which calls into the JVM from inside the call the main thread is making: that
    call fails, and py4j prints a traceback of each failure). Stopping the session cancels the jobs."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _cancel)


@contextlib.contextmanager
def quiet_interrupts() -> Iterator[None]:
    """While an audit drives Spark: Ctrl-C raises KeyboardInterrupt without py4j's tracebacks of the
    call it interrupted, and from then on the JVM's stderr (its errors about the tasks and the context
    being stopped) is not passed on, so that the command ends with its one line."""
    quiet = _NotPy4J()
    # A logger's filter sees only the records logged to it, not those its children pass up: py4j logs
    # to its modules' own loggers (py4j.clientserver, py4j.java_gateway), so each gets the filter.
    names = {"py4j", "py4j.java_gateway", "py4j.clientserver", "py4j.protocol",
             *(n for n in logging.root.manager.loggerDict if n.startswith("py4j"))}
    loggers = [logging.getLogger(), *(logging.getLogger(n) for n in sorted(names))]
    before = signal.getsignal(signal.SIGINT) if threading.current_thread() is threading.main_thread() else None
    for lg in loggers:
        lg.addFilter(quiet)
    take_interrupts()
    try:
        yield
    finally:
        for lg in loggers:
            lg.removeFilter(quiet)
        if before is not None:
            signal.signal(signal.SIGINT, before)


def stop(spark) -> None:
    """Stop the session. After Ctrl-C the JVM may not answer the call that stops it (PySpark then warns
    that it could not shut the JVM down cleanly): the JVM ends with this process anyway, its stdin closed."""
    with warnings.catch_warnings():
        if _interrupted.is_set():
            warnings.simplefilter("ignore", RuntimeWarning)
        spark.stop()
