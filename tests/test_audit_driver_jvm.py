"""The driver JVM an audit starts gets the short-lived-process options (C1 only, serial GC, room for a
long session's compiled code) beside the audit's log settings; an operator's own Java options replace
them, and spark-submit's are left alone."""
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


def test_the_class_archive_warm_up_wrote_is_mapped_and_none_is_asked_for_without_it(tmp_path, monkeypatch):
    from bkdisk.audit import jvm_archive
    monkeypatch.setenv(jvm_archive.ARCHIVE_DIR_ENV, str(tmp_path))
    assert "SharedArchiveFile" not in session_settings("local[2]", {}, None, set())[DRIVER_JAVA_OPTIONS]
    archive = jvm_archive.archive_path()
    with open(archive, "wb") as f:
        f.write(b"archive")
    opts = session_settings("local[2]", {}, None, set())[DRIVER_JAVA_OPTIONS].split()
    assert f"-XX:SharedArchiveFile={archive}" in opts and jvm_archive.QUIET in opts


def test_a_damaged_or_foreign_class_archive_leaves_the_jvm_running_and_silent(tmp_path):
    import os
    import shutil
    import subprocess

    import pyspark

    from bkdisk.audit import jvm_archive
    java = shutil.which("java")
    assert java, "java is needed by the audit (Spark's driver)"
    damaged = tmp_path / "damaged.jsa"
    damaged.write_bytes(bytes(range(256)) * 64)
    # made for another class path than the one it is used with (Scala's classes, from Spark's jars)
    foreign = tmp_path / "foreign.jsa"
    jars = os.path.join(os.path.dirname(pyspark.__file__), "jars", "*")
    subprocess.run([java, "-cp", jars, f"-XX:ArchiveClassesAtExit={foreign}", jvm_archive.QUIET,
                    "scala.util.Properties"], capture_output=True, timeout=120, check=True)
    assert foreign.stat().st_size > 0
    for archive in (damaged, foreign):
        r = subprocess.run([java, "-cp", str(tmp_path), f"-XX:SharedArchiveFile={archive}", jvm_archive.QUIET,
                            "-version"], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and "version" in r.stderr
        assert "warning" not in (r.stdout + r.stderr).lower(), r.stdout + r.stderr


def test_the_driver_jvm_has_room_for_a_long_sessions_compiled_code():
    """A session that planned many queries filled C1's default 48 MB of code cache, and Spark ended
    ("Out of space in CodeCache"): the JVM the audit starts reserves 240 MB."""
    from spark_session import shared_spark
    jvm = shared_spark().sparkContext._jvm
    pools = [p for p in jvm.java.lang.management.ManagementFactory.getMemoryPoolMXBeans() if "Code" in p.getName()]
    assert pools and sum(p.getUsage().getMax() for p in pools) >= 240 << 20
