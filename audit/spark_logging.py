"""Spark's own output kept off the operator's terminal: the driver JVM reads the audit's log4j2
settings (errors only), and the one start-up line the JVM itself prints before any logging is set
up (the incubator module Spark's launcher always adds) is dropped from the JVM's stderr; every other
line the JVM or its Python workers write there still reaches the terminal."""
from __future__ import annotations

import os
import re
import sys
import threading
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
        if not JVM_NOISE.match(line):
            sys.stderr.write(line)
            sys.stderr.flush()
