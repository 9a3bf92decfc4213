"""The driver JVM's class-data archive (Java's AppCDS): the classes an audit's driver loads (Spark's,
Scala's, Parquet's, thousands) mapped from one file, instead of read from the jars and verified at
every start. `bkdisk warm-up` writes it by running a small audit with ``-XX:ArchiveClassesAtExit``;
an audit uses it when it is there. Its name carries what it was made for (this pyspark, this java):
another install makes another file. The JVM checks it again (its own build, the class path) and
runs without it when it does not fit: a missing, stale or damaged archive costs the start-up it
would have saved, nothing else. The JVM's warnings about it are turned off: they are not the
operator's business."""
from __future__ import annotations

import hashlib
import os
import shutil

ARCHIVE_DIR_ENV = "BKDISK_JVM_ARCHIVE_DIR"
# The JVM says why it did not map an archive on stdout, under these log tags; the audit goes on either way.
QUIET = "-Xlog:cds=off,cds+dynamic=off"


def archive_dir() -> str:
    """``$BKDISK_JVM_ARCHIVE_DIR``, else the user's cache folder."""
    return os.environ.get(ARCHIVE_DIR_ENV) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "bkdisk")


def _java() -> str:
    """The java Spark's launcher runs (JAVA_HOME's, else the one on PATH), its links resolved."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return os.path.realpath(java) if java else ""


def archive_path() -> str:
    """Where the archive of this pyspark and this java is kept."""
    import pyspark  # the optional extra 'audit': only where an audit starts Spark
    java = _java()
    stamp = os.stat(java).st_mtime_ns if java and os.path.exists(java) else 0
    key = f"{pyspark.__version__}\0{os.path.dirname(pyspark.__file__)}\0{java}\0{stamp}"
    return os.path.join(archive_dir(), f"spark-driver-{hashlib.sha256(key.encode()).hexdigest()[:16]}.jsa")


def use_options() -> str:
    """The driver's options that map the archive, none when there is no archive."""
    try:
        path = archive_path()
    except ImportError:
        return ""
    return f"-XX:SharedArchiveFile={path} {QUIET}" if os.path.isfile(path) else ""


def write_archive(run_audit, options: str) -> str:
    """Run ``run_audit(java_options)`` (an audit in this process, its driver JVM started with those
    options) with the JVM writing the classes it loaded at its exit; the archive replaces the last
    one whole (a temporary name, then a rename). Returns its path."""
    from pyspark import SparkContext
    final = archive_path()
    os.makedirs(os.path.dirname(final), exist_ok=True)
    tmp = f"{final}.{os.getpid()}.tmp"
    try:
        run_audit(f"{options} -XX:ArchiveClassesAtExit={tmp} {QUIET}")
        gateway = SparkContext._gateway
        if gateway is not None:   # the JVM writes the archive as it exits: when its stdin closes
            gateway.proc.stdin.close()
            gateway.proc.wait()
            SparkContext._gateway = SparkContext._jvm = None
        os.replace(tmp, final)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return final
