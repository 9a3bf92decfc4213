"""The driver JVM an audit starts gets the short-lived-process options (C1 only, serial GC) beside
the audit's log settings; an operator's own Java options replace them, and spark-submit's are left
alone."""
from __future__ import annotations

from bkdisk.audit.job import DRIVER_JVM_OPTIONS, session_settings
from bkdisk.audit.spark_logging import DRIVER_JAVA_OPTIONS


def test_the_driver_jvm_runs_c1_only_with_serial_gc_and_the_audits_log_settings():
    opts = session_settings("local[2]", {}, None, set())[DRIVER_JAVA_OPTIONS].split()
    assert "-XX:TieredStopAtLevel=1" in opts and "-XX:+UseSerialGC" in opts
    assert any(o.startswith("-Dlog4j2.configurationFile=file:") for o in opts)


def test_the_operators_java_options_replace_the_defaults_and_keep_the_log_settings():
    opts = session_settings("local[2]", {DRIVER_JAVA_OPTIONS: "-Xss8m"}, None, set())[DRIVER_JAVA_OPTIONS].split()
    assert opts[0] == "-Xss8m" and not set(DRIVER_JVM_OPTIONS.split()) & set(opts)
    assert any(o.startswith("-Dlog4j2.configurationFile=file:") for o in opts)


def test_java_options_given_to_spark_submit_are_left_to_it():
    assert DRIVER_JAVA_OPTIONS not in session_settings(None, {}, None, {DRIVER_JAVA_OPTIONS})
