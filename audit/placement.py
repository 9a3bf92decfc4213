"""Where a disk is scanned: a disk that names its host gets that host as its task's preferred
location, and a task that still lands elsewhere does not read it.

PySpark's ``parallelize`` takes no location preferences; Scala's ``SparkContext.makeRDD`` does
(``Seq[(T, Seq[String])]``, one partition per item). It is reached through the JVM gateway with
each item pickled to a byte array, and wrapped as a Python RDD of those items: the Python stages
mapped over it are narrow, so the scheduler takes their preferred locations from it.
"""
from __future__ import annotations

import os
import pickle
import socket

# A disk's task waits this long for an executor of its host before Spark gives it any executor,
# where the task does not read the disk but reports it (WRONG_HOST); the driver runs it again on its
# host in a later wave (audit/scan_stage.py). ``--conf`` may set other values.
LOCALITY_CONF = {"spark.locality.wait": "3s", "spark.locality.wait.node": "3s",
                 "spark.locality.wait.process": "0s", "spark.locality.wait.rack": "0s"}
WRONG_HOST = "the disk is on host "


def located_rdd(sc, items: list, hosts: list[str | None]):
    """A Python RDD of ``items``, one per partition, each preferring the host at its index (None:
    anywhere)."""
    # pyspark, the optional extra 'audit': this module is also imported by scan-disk, which runs without it
    from pyspark.core.rdd import RDD
    from pyspark.serializers import CPickleSerializer
    jvm = sc._jvm
    pairs = jvm.java.util.ArrayList()
    for item, host in zip(items, hosts, strict=True):
        prefer = jvm.java.util.ArrayList()
        if host:
            prefer.add(host)
        pairs.add(jvm.scala.Tuple2(bytearray(pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL)),
                                   jvm.PythonUtils.toSeq(prefer)))
    tag = jvm.scala.reflect.ClassTag.apply(jvm.java.lang.Class.forName("[B"))
    jrdd = sc._jsc.sc().makeRDD(jvm.PythonUtils.toSeq(pairs), tag)
    return RDD(jrdd.toJavaRDD(), sc, CPickleSerializer())


def this_host() -> str:
    """This process's host as Spark names its executors: SPARK_LOCAL_HOSTNAME, else SPARK_LOCAL_IP
    (what a worker was started with, inherited by its executors and their Python workers), else the
    machine's host name."""
    return os.environ.get("SPARK_LOCAL_HOSTNAME") or os.environ.get("SPARK_LOCAL_IP") or socket.gethostname()


def host_names() -> set[str]:
    """Every name this host answers to as a disk's host: Spark's, the machine's host names and the
    addresses they resolve to. With SPARK_LOCAL_HOSTNAME or SPARK_LOCAL_IP set (one machine running
    several workers, each on its own address), only those: another worker's address on the same
    machine is another host."""
    given = {v for k in ("SPARK_LOCAL_HOSTNAME", "SPARK_LOCAL_IP") if (v := os.environ.get(k))}
    if given:
        return given
    names = {socket.gethostname(), socket.getfqdn()}
    for n in list(names):
        try:
            names.update(str(a[4][0]) for a in socket.getaddrinfo(n, None))
        except OSError:
            pass
    return names


def wrong_host(wanted: str | None) -> str | None:
    """Why a disk of host ``wanted`` must not be read here, or None when it may."""
    if not wanted or wanted in host_names():
        return None
    return f"{WRONG_HOST}{wanted}, its task ran on {this_host()}: not read from another host"


def live_hosts(sc) -> set[str]:
    """The hosts with a live executor (or the driver), as Spark names them."""
    status = sc._jsc.sc().getExecutorMemoryStatus()
    keys = sc._jvm.scala.jdk.javaapi.CollectionConverters.asJava(status.keySet())
    return {str(k).rsplit(":", 1)[0] for k in keys}
