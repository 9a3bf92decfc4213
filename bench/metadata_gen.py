"""Synthetic ledger metadata at cluster scale: ``count`` empty, closed ledgers serialized as
BookKeeper's LedgerMetadataSerDe writes them (format 3), each with an ensemble of the given
bookies, written as a metadata folder (one ``<hex id>.bin`` file a ledger) or into the metadata
service's SQLite store (rows as the store's ``create`` writes them, in bulk transactions).

    python -m bench.metadata_gen --count 1000000 --first-id 1000000000 --bookies bk-1,bk-2,bk-3 \\
        (--folder DIR [--processes N] | --sqlite FILE)

The ids start at ``--first-id``, past the cluster's own ledgers. Serialized metadata does not hold
the ledger id, so a few templates (one per ensemble rotation) serve every ledger.
"""
from __future__ import annotations

import argparse
import os
import time


def templates(bookies: list[str], ensemble: int = 3) -> list[bytes]:
    from bkdisk.formats.digests import DigestType
    from bkdisk.formats.ledger_metadata import LedgerMetadata
    from bkdisk.formats.metadata import serialize_metadata
    out = []
    for r in range(len(bookies)):
        members = tuple(bookies[(r + k) % len(bookies)] for k in range(min(ensemble, len(bookies))))
        md = LedgerMetadata(format_version=3, write_quorum=len(members), ensemble_size=len(members),
                            ack_quorum=len(members), length=0, last_entry_id=-1, state="CLOSED",
                            ensembles=((0, members),), digest_type=DigestType.CRC32C.name,
                            password=b"synthetic", ctime=1_700_000_000_000, custom_metadata=(), ctoken=0)
        out.append(serialize_metadata(md))
    return out


def write_folder(folder: str, count: int, first_id: int, bookies: list[str], processes: int = 1) -> None:
    """``count`` files from ``first_id`` on; ``processes`` > 1 writes slices of 100,000 ids in parallel."""
    os.makedirs(folder, exist_ok=True)
    slices = [(folder, lo, min(lo + 100_000, count), first_id, bookies) for lo in range(0, count, 100_000)]
    if processes <= 1:
        for s in slices:
            _write_files(s)
        return
    from multiprocessing import Pool
    with Pool(processes) as pool:
        for _ in pool.imap_unordered(_write_files, slices):
            pass


def _write_files(job: tuple[str, int, int, int, list[str]]) -> None:
    folder, lo, hi, first_id, bookies = job
    t = templates(bookies)
    for i in range(lo, hi):
        lid = first_id + i
        fd = os.open(os.path.join(folder, f"{lid:x}.bin"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, t[i % len(t)])
        finally:
            os.close(fd)


def shaped_variants(bookies: list[str], n: int = 512, seed: int = 7) -> list[bytes]:
    """``n`` serialized metadata shaped as a Pulsar cluster's: 3-bookie ensembles out of ``bookies``,
    Qw/Qa 2 or 3, one in five with an ensemble change (one bookie replaced from an entry on), mixed
    digest types with passwords (an empty one among them), mostly CLOSED with lengths and last
    entries, some OPEN, and the custom metadata a managed ledger writes."""
    import random

    from bkdisk.formats.ledger_metadata import LedgerMetadata
    from bkdisk.formats.metadata import serialize_metadata
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        members = tuple(rnd.sample(bookies, 3))
        ensembles: tuple = ((0, members),)
        last = rnd.randrange(0, 50_000)
        if i % 5 == 0 and last > 1:
            change = rnd.randrange(1, last)
            spare = [b for b in bookies if b not in members]
            swapped = list(members)
            swapped[rnd.randrange(3)] = rnd.choice(spare)
            ensembles = ((0, members), (change, tuple(swapped)))
        closed = i % 10 != 0
        qw = rnd.choice((2, 3))
        dtype = ("CRC32C", "CRC32C", "CRC32", "HMAC", "DUMMY")[i % 5]
        md = LedgerMetadata(format_version=3, write_quorum=qw, ensemble_size=3, ack_quorum=rnd.choice((2, qw)),
                            length=(last + 1) * rnd.randrange(100, 2000) if closed else 0,
                            last_entry_id=last if closed else -1, state="CLOSED" if closed else "OPEN",
                            ensembles=ensembles, digest_type=dtype,
                            password=b"" if i % 7 == 0 else f"pulsar-{i % 13}".encode(),
                            ctime=1_700_000_000_000 + rnd.randrange(10**10),
                            custom_metadata=(("application", b"pulsar"), ("component", b"managed-ledger"),
                                             ("pulsar/managed-ledger",
                                              f"tenant/ns/persistent/topic-{i}".encode())),
                            ctoken=0)
        out.append(serialize_metadata(md))
    return out


def write_shaped_folder(folder: str, count: int, bookies: list[str], seed: int = 7, ids_from: str = "spread") -> None:
    """``count`` files of ``shaped_variants`` as ``<hex id>.bin``, under distinct ledger ids spread over
    the whole range of scope-0 ids (1 .. 2^63 - 1), or (``ids_from="generator"``) consecutive ids from a
    random start, as BookKeeper's ZooKeeper id generator hands them out."""
    import numpy as np
    os.makedirs(folder, exist_ok=True)
    variants = shaped_variants(bookies, seed=seed)
    rng = np.random.default_rng(seed)
    if ids_from == "generator":
        ids = rng.integers(1 << 20, 1 << 40, dtype=np.int64) + np.arange(count, dtype=np.int64)
    else:
        ids = np.unique(rng.integers(1, (1 << 63) - 1, size=count + count // 100 + 10, dtype=np.int64))
    ids = rng.permutation(ids)[:count]
    for i, lid in enumerate(ids.tolist()):
        fd = os.open(os.path.join(folder, f"{lid:x}.bin"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, variants[i % len(variants)])
        finally:
            os.close(fd)


def write_matching_folder(root: str, folder: str, topics: int = 20_000, processes: int = 2,
                          striped: bool = False) -> int:
    """The metadata of every ledger the bookie under ``root`` holds, as ``<hex id>.bin`` in ``folder``:
    closed at its last entry held, its length the sum of its payloads, its digest type the one its
    entries verify as, password PASSWORD, an ensemble of 3 with this bookie in it (Qw 3: every entry
    here), a topic's custom metadata (``topics`` topics, as a Pulsar cluster's managed ledgers). The
    ledgers' facts come from ``bkdisk inventory --parquet`` of the bookie. Returns the ledgers written.

    ``striped``: Qw 2 (each entry on two of the three, so this bookie holds more than it is given), this
    bookie first, second or third by topic, and one ledger in five changing its ensemble halfway (a
    bookie replaced by a fourth where it stood: another in half of them, this one in the rest)."""
    import subprocess
    import sys
    import tempfile

    import pyarrow as pa
    import pyarrow.parquet as pq

    from bkdisk.bookie.layout import bookie_id_of, discover
    me = bookie_id_of(discover(root))
    os.makedirs(folder, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bkdisk-matching-", dir=os.path.dirname(os.path.abspath(folder))) as tmp:
        rows = os.path.join(tmp, "rows.parquet")
        bkdisk = os.path.join(os.path.dirname(sys.executable), "bkdisk")
        subprocess.run([bkdisk, "inventory", root, "--parquet", rows], check=True, stdout=subprocess.DEVNULL)
        t = pq.read_table(rows, columns=["scope", "ledger", "entry", "payload_len", "digest_type"])
        g = t.group_by(["scope", "ledger", "digest_type"]).aggregate([("entry", "max"), ("payload_len", "sum")])
        facts = os.path.join(tmp, "ledgers.parquet")
        pq.write_table(pa.table({"scope": g["scope"], "ledger": g["ledger"], "last": g["entry_max"],
                                 "length": g["payload_len_sum"], "digest_type": g["digest_type"]}), facts)
        n = len(g)
        jobs = [(facts, folder, me, topics, lo, min(n, lo + 100_000), striped) for lo in range(0, n, 100_000)]
        from multiprocessing import Pool
        with Pool(processes) as pool:
            return sum(pool.imap_unordered(_write_matching, jobs))


def _write_matching(job: tuple[str, str, str, int, int, int, bool]) -> int:
    import pyarrow.parquet as pq

    from bench.bulk_bookie import PASSWORD
    from bkdisk.formats.ids import LedgerId
    from bkdisk.formats.ledger_metadata import LedgerMetadata
    from bkdisk.formats.metadata import serialize_metadata
    facts, folder, me, topics, lo, hi, striped = job
    t = pq.read_table(facts).slice(lo, hi - lo).to_pydict()
    others = ("10.0.0.2:3181", "10.0.0.3:3181", "10.0.0.4:3181")
    for scope, ledger, last, length, dtype in zip(t["scope"], t["ledger"], t["last"], t["length"], t["digest_type"]):
        lid = LedgerId(scope, ledger)
        topic = ledger % topics
        members = (me, others[topic % 3], others[(topic + 1) % 3])
        ensembles: tuple = ((0, members),)
        if striped:
            members = members[topic % 3:] + members[:topic % 3]
            ensembles = ((0, members),)
            if ledger % 5 == 0 and last > 1:
                gone = members.index(me) if ledger % 10 else (members.index(me) + 1) % 3
                ensembles = ((0, members), (last // 2, tuple("10.0.0.5:3181" if j == gone else b
                                                              for j, b in enumerate(members))))
        md = LedgerMetadata(format_version=3, write_quorum=2 if striped else 3, ensemble_size=3, ack_quorum=2,
                            length=length, last_entry_id=last, state="CLOSED", ensembles=ensembles, digest_type=dtype,
                            password=PASSWORD, ctime=1_700_000_000_000 + ledger % 10**9, ctoken=0,
                            custom_metadata=(("application", b"pulsar"), ("component", b"managed-ledger"),
                                             ("pulsar/managed-ledger",
                                              f"public/default/persistent/topic-{topic}".encode())))
        stem = lid.qualified_name if scope else f"{ledger:x}"
        with open(os.path.join(folder, stem + ".bin"), "wb") as f:
            f.write(serialize_metadata(md))
    return hi - lo


def write_sqlite(path: str, count: int, first_id: int, bookies: list[str], batch: int = 100_000) -> None:
    from bkdisk.metaservice.sqlite_store import SqliteStore, _k
    SqliteStore(path).close()   # the store's own schema
    import sqlite3
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=OFF")   # a benchmark's data: rebuilt, not recovered
    t = templates(bookies)
    for start in range(0, count, batch):
        db.execute("BEGIN")
        db.executemany("INSERT INTO ledgers VALUES (?,?,0,?)",
                       ((_k(0), _k(first_id + i), t[i % len(t)]) for i in range(start, min(count, start + batch))))
        db.execute("COMMIT")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--first-id", type=int, default=1_000_000_000)
    ap.add_argument("--bookies", required=True, help="comma-separated bookie ids for the ensembles")
    ap.add_argument("--processes", type=int, default=1, help="processes writing a folder's files")
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--folder")
    where.add_argument("--sqlite")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    bookies = a.bookies.split(",")
    if a.folder:
        write_folder(a.folder, a.count, a.first_id, bookies, a.processes)
    else:
        write_sqlite(a.sqlite, a.count, a.first_id, bookies)
    print(f"{a.count} ledgers in {time.perf_counter() - t0:.1f} s -> {a.folder or a.sqlite}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
