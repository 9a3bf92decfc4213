"""``bkdisk space`` timed as a whole process (start-up included) against a raw read of the same entry-log
bytes in the same run, on the bench bookie bench/scan_bench.py builds (and reuses).

    python -m bench.space_bench [--dir ./bench-out/c2g20k] [--size-gib 2] [--ledgers 20000] [--runs 3]

A metadata folder beside the bookie gives every ledger CLOSED metadata naming the bench bookie, except
every third ledger (deleted: its bytes are garbage). Rows: the default run (ledgers maps where the logs
have them, as BookKeeper's collector reads them; a scan of the logs that have none), ``--scan`` (every
log's entries counted), the default run without metadata, each with ``--json``, and the floor process of
bench/commands_bench.py (python, numpy and numba imported, the raw read). Each round runs the raw read
and then every command once; the table prints medians, the ratio raw seconds / command seconds of the
same round, and peak RSS (wait4's ru_maxrss of the command's process, which counts the guarded child it
waited for).
"""
from __future__ import annotations

import argparse
import os
import sys

from bench import commands_bench, scan_bench

BOOKIE_ID = "bench-bookie:3181"


def write_metadata(folder: str, ledgers: int) -> int:
    """CLOSED metadata for ledgers 1..``ledgers`` but every third; returns how many were left out."""
    from bkdisk.formats.ledger_metadata import LedgerMetadata
    from bkdisk.formats.metadata import serialize_metadata
    os.makedirs(folder, exist_ok=True)
    if len(os.listdir(folder)) == ledgers - ledgers // 3:
        return ledgers // 3
    ensemble = ((0, (BOOKIE_ID, "bench-2:3181", "bench-3:3181")),)
    for lid in range(1, ledgers + 1):
        if lid % 3 == 0:
            continue
        md = LedgerMetadata(3, 2, 3, 2, 0, -1, "CLOSED", ensemble, "CRC32C", b"bench", 1700000000000 + lid,
                            (("pulsar/managed-ledger", f"public/default/persistent/t{lid % 97}".encode()),))
        with open(os.path.join(folder, f"{lid:x}.bin"), "wb") as f:
            f.write(serialize_metadata(md))
    return ledgers // 3


def run(a) -> int:
    a.idx_files, a.digest, a.seed = 0, "crc32c", 20240601
    scan_bench.ensure_built(a)
    root = os.path.join(a.dir, "bookie")
    md = os.path.join(a.dir, "space-metadata")
    dropped = write_metadata(md, a.ledgers)
    window = 64 << 20
    cmds = []
    for label, extra in (("space --metadata-dir --json", ["--metadata-dir", md]),
                         ("space --metadata-dir --scan --json", ["--metadata-dir", md, "--scan"]),
                         ("space --json (no metadata: the bookie's index)", [])):
        cmd, env = commands_bench.command("bkdisk", ["space", root, "--json", *extra])
        cmds.append((label, cmd, env, (0,)))
    cmds.append((commands_bench.FLOOR_LABEL, *commands_bench.floor_command(root, window), (0,)))
    # the metadata files into the page cache too (measure() warms the bookie's files)
    scan_bench._warm([os.path.join(md, n) for n in os.listdir(md)], refill=False)
    raw, nbytes, res = commands_bench.measure(root, cmds, a.runs, window)
    print(f"bench bookie {root}: {nbytes / (1 << 30):.2f} GiB of entry logs, {a.ledgers} ledgers "
          f"({dropped} without metadata); raw read {raw:.3f} s (median of {a.runs}; the machine may be shared)")
    print(f"{'command':<66} {'seconds':>8} {'x raw':>6} {'peak RSS MiB':>13}")
    for label, (t, ratio, rss, _cpu, _rc, _ra) in res.items():
        print(f"{label:<66} {t:>8.3f} {ratio:>6.2f} {rss:>13.0f}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench.space_bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default="./bench-out/c2g20k", help="where the bench bookie is built or reused")
    ap.add_argument("--size-gib", type=float, default=2.0)
    ap.add_argument("--ledgers", type=int, default=20_000)
    ap.add_argument("--runs", type=int, default=3, help="rounds (raw read + every command); medians are printed")
    return run(ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
