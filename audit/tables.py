"""The cluster tables as Spark DataFrame joins: expected placement from metadata against the
replicas the disks reported. Nothing here collects replicas to the driver.

A copy is *intact* when its digest verified or could not be checked (``digest_ok`` true or null),
*corrupt* when its digest failed. Only copies on a write-set bookie count towards ``copies_intact``.

The work grows with the problems, not with the healthy entries: a replica row is only ever
aggregated or joined with the per-ensemble frame (Spark broadcasts it when it is small, and joins it
by sorting otherwise: metadata of millions of ledgers is never copied whole to every executor), and
expected entries are listed one by one only for the (ensemble, bookie) pairs whose intact count is
short of what metadata places there. Per ensemble, a bookie at position ``p`` of ``E`` holds the
entries ``e`` with ``(e + w) % E == p`` for some ``w < Qw``: for each ``w`` one arithmetic
progression of step ``E``, so the counts are closed forms.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from bkdisk.audit.scrub_hashes import SHORT_HEX
from bkdisk.formats.entrylog import SIZE_PREFIX_SIZE

T = TypeVar("T")
KEY = ["ledger_scope", "ledger_id"]
ENTRY = KEY + ["entry_id"]
SEG = KEY + ["seg_first"]

def placed_segments(segments: DataFrame, replicas: DataFrame) -> DataFrame:
    """Ensembles with their last expected entry (``seg_last``) and size ``E``: CLOSED ledgers up to
    lastEntryId, OPEN and IN_RECOVERY ledgers up to the highest entry any audited bookie holds."""
    held = replicas.groupBy(*KEY).agg(F.max("entry_id").alias("held_last"))
    s = segments.join(held, KEY, "left")
    end = F.coalesce(F.col("closed_last"), F.col("held_last"), F.lit(-1))
    last = F.when(F.col("seg_next").isNull(), end).otherwise(F.least(end, F.col("seg_next") - 1))
    return s.select(*SEG, "write_quorum", "members", last.alias("seg_last"),
                    F.size("members").cast("long").alias("E")).filter(F.col("seg_last") >= F.col("seg_first"))


def _first_at_or_after(start: Column, residue: Column, E: Column) -> Column:
    """The least entry id >= ``start`` congruent to ``residue`` modulo ``E``."""
    return start + F.pmod(residue - start, E)


def bookie_shares(placed: DataFrame) -> DataFrame:
    """Per (ensemble, member): how many entries metadata places on the member (``n_want``)."""
    m = placed.select(*SEG, "write_quorum", "members", "seg_last", "E",
                      F.posexplode("members").alias("pos", "bookie_id"))
    w = m.select("*", F.explode(F.sequence(F.lit(0), F.col("write_quorum") - 1)).alias("w"))
    w = w.withColumn("first", _first_at_or_after(F.col("seg_first"), F.col("pos") - F.col("w"), F.col("E")))
    n = F.when(F.col("first") > F.col("seg_last"), F.lit(0)).otherwise(F.expr("(seg_last - first) div E") + 1)
    return w.groupBy(*SEG, "bookie_id").agg(F.sum(n.cast("long")).alias("n_want"))


def copies_frame(replicas: DataFrame) -> DataFrame:
    """One row per (entry, bookie): whether the bookie holds an intact copy (one its index holds:
    the bookie serves it), a corrupt one, and one that is sound but not indexed (in its entry logs,
    not served until its index is rebuilt). ``indexed`` null (the index was not read) counts as held."""
    sound = F.coalesce(F.col("digest_ok"), F.lit(True))
    served = F.coalesce(F.col("indexed"), F.lit(True))
    return replicas.groupBy(*ENTRY, "bookie_id").agg(
        F.max((sound & served).cast("int")).cast("boolean").alias("intact"),
        F.max((F.col("digest_ok") == F.lit(False)).cast("int")).cast("boolean").alias("corrupt"),
        F.max((sound & ~served).cast("int")).cast("boolean").alias("not_indexed"))


def write_set_copies(copies: DataFrame, placed: DataFrame) -> DataFrame:
    """Intact copies held by a bookie of the entry's write set, tagged with their ensemble."""
    s = placed.select(*KEY, "seg_first", "seg_last", "write_quorum", "members", "E")
    j = copies.filter("intact").join(s, KEY).filter(
        (F.col("entry_id") >= F.col("seg_first")) & (F.col("entry_id") <= F.col("seg_last")))
    pos = (F.array_position("members", F.col("bookie_id")) - 1).cast("long")
    return j.filter((pos >= 0) & (F.pmod(pos - F.col("entry_id"), F.col("E")) < F.col("write_quorum"))).select(
        *ENTRY, "seg_first", "bookie_id")


def short_entries(placed: DataFrame, shares: DataFrame, ws_copies: DataFrame) -> DataFrame:
    """Every (entry, write-set bookie) without an intact copy: listed only inside the (ensemble,
    bookie) pairs whose intact count is short of ``n_want``."""
    have = ws_copies.groupBy(*SEG, "bookie_id").agg(F.count(F.lit(1)).alias("n_have"))
    short = shares.join(have, SEG + ["bookie_id"], "left").filter(
        F.coalesce(F.col("n_have"), F.lit(0)) < F.col("n_want")).select(*SEG, "bookie_id")
    s = placed.join(short, SEG).select(*SEG, "bookie_id", "seg_last", "E", "write_quorum",
                                       (F.array_position("members", F.col("bookie_id")) - 1).cast("long").alias("pos"))
    s = s.select("*", F.explode(F.sequence(F.lit(0), F.col("write_quorum") - 1)).alias("w"))
    first = _first_at_or_after(F.col("seg_first"), F.col("pos") - F.col("w"), F.col("E"))
    s = s.filter(first <= F.col("seg_last")).select(
        *KEY, "seg_first", "bookie_id", F.explode(F.sequence(first, F.col("seg_last"), F.col("E"))).alias("entry_id"))
    held = ws_copies.join(F.broadcast(short), SEG + ["bookie_id"], "left_semi")
    return s.join(held, ENTRY + ["bookie_id"], "left_anti")


def entry_problems(missing: DataFrame, placed: DataFrame, copies: DataFrame) -> DataFrame:
    """Per entry that lost a write-set copy: copies expected, the bookies missing and holding, and
    those of the missing whose copy is in their entry logs, not indexed."""
    gaps = copies.filter("not_indexed").select(*ENTRY, "bookie_id", F.lit(True).alias("gap"))
    per = missing.join(gaps, ENTRY + ["bookie_id"], "left").groupBy(*ENTRY, "seg_first").agg(
        F.array_sort(F.collect_list("bookie_id")).alias("bookies_missing"),
        F.array_sort(F.collect_list(F.when(F.col("gap"), F.col("bookie_id")))).alias("bookies_not_indexed"))
    p = per.join(placed.select(*SEG, "write_quorum", "members", "E"), SEG)
    ws = F.transform(F.sequence(F.lit(0), F.col("write_quorum") - 1),
                     lambda w: F.element_at("members", (F.pmod(F.col("entry_id") + w, F.col("E")) + 1).cast("int")))
    return p.select(*ENTRY, F.col("write_quorum").alias("copies_expected"), "bookies_missing",
                    F.array_sort(F.array_except(ws, F.col("bookies_missing"))).alias("bookies_with_copy"),
                    "bookies_not_indexed")


def under_replicated(problems: DataFrame, not_audited: list[str]) -> DataFrame:
    """Entries with fewer intact write-set copies than the write quorum, as ranges of consecutive
    entries that share one problem (the same bookies missing and holding)."""
    problem = KEY + ["copies_expected", "bookies_missing", "bookies_with_copy", "bookies_not_indexed"]
    w = Window.partitionBy(*problem).orderBy("entry_id")
    per = problems.withColumn("grp", F.col("entry_id") - F.row_number().over(w))
    na = F.array(*[F.lit(b) for b in sorted(not_audited)]) if not_audited else F.array().cast("array<string>")
    return per.groupBy(*problem, "grp").agg(F.min("entry_id").alias("first_entry_id"),
                                            F.max("entry_id").alias("last_entry_id")).select(
        *KEY, "first_entry_id", "last_entry_id", "copies_expected",
        F.size("bookies_with_copy").alias("copies_intact"), "bookies_missing", "bookies_with_copy",
        F.array_intersect("bookies_missing", na).alias("bookies_not_audited"), "bookies_not_indexed")


def replication_histogram(placed: DataFrame, problems: DataFrame) -> DataFrame:
    """How many entries have each (copies expected, intact write-set copies, copies in the entry logs
    but not indexed) triple, healthy included: the entries that lost copies counted as such, every
    other expected entry as fully replicated."""
    short = problems.groupBy("copies_expected", F.size("bookies_with_copy").alias("copies_intact"),
                             F.size("bookies_not_indexed").alias("copies_not_indexed")).agg(
        F.count(F.lit(1)).alias("entries"))
    total = placed.groupBy(F.col("write_quorum").alias("copies_expected")).agg(
        F.sum(F.col("seg_last") - F.col("seg_first") + 1).alias("total"))
    lost = short.groupBy("copies_expected").agg(F.sum("entries").alias("lost"))
    healthy = total.join(lost, "copies_expected", "left").select(
        "copies_expected", F.col("copies_expected").alias("copies_intact"), F.lit(0).alias("copies_not_indexed"),
        (F.col("total") - F.coalesce(F.col("lost"), F.lit(0))).alias("entries")).filter(F.col("entries") > 0)
    return short.unionByName(healthy)


def corrupt_copies(copies: DataFrame) -> DataFrame:
    """Copies whose digest failed, with the bookies holding an intact copy of the same entry."""
    bad = copies.filter("corrupt")
    intact = copies.filter("intact").join(F.broadcast(bad.select(*ENTRY).distinct()), ENTRY, "left_semi") \
        .groupBy(*ENTRY).agg(F.array_sort(F.collect_set("bookie_id")).alias("intact_on"))
    return bad.join(intact, ENTRY, "left").select(
        *ENTRY, "bookie_id", F.lit("digest mismatch").alias("reason"),
        F.coalesce(F.col("intact_on"), F.array().cast("array<string>")).alias("intact_on"))


def divergent(replicas: DataFrame) -> DataFrame:
    """Entries whose copies do not fail their digests but whose payloads differ: the bookies per payload
    fingerprint. Copies that could not be verified (a DUMMY entry carries no digest) take part: this
    is the check that finds their damage. Entries are found by a 64-bit hash of the fingerprint (one
    narrow aggregation over every copy); the fingerprints themselves are grouped for those entries only."""
    # (a copy in a log walked light this run, --state, never deep-checked has no payload hash nor
    # digest type: no part; a frame of copies without a digest type column has none walked light)
    read = F.col("payload_sha256").isNotNull()
    if "digest_type" in replicas.columns:
        read = read | F.col("digest_type").isNotNull()
    # Copies are compared by their hashes' first SHORT_HEX digits: a copy in a log walked light has
    # only those, its last deep check's (audit/scrub_hashes.py); a fingerprint is a group's full hash
    # when a copy of it was read now (the longer text sorts after its prefix).
    good = replicas.filter(F.coalesce(F.col("digest_ok"), F.lit(True)) & read).select(
        *ENTRY, "payload_sha256", F.substring("payload_sha256", 1, SHORT_HEX).alias("short"), "bookie_id")
    fp = F.xxhash64("short")
    differ = good.groupBy(*ENTRY).agg(F.min(fp).alias("lo"), F.max(fp).alias("hi")).filter(
        F.col("lo") != F.col("hi")).select(*ENTRY)
    mine = good.join(F.broadcast(differ), ENTRY, "left_semi")
    per_fp = mine.groupBy(*ENTRY, "short").agg(F.max("payload_sha256").alias("payload_sha256"),
                                                F.array_sort(F.collect_set("bookie_id")).alias("bookies"))
    per_entry = per_fp.groupBy(*ENTRY).agg(
        F.array_sort(F.collect_list(F.struct("payload_sha256", "bookies"))).alias("copies"))
    return per_entry.filter(F.size("copies") > 1).select(*ENTRY, F.size("copies").alias("fingerprints"), "copies")


def orphans(replicas: DataFrame, segments: DataFrame, known: DataFrame | None = None) -> DataFrame:
    """Ledgers on a disk that no metadata references: entries and entry-log bytes (with the size
    prefix) per bookie, the bytes compaction would reclaim. ``known``: the keys of ledgers metadata
    knows beside those of ``segments``."""
    held = replicas.select(*KEY).distinct()
    keys = segments.select(*KEY) if known is None else segments.select(*KEY).unionByName(known.select(*KEY))
    # The ledgers metadata knows, of those held: the disks' ledgers, not every ledger, are matched.
    held_known = keys.join(held, KEY, "left_semi").distinct()
    return replicas.join(held_known, KEY, "left_anti").groupBy(*KEY, "bookie_id").agg(
        F.count(F.lit(1)).alias("entries"), F.sum(F.col("size") + SIZE_PREFIX_SIZE).alias("bytes"))


def missing_ledgers(shares: DataFrame, replicas: DataFrame, audited: list[str]) -> DataFrame:
    """(ledger, bookie) pairs where metadata places entries on an audited bookie that holds none."""
    want = shares.filter(F.col("bookie_id").isin(audited) & (F.col("n_want") > 0)).groupBy(*KEY, "bookie_id").agg(
        F.sum("n_want").alias("entries_expected"))
    have = replicas.select(*KEY, "bookie_id").distinct()
    return want.join(have, KEY + ["bookie_id"], "left_anti")


ORDER = {"under_replicated": KEY + ["first_entry_id"], "corrupt_copies": ENTRY + ["bookie_id"],
         "divergent": ENTRY, "orphans": KEY + ["bookie_id"], "missing_ledgers": KEY + ["bookie_id"],
         "replicas": ENTRY + ["bookie_id", "log_id", "offset"], "findings": ["bookie_id", "path", "offset", "code"],
         "disks": ["bookie_id", "path"],
         "replication_histogram": ["copies_expected", "copies_intact", "copies_not_indexed"],
         "space": ["bookie_id", "kind", "ledger_dir", "log_id", "ledger", "topic"]}


def fault_tables(segments: DataFrame, replicas: DataFrame, audited: list[str], not_audited: list[str],
                 known: DataFrame | None = None) -> dict[str, Callable[[], DataFrame]]:
    """The fault tables and the histogram from the segments frame (a row per ensemble that may hold
    entries, audit.metadata_tables.SEGMENT_ARROW), the keys of the other ledgers metadata knows
    (``known``) and the audited replicas, each as a function building its frame: every DataFrame step
    is a call into the JVM, so threads building (and writing) tables at once overlap those calls. The
    frames several tables read are built once, by the first that needs them, and computed once
    (persisted; ``release`` them after writing)."""
    keep = StorageLevel.MEMORY_AND_DISK

    def build_shared() -> dict[str, DataFrame]:
        placed = placed_segments(segments, replicas).persist(keep)
        shares = bookie_shares(placed).persist(keep)
        copies = copies_frame(replicas).persist(keep)
        problems = entry_problems(short_entries(placed, shares, write_set_copies(copies, placed)), placed,
                                  copies).persist(keep)
        return {"placed": placed, "shares": shares, "copies": copies, "problems": problems}
    shared = _once(build_shared)
    return {"under_replicated": lambda: under_replicated(shared()["problems"], not_audited),
            "divergent": lambda: divergent(replicas),
            "orphans": lambda: orphans(replicas, segments, known),
            "corrupt_copies": lambda: corrupt_copies(shared()["copies"]),
            "missing_ledgers": lambda: missing_ledgers(shared()["shares"], replicas, audited),
            "replication_histogram": lambda: replication_histogram(shared()["placed"], shared()["problems"])}


def _once(build: Callable[[], T]) -> Callable[[], T]:
    """``build``'s result, built by the first caller (the others wait for it)."""
    lock = threading.Lock()
    done: list[T] = []

    def get() -> T:
        with lock:
            if not done:
                done.append(build())
            return done[0]
    return get


def release(spark: SparkSession) -> None:
    """Drop what fault_tables persisted (and everything else this session cached)."""
    spark.catalog.clearCache()
