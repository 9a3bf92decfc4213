"""The cluster tables as Spark DataFrame joins: expected placement from metadata against the
replicas the disks reported. Nothing here collects replicas to the driver.

A copy is *intact* when its digest verified or could not be checked (``digest_ok`` true or null),
*corrupt* when its digest failed. Only copies on a write-set bookie count towards ``copies_intact``.
"""
from __future__ import annotations

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from audit.rows import to_signed
from formats.ids import LedgerId
from formats.metadata import LedgerMetadata

KEY = ["ledger_scope", "ledger_id"]
ENTRY = KEY + ["entry_id"]

SEGMENT_SCHEMA = StructType([
    StructField("ledger_scope", LongType(), False), StructField("ledger_id", LongType(), False),
    StructField("state", StringType(), False), StructField("closed_last", LongType(), True),
    StructField("write_quorum", IntegerType(), False), StructField("seg_first", LongType(), False),
    StructField("seg_next", LongType(), True), StructField("members", ArrayType(StringType()), False)])


def segments_frame(spark: SparkSession, md: dict[LedgerId, LedgerMetadata]) -> DataFrame:
    """One row per ensemble of every ledger: its first entry, the next ensemble's first entry."""
    rows = []
    for lid, m in md.items():
        ens = sorted(m.ensembles)
        closed_last = m.effective_last_entry_id if m.is_closed else None
        for i, (first, members) in enumerate(ens):
            nxt = ens[i + 1][0] if i + 1 < len(ens) else None
            rows.append((to_signed(lid.scope), to_signed(lid.ledger), m.state, closed_last, m.write_quorum,
                         first, nxt, list(members)))
    return spark.createDataFrame(rows, SEGMENT_SCHEMA)


def expected_frame(segments: DataFrame, replicas: DataFrame) -> DataFrame:
    """Every (ledger, entry, bookie) metadata places: CLOSED ledgers up to lastEntryId, OPEN and
    IN_RECOVERY ledgers up to the highest entry any audited bookie holds."""
    held = replicas.groupBy(*KEY).agg(F.max("entry_id").alias("held_last"))
    s = segments.join(held, KEY, "left")
    end = F.coalesce(F.col("closed_last"), F.col("held_last"), F.lit(-1))
    last = F.when(F.col("seg_next").isNull(), end).otherwise(F.least(end, F.col("seg_next") - 1))
    s = s.withColumn("seg_last", last).filter(F.col("seg_last") >= F.col("seg_first"))
    e = s.select(*KEY, "write_quorum", "members",
                 F.explode(F.sequence(F.col("seg_first"), F.col("seg_last"))).alias("entry_id"))
    e = e.select(*ENTRY, "write_quorum", "members",
                 F.explode(F.sequence(F.lit(0), F.col("write_quorum") - 1)).alias("w"))
    size = F.size("members").cast("long")
    pos = ((F.col("entry_id") + F.col("w")) % size).cast("int") + 1
    return e.select(*ENTRY, "write_quorum", F.element_at("members", pos).alias("bookie_id"))


def copies_frame(replicas: DataFrame) -> DataFrame:
    """One row per (entry, bookie): whether the bookie holds an intact and/or a corrupt copy."""
    return replicas.groupBy(*ENTRY, "bookie_id").agg(
        F.max(F.coalesce(F.col("digest_ok"), F.lit(True)).cast("int")).cast("boolean").alias("intact"),
        F.max((F.col("digest_ok") == F.lit(False)).cast("int")).cast("boolean").alias("corrupt"))


def _with_intact(expected: DataFrame, copies: DataFrame) -> DataFrame:
    """Expected replicas, ``ok`` true where the bookie holds an intact copy (null where not)."""
    return expected.join(copies.filter("intact").select(*ENTRY, "bookie_id", F.lit(True).alias("ok")),
                         ENTRY + ["bookie_id"], "left")


def entry_status(expected: DataFrame, copies: DataFrame) -> DataFrame:
    """Per expected entry: copies expected and intact write-set copies (counts only: cheap for the
    healthy majority; the bookie lists are built for the short ones alone)."""
    return _with_intact(expected, copies).groupBy(*ENTRY).agg(
        F.first("write_quorum").alias("copies_expected"), F.count("ok").cast("int").alias("copies_intact"))


def under_replicated(status: DataFrame, expected: DataFrame, copies: DataFrame, not_audited: list[str]
                     ) -> DataFrame:
    """Entries with fewer intact write-set copies than the write quorum, as ranges of consecutive
    entries that share one problem (the same bookies missing and holding)."""
    short = status.filter(F.col("copies_intact") < F.col("copies_expected")).select(*ENTRY)
    j = _with_intact(expected.join(short, ENTRY, "left_semi"), copies)
    per = j.groupBy(*ENTRY).agg(
        F.first("write_quorum").alias("copies_expected"),
        F.array_sort(F.collect_list(F.when(F.col("ok").isNull(), F.col("bookie_id")))).alias("bookies_missing"),
        F.array_sort(F.collect_list(F.when(F.col("ok"), F.col("bookie_id")))).alias("bookies_with_copy"))
    problem = KEY + ["copies_expected", "bookies_missing", "bookies_with_copy"]
    w = Window.partitionBy(*problem).orderBy("entry_id")
    per = per.withColumn("grp", F.col("entry_id") - F.row_number().over(w))
    na = F.array(*[F.lit(b) for b in sorted(not_audited)]) if not_audited else F.array().cast("array<string>")
    return per.groupBy(*problem, "grp").agg(F.min("entry_id").alias("first_entry_id"),
                                            F.max("entry_id").alias("last_entry_id")).select(
        *KEY, "first_entry_id", "last_entry_id", "copies_expected",
        F.size("bookies_with_copy").alias("copies_intact"), "bookies_missing", "bookies_with_copy",
        F.array_intersect("bookies_missing", na).alias("bookies_not_audited"))


def replication_histogram(status: DataFrame) -> DataFrame:
    """How many entries have each (copies expected, intact write-set copies) pair, healthy included."""
    return status.groupBy("copies_expected", "copies_intact").agg(F.count(F.lit(1)).alias("entries"))


def corrupt_copies(copies: DataFrame) -> DataFrame:
    """Copies whose digest failed, with the bookies holding an intact copy of the same entry."""
    intact = copies.filter("intact").groupBy(*ENTRY).agg(F.array_sort(F.collect_set("bookie_id")).alias("intact_on"))
    return copies.filter("corrupt").join(intact, ENTRY, "left").select(
        *ENTRY, "bookie_id", F.lit("digest mismatch").alias("reason"),
        F.coalesce(F.col("intact_on"), F.array().cast("array<string>")).alias("intact_on"))


def divergent(replicas: DataFrame) -> DataFrame:
    """Entries whose copies all verify but whose payloads differ: the bookies per payload fingerprint."""
    good = replicas.filter(F.col("digest_ok")).select(*ENTRY, "payload_sha256", "bookie_id")
    per_fp = good.groupBy(*ENTRY, "payload_sha256").agg(F.array_sort(F.collect_set("bookie_id")).alias("bookies"))
    per_entry = per_fp.groupBy(*ENTRY).agg(
        F.array_sort(F.collect_list(F.struct("payload_sha256", "bookies"))).alias("copies"))
    return per_entry.filter(F.size("copies") > 1).select(*ENTRY, F.size("copies").alias("fingerprints"), "copies")


def orphans(replicas: DataFrame, segments: DataFrame) -> DataFrame:
    """Ledgers on a disk that no metadata references: entries and entry-log bytes (with the size
    prefix) per bookie, the bytes compaction would reclaim."""
    known = segments.select(*KEY).distinct()
    return replicas.join(known, KEY, "left_anti").groupBy(*KEY, "bookie_id").agg(
        F.count(F.lit(1)).alias("entries"), F.sum(F.col("size") + 4).alias("bytes"))


def missing_ledgers(expected: DataFrame, replicas: DataFrame, audited: list[str]) -> DataFrame:
    """(ledger, bookie) pairs where metadata places entries on an audited bookie that holds none."""
    want = expected.filter(F.col("bookie_id").isin(audited)).groupBy(*KEY, "bookie_id").agg(
        F.count(F.lit(1)).alias("entries_expected"))
    have = replicas.select(*KEY, "bookie_id").distinct()
    return want.join(have, KEY + ["bookie_id"], "left_anti")


ORDER = {"under_replicated": KEY + ["first_entry_id"], "corrupt_copies": ENTRY + ["bookie_id"],
         "divergent": ENTRY, "orphans": KEY + ["bookie_id"], "missing_ledgers": KEY + ["bookie_id"],
         "replicas": ENTRY + ["bookie_id", "log_id", "offset"], "findings": ["bookie_id", "path", "offset", "code"],
         "disks": ["bookie_id", "path"], "replication_histogram": ["copies_expected", "copies_intact"]}


def fault_tables(spark: SparkSession, md: dict[LedgerId, LedgerMetadata], replicas: DataFrame,
                 audited: list[str], not_audited: list[str]) -> dict[str, DataFrame]:
    """The fault tables and the histogram; the frames several of them read are computed once (persisted;
    ``release`` them after writing)."""
    segments = segments_frame(spark, md)
    expected = expected_frame(segments, replicas).persist(StorageLevel.MEMORY_AND_DISK)
    copies = copies_frame(replicas).persist(StorageLevel.MEMORY_AND_DISK)
    status = entry_status(expected, copies).persist(StorageLevel.MEMORY_AND_DISK)
    return {"under_replicated": under_replicated(status, expected, copies, not_audited),
            "corrupt_copies": corrupt_copies(copies), "divergent": divergent(replicas),
            "orphans": orphans(replicas, segments), "missing_ledgers": missing_ledgers(expected, replicas, audited),
            "replication_histogram": replication_histogram(status)}


def release(spark: SparkSession) -> None:
    """Drop what fault_tables persisted (and everything else this session cached)."""
    spark.catalog.clearCache()
