"""Scanner throughput against a raw memory baseline, on a bookie written by bookie.writer.write_bookie.

    python -m bench.scan_bench [--dir ./bench-out] [--size-gib 2] [--ledgers 12000] [--window-mib 64]

The bookie (entry logs of about ``--size-gib`` GiB, payloads of 1-64 KiB taken from numpy random
bytes, ``--ledgers`` ledgers alternating CRC32C and CRC32, or all CRC32C with ``--digest crc32c``) is built
in a child process, so that its memory does not count in the peak RSS measured here, and reused when
``--dir`` already holds one built with the same parameters. A synthetic index hierarchy of
``--idx-files`` ``.idx`` files (5/6 two-level, 1/6 four-level) is built beside it for the hierarchy walk.

Every file is read once first, so every figure is from the page cache. The baseline is a numpy
XOR reduction over uint64 views of the same bytes, mapped through the same windows as the scans.
Times are the best of ``--repeat`` runs. Peak RSS is the process high-water mark (VmHWM, reset
before each phase where Linux allows it; ``ru_maxrss`` for the whole run).
"""
from __future__ import annotations

import argparse
import functools
import glob
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

GIB = 1 << 30
MIB = 1 << 20
DEFAULT_ENTRY_BYTES = "1024:65536"
# Ledgers are written in chunks of about this many entry-log bytes, each chunk's entries dropped once
# written (bookie.writer keeps every entry of what it writes): a bookie of any size builds in bounded memory.
CHUNK_BYTES = GIB // 2
BK_SCAN_GBPS = 0.40         # DefaultEntryLogger.scanEntryLog, framing (BookKeeper's own figure, this machine kind)
BK_SCAN_DIGEST_GBPS = 0.28  # ... with digest verification
TARGETS = {"framing": 0.60, "crc32c": 0.40, "crc32": 0.20}
IDX_TARGET_FILES_S = 50_000
RSS_BUDGET_MIB = 300


# --- building ------------------------------------------------------------------------------
def _params(a) -> dict:
    p = {"size_gib": a.size_gib, "ledgers": a.ledgers, "seed": a.seed, "idx_files": a.idx_files, "version": 4}
    if getattr(a, "digest", "mixed") != "mixed":
        p["digest"] = a.digest
    if getattr(a, "entry_bytes", DEFAULT_ENTRY_BYTES) != DEFAULT_ENTRY_BYTES:
        p["entry_bytes"] = a.entry_bytes
    if getattr(a, "bulk", False):
        p["bulk"] = True
        p["layout"] = getattr(a, "layout", "interleaved")
        if getattr(a, "storage", "index-files") != "index-files":
            p["storage"] = a.storage
        if getattr(a, "journal_keys_only", False):
            p["journal_keys_only"] = True
    return p


def entry_sizes(text: str) -> tuple[int, int]:
    """``MIN:MAX`` payload bytes (``--entry-bytes``)."""
    lo, _, hi = text.partition(":")
    lo_i, hi_i = int(lo), int(hi or lo)
    if not 1 <= lo_i <= hi_i:
        raise argparse.ArgumentTypeError(f"expected MIN:MAX payload bytes with 1 <= MIN <= MAX, found {text!r}")
    return lo_i, hi_i


def _stamp(d: str) -> str:
    return os.path.join(d, "bench-params.json")


def build(a) -> None:
    """Write the bookie and the index hierarchy under ``a.dir`` (run in a child process)."""
    from bench import bulk_bookie
    from bkdisk.bookie.model import BookieSpec, LedgerSpec
    from bkdisk.bookie.writer import write_bookie
    from bkdisk.formats.digests import DigestType

    lo, hi = entry_sizes(getattr(a, "entry_bytes", DEFAULT_ENTRY_BYTES))
    if getattr(a, "bulk", False):
        t = time.perf_counter()
        counts = bulk_bookie.build(os.path.join(a.dir, "bookie"), a.size_gib, a.ledgers, lo, hi, a.seed,
                                   a.layout, storage=getattr(a, "storage", "index-files"),
                                   journal_entries=not getattr(a, "journal_keys_only", False))
        kind = f"{a.layout}, {getattr(a, 'storage', 'index-files')}"
        print(f"built bookie in bulk ({kind}): {counts['entries']} entries, {a.ledgers} ledgers, "
              f"{counts['bytes'] / GIB:.2f} GiB "
              f"of entries in {counts['logs']} entry logs, {counts['journals']} journals "
              f"({time.perf_counter() - t:.0f} s)", flush=True)
        _finish(a, counts["entries"])
        return
    rng = np.random.default_rng(a.seed)
    pool = rng.integers(0, 256, 64 * MIB, dtype=np.uint8).tobytes()
    view = memoryview(pool)
    target = int(a.size_gib * GIB)
    per_ledger = max(1, target // a.ledgers)
    per_chunk = max(1, CHUNK_BYTES // per_ledger)
    spec_args = dict(bookie_id="bench-bookie:3181", interleave=False, entry_log_size_limit=512 * MIB,
                     journal_max_size=2 * GIB, journal_prealloc_size=16 * MIB, journal_group_bytes=64 * MIB)
    t = time.perf_counter()
    entries = log_bytes = logs = 0
    journals: list[str] = []
    next_log, next_journal = 0, BookieSpec([]).first_journal_id
    for first in range(0, a.ledgers, per_chunk):
        ledgers = []
        for i in range(first, min(first + per_chunk, a.ledgers)):
            sizes = _payload_sizes(rng, lo, hi, per_ledger)
            starts = rng.integers(0, len(pool) - hi, len(sizes)).tolist()
            pays = [view[at:at + n] for at, n in zip(starts, sizes.tolist())]
            crc32c = a.digest == "crc32c" or i % 2 == 0
            ledgers.append(LedgerSpec(i + 1, pays, digest_type=DigestType.CRC32C if crc32c else DigestType.CRC32,
                                      password=b"bench"))
        spec = BookieSpec(ledgers, first_log_id=next_log, first_journal_id=next_journal, **spec_args)
        wb = write_bookie(spec, os.path.join(a.dir, "bookie"))
        entries += len(wb.entries)
        log_bytes += wb.bytes_written
        logs += len(wb.entry_log_files)
        journals += wb.journal_files
        next_log = next_log + len(wb.entry_log_files)   # the preallocated next log is the next chunk's first
        next_journal = max(int(os.path.basename(j)[:-4], 16) for j in wb.journal_files) + 1 if wb.journal_files \
            else next_journal
        del wb, ledgers, spec
    print(f"built bookie: {entries} entries, {a.ledgers} ledgers, {log_bytes / GIB:.2f} GiB of "
          f"entries in {logs} entry logs, {len(journals)} journals "
          f"({time.perf_counter() - t:.0f} s)", flush=True)
    _finish(a, entries)


def built_entries(d: str) -> int | None:
    """The entries the bookie in ``d`` was built with (None: built before this was recorded)."""
    try:
        with open(os.path.join(d, "bench-built.json")) as f:
            return int(json.load(f)["entries"])
    except (OSError, ValueError, KeyError):
        return None


def _finish(a, entries: int) -> None:
    """The synthetic index hierarchy beside the bookie, and the stamp that lets a later run reuse both."""
    from bkdisk.formats.ids import LedgerId
    from bkdisk.formats.index import IndexHeader
    from bkdisk.formats.paths import index_relpath
    from bkdisk.indexfiles.writer import index_bytes
    tree = os.path.join(a.dir, "idx-tree")
    hdr = IndexHeader(1, bytes(20), 0, None)
    made = set()
    n2 = a.idx_files * 5 // 6
    for i in range(a.idx_files):
        lid = LedgerId(0, 100_000 + i) if i < n2 else LedgerId(1 + i % 3, 5000 + i)
        p = os.path.join(tree, "current", index_relpath(lid))
        dd = os.path.dirname(p)
        if dd not in made:
            os.makedirs(dd, exist_ok=True)
            made.add(dd)
        locs = (np.arange(1, 2 + i % 40, dtype=np.uint64) << np.uint64(32)) | np.uint64(1028)
        with open(p, "wb") as f:
            f.write(index_bytes(hdr, locs, 1024))
    with open(os.path.join(a.dir, "bench-built.json"), "w") as f:
        json.dump({"entries": entries}, f)
    with open(_stamp(a.dir), "w") as f:
        json.dump(_params(a), f)


def _payload_sizes(rng, lo: int, hi: int, budget: int) -> np.ndarray:
    """Payload sizes uniform in [lo, hi] adding up to about ``budget`` entry-log bytes (at least one);
    the last is cut to what the budget has left, so the total stays near --size-gib."""
    per = 44   # entry header (V1, CRC32C) and size prefix around each payload
    n = max(1, int(budget // ((lo + hi) / 2 + per)) + 1)
    sizes = rng.integers(lo, hi + 1, n)
    ends = np.cumsum(sizes + per)
    k = max(1, int(np.searchsorted(ends, budget)) + 1)
    sizes = sizes[:k].copy()
    sizes[-1] = max(lo, min(int(sizes[-1]), budget - (int(ends[k - 2]) if k > 1 else 0) - per))
    return sizes


def ensure_built(a) -> None:
    try:
        with open(_stamp(a.dir)) as f:
            if json.load(f) == _params(a):
                print(f"reusing the bookie in {a.dir}", flush=True)
                return
    except (OSError, ValueError):
        pass
    if os.path.exists(a.dir) and os.listdir(a.dir):
        if not os.path.exists(_stamp(a.dir)):
            # Never delete a folder the bench did not build.
            raise SystemExit(f"{a.dir} is not empty and holds no bench bookie; choose another --dir")
        import shutil
        print(f"rebuilding {a.dir} (parameters changed)", flush=True)
        shutil.rmtree(a.dir)
    os.makedirs(a.dir, exist_ok=True)
    cmd = [sys.executable, "-m", "bench.scan_bench", "--build-only", "--dir", a.dir, "--size-gib", str(a.size_gib),
           "--ledgers", str(a.ledgers), "--seed", str(a.seed), "--idx-files", str(a.idx_files), "--digest", a.digest,
           "--entry-bytes", getattr(a, "entry_bytes", DEFAULT_ENTRY_BYTES)]
    if getattr(a, "bulk", False):
        cmd += ["--bulk", "--layout", a.layout, "--storage", getattr(a, "storage", "index-files")]
        cmd += ["--journal-keys-only"] if getattr(a, "journal_keys_only", False) else []
    elif getattr(a, "storage", "index-files") != "index-files":
        raise SystemExit("--storage rocksdb builds with --bulk only")
    subprocess.run(cmd, check=True)


# --- measuring -----------------------------------------------------------------------------
def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _peak_mib() -> float:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _best(fn, repeat: int):
    best, out = float("inf"), None
    for _ in range(repeat):
        out = None  # drop the previous run's result before the next run, so peaks are one run's
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def _warm(paths: list[str], refill: bool = True) -> None:
    """Bring the files into the page cache. ``refill``: first write back and drop their cached pages,
    so that every run finds them cached the same way, as a read fills the cache (readahead's large
    folios: mapping them costs far fewer page faults than pages cached as the writer wrote them, so
    every run, the raw read included, maps pages cached the way a read caches them)."""
    buf = bytearray(8 * MIB)
    for p in paths:
        with open(p, "rb", buffering=0) as f:
            if refill:
                os.fsync(f.fileno())
                os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
            while f.readinto(buf):
                pass


def baseline(logs: list[str], window: int) -> int:
    from bkdisk.diskio.mapped import map_window
    acc = 0
    for p in logs:
        size = os.path.getsize(p)
        for off in range(0, size, window):
            with map_window(p, off, window) as w:
                n = len(w) // 8 * 8
                acc ^= int(np.bitwise_xor.reduce(w[:n].view(np.uint64)))
                del w
    return acc


def mapped_speed(logs: list[str], window: int) -> float:
    """GB/s of the same reduction over windows already mapped and faulted in: memory speed, no mmap cost."""
    from bkdisk.diskio.mapped import map_window
    best = 0.0
    size = min(window, os.path.getsize(logs[0]))
    with map_window(logs[0], 0, size) as w:
        u = w[:len(w) // 8 * 8].view(np.uint64)
        np.bitwise_xor.reduce(u)
        for _ in range(3):
            t = time.perf_counter()
            np.bitwise_xor.reduce(u)
            best = max(best, u.nbytes / (time.perf_counter() - t) / 1e9)
        del u, w
    return best


def run(a) -> int:
    from bench.crc_compare import crc_options, library_digest_scan
    from bkdisk.digests.plan import DigestPlan
    from bkdisk.diskio import config
    from bkdisk.entrylogs.scan import scan_entry_log
    from bkdisk.formats.digests import DigestType
    from bkdisk.indexfiles.scan import walk_index_dirs
    from bkdisk.journal.scan import scan_journal

    root = os.path.join(a.dir, "bookie")
    logs = sorted(glob.glob(os.path.join(root, "ledgers", "current", "*.log")))
    logs = [p for p in logs if os.path.getsize(p) > 0]
    journals = sorted(glob.glob(os.path.join(root, "journal", "current", "*.txn")))
    log_bytes = sum(os.path.getsize(p) for p in logs)
    jr_bytes = sum(os.path.getsize(p) for p in journals)
    window = a.window_mib * MIB
    print(f"entry logs: {len(logs)} files, {log_bytes / GIB:.2f} GiB; journals: {len(journals)} files, "
          f"{jr_bytes / GIB:.2f} GiB; window {a.window_mib} MiB; CRC variant "
          f"{config.CRC_VARIANT_NAMES[config.crc_variant()]}", flush=True)
    _warm(logs + journals)
    # compile (or load from the cache) before timing
    scan_entry_log(logs[0], window=window, digests=DigestPlan(force=DigestType.CRC32C))
    scan_journal(journals[0], window=window)

    results: dict[str, tuple[float, str, float]] = {}   # name -> (GB/s, extra, peak MiB)
    arrays_mib = 0.0

    def phase(name: str, fn, nbytes: int, extra=lambda out: ""):
        _reset_peak()
        t, out = _best(fn, a.repeat)
        gbps = nbytes / t / 1e9
        results[name] = (gbps, extra(out) if out is not None else "", _peak_mib())
        return out

    phase("raw baseline (numpy xor over uint64 views)", lambda: baseline(logs, window), log_bytes)
    base = results["raw baseline (numpy xor over uint64 views)"][0]
    memory = mapped_speed(logs, window)

    def scan_all(**kw):
        return [scan_entry_log(p, window=window, **kw) for p in logs]

    framing = phase("entry-log scan, framing only", lambda: scan_all(), log_bytes,
                    lambda s: f"{sum(len(x.entries) for x in s)} entries, {sum(len(x.problems) for x in s)} problems")
    nentries = sum(len(s.entries) for s in framing)
    arrays_mib = sum(s.entries.nbytes + s.problems.nbytes for s in framing) / MIB
    del framing

    def digest_extra(scans) -> str:
        st = np.concatenate([s.digests["status"] for s in scans])
        return f"ok {int((st == 1).sum())}, bad {int((st == 2).sum())}, unknown {int((st == 0).sum())}"

    phase("entry-log scan + CRC32C (forced on every entry)",
          lambda: scan_all(digests=DigestPlan(force=DigestType.CRC32C)), log_bytes, digest_extra)
    phase("entry-log scan + CRC32 (forced on every entry)",
          lambda: scan_all(digests=DigestPlan(force=DigestType.CRC32)), log_bytes, digest_extra)
    known = {}
    for i in range(a.ledgers):
        known[(0, i + 1)] = DigestType.CRC32C if a.digest == "crc32c" or i % 2 == 0 else DigestType.CRC32
    phase("entry-log scan + digests from metadata (half CRC32C, half CRC32)",
          lambda: scan_all(digests=DigestPlan(known=dict(known))), log_bytes, digest_extra)
    phase("entry-log scan + digests sniffed per ledger", lambda: scan_all(digests=DigestPlan()), log_bytes,
          digest_extra)
    lib_c = phase("entry-log scan + CRC32C by the crc32c package, one call per entry (Python loop)",
                  lambda: library_digest_scan(logs, window, DigestType.CRC32C), log_bytes,
                  lambda r: f"ok {r[0]}, bad {r[1]}")
    lib_z = phase("entry-log scan + CRC32 by zlib.crc32, one call per entry (Python loop)",
                  lambda: library_digest_scan(logs, window, DigestType.CRC32), log_bytes,
                  lambda r: f"ok {r[0]}, bad {r[1]}")
    del lib_c, lib_z
    phase("entry-log scan + CRC32C, jitted table CRC (the no-PCLMUL fallback)",
          lambda: scan_all(digests=DigestPlan(force=DigestType.CRC32C, crc_variant=config.CRC_TABLE)), log_bytes,
          digest_extra)
    jr = phase("journal scan", lambda: [scan_journal(p, window=window) for p in journals], jr_bytes,
               lambda js: f"{sum(len(j.records) for j in js)} records, ends "
                          f"{sorted({j.end_kind.name for j in js})}")
    nrec = sum(len(j.records) for j in jr)
    del jr

    idx_dirs = [os.path.join(root, "ledgers")]
    tree = [os.path.join(a.dir, "idx-tree")]
    walk_index_dirs(idx_dirs)
    walk_index_dirs(tree)
    idx = {}
    for name, dirs in (("bookie's own .idx hierarchy", idx_dirs), ("synthetic 2-level + 4-level hierarchy", tree)):
        _reset_peak()
        t, inv = _best(functools.partial(walk_index_dirs, dirs), a.repeat)
        idx[name] = (len(inv.files), len(inv.locations), t, _peak_mib())
        del inv

    peak_total = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    print()
    print("x base: ratio to the raw baseline, which maps the same windows afresh like the scans do (page faults\n"
          f"included); x mem: ratio to the same reduction over a window already mapped ({memory:.2f} GB/s, memory\n"
          "speed with no mmap cost); x BK: ratio to BookKeeper's scanEntryLog figure (with digests where checked).")
    print(f"{'phase':66s} {'GB/s':>7s} {'x base':>7s} {'x mem':>6s} {'x BK':>6s} {'peak RSS MiB':>12s}  notes")
    for name, (gbps, extra, peak) in results.items():
        bk = BK_SCAN_DIGEST_GBPS if ("CRC" in name or "digest" in name) else BK_SCAN_GBPS
        bk_txt = f"{gbps / bk:6.1f}" if name.startswith("entry-log") else "     -"
        print(f"{name:66s} {gbps:7.2f} {gbps / base:7.2f} {gbps / memory:6.2f} {bk_txt} {peak:12.0f}  {extra}")
    framing_gbps = results["entry-log scan, framing only"][0]
    print(f"{'   entries/s (framing only)':66s} {nentries * framing_gbps * 1e9 / log_bytes:,.0f}")
    jgbps = results["journal scan"][0]
    print(f"{'   journal records/s':66s} {nrec * jgbps * 1e9 / jr_bytes:,.0f}")
    for name, (nf, nl, t, peak) in idx.items():
        print(f"{'.idx walk: ' + name:66s} {nf / t:10,.0f} files/s {nl / t:12,.0f} locations/s "
              f"({nf} files, {nl} locations, {t:.2f} s; peak RSS {peak:.0f} MiB)")
    print()
    print("Whole-scan digest check, jitted CRC against the libraries called per entry:")
    for jit_name, lib_name in (("entry-log scan + CRC32C (forced on every entry)",
                                "entry-log scan + CRC32C by the crc32c package, one call per entry (Python loop)"),
                               ("entry-log scan + CRC32 (forced on every entry)",
                                "entry-log scan + CRC32 by zlib.crc32, one call per entry (Python loop)")):
        print(f"   {jit_name:58s} {results[jit_name][0] / results[lib_name][0]:6.2f}x the library path")
    print()
    print("CRC options (stored entries of one page-cached window, GB/s):")
    for name, gbps in crc_options(logs, window):
        print(f"   {name:48s} {gbps:7.2f}")
    print()
    print(f"BookKeeper's own figures on this machine kind: DefaultEntryLogger.scanEntryLog ~{BK_SCAN_GBPS:.2f} GB/s, "
          f"~{BK_SCAN_DIGEST_GBPS:.2f} GB/s with digest verification")
    print(f"peak RSS of the whole run (ru_maxrss): {peak_total:.0f} MiB; entry arrays of one full scan: "
          f"{arrays_mib:.1f} MiB")
    checks = [
        ("framing-only >= 60% of baseline", results["entry-log scan, framing only"][0] / base >= TARGETS["framing"]),
        ("CRC32C >= 40% of baseline",
         results["entry-log scan + CRC32C (forced on every entry)"][0] / base >= TARGETS["crc32c"]),
        ("CRC32 >= 20% of baseline",
         results["entry-log scan + CRC32 (forced on every entry)"][0] / base >= TARGETS["crc32"]),
        (f".idx walk >= {IDX_TARGET_FILES_S:,} files/s (synthetic hierarchy)",
         idx["synthetic 2-level + 4-level hierarchy"][0] / idx["synthetic 2-level + 4-level hierarchy"][2]
         >= IDX_TARGET_FILES_S),
        (f"peak RSS while scanning <= {RSS_BUDGET_MIB} MiB + output arrays",
         max(p for _, _, p in results.values()) <= RSS_BUDGET_MIB + arrays_mib),
    ]
    for what, ok in checks:
        print(f"target {'met    ' if ok else 'MISSED '} {what}")
    return 0


def bookie_arguments(ap: argparse.ArgumentParser) -> None:
    """The options that say which bench bookie to build or reuse (shared with bench/fsck_bench.py)."""
    ap.add_argument("--dir", default="./bench-out", help="where the bench bookie is built or reused")
    ap.add_argument("--size-gib", type=float, default=2.0, help="entry-log bytes to write (GiB)")
    ap.add_argument("--ledgers", type=int, default=12_000)
    ap.add_argument("--idx-files", type=int, default=120_000, help=".idx files of the synthetic hierarchy")
    ap.add_argument("--window-mib", type=int, default=64, help="bytes mapped at once by the scanners")
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement (the best is kept)")
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--digest", choices=("mixed", "crc32c"), default="mixed",
                    help="ledgers' digest type: alternating CRC32C/CRC32, or CRC32C for all")
    ap.add_argument("--entry-bytes", default=DEFAULT_ENTRY_BYTES, metavar="MIN:MAX",
                    help="payload sizes, uniform in MIN..MAX bytes (100:1000: a Pulsar-like bookie of small entries)")
    ap.add_argument("--bulk", action="store_true",
                    help="build with bench/bulk_bookie.py (CRC32C, packaged in batches: minutes for tens of millions "
                         "of entries) instead of bookie.writer")
    ap.add_argument("--layout", choices=("interleaved", "contiguous"), default="interleaved",
                    help="with --bulk: entries given to random ledgers as a busy bookie's adds arrive (ids over the "
                         "64-bit range, one ledger in eleven CRC32), or each ledger's entries one run (ids 1..N)")
    ap.add_argument("--journal-keys-only", action="store_true",
                    help="with --bulk: the journal holds the ledgers' keys only, as a bookie's once the journals "
                         "holding its entries were garbage-collected (a 16 GiB bookie then fits the page cache)")
    ap.add_argument("--storage", choices=("index-files", "rocksdb"), default="index-files",
                    help="with --bulk: the entries' locations in .idx files (Interleaved/SortedLedgerStorage) or in "
                         "DbLedgerStorage's RocksDB databases")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.scan_bench", description=__doc__.split("\n\n")[0])
    bookie_arguments(ap)
    ap.add_argument("--build-only", action="store_true", help=argparse.SUPPRESS)
    a, _others = ap.parse_known_args(argv)   # bench.run_all hands every bench the same arguments
    a.dir = os.path.abspath(a.dir)
    if a.build_only:
        build(a)
        return 0
    ensure_built(a)
    return run(a)


if __name__ == "__main__":
    sys.exit(main())
