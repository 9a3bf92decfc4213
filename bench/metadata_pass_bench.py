"""What checking a bookie against ledger metadata adds (pass 7): ``bookie-fsck ROOT`` with and without
``--metadata-dir``, text and ``--json``, as whole processes alternated in each round; seconds, CPU and
peak RSS, and what each adds to the check without metadata measured in the same round.

    python -m bench.metadata_pass_bench [ROOT] [--base ./bench-out] [--metadata-dir DIR | --matched [--striped]] \\
        [--runs 3] [--before CHECKOUT]

ROOT: default the scaling bench's bookie of 2 M ledgers drawn (1.19 M distinct) in 1 GiB of 100-1000-byte
entries, its journal the ledgers' keys only (``bench.scaling_bench --configs 1:2000000:100-1000
--journal-keys-only``), built under ``--base`` if missing.
``--metadata-dir``: default an empty folder, the case of a bookie whose metadata is lost or was given
the wrong folder: every ledger it holds is an orphan, a finding each. ``--matched``: the metadata of
every ledger it holds, the case of a healthy cluster (bench.metadata_gen.write_matching_folder).
``--before``: a checkout (``git archive REV | tar -x -C DIR``) run beside this install with metadata,
for a change measured in one run.

Measured 2026-12-05 on that bookie (1,194,865 ledgers, 1.82 M entries, an ``.idx`` file a ledger), an
empty metadata folder, ``--runs 1 --before`` bccd5cb, the machine alone. The page cache holds part of
the 1.19 M index files, so the check's own listing varies (the first command of this run met them cold:
55 s; 23 s in an earlier run); peak RSS is the figure to read:

    bookie-fsck ROOT                    s    CPU s  peak MiB       +s    +MiB
    no metadata                     55.21    57.98       657     0.00       0
    --metadata-dir                  19.92    22.64       982   -35.29     325
    --metadata-dir --json           25.44    28.57       956   -29.77     299
    before: --metadata-dir          55.46    58.57      1653     0.25     996
    before: --metadata-dir --json   77.10    80.16      1844    21.89    1187

In-process, pass 7 itself went from 29.7 s to 5.4 s: the entries held per ledger 7.4 s and +470 MB ->
0.7 s and 105 MB of arrays; three file lookups per orphan (21 s) -> one listing of the folder.

Measured 2026-12-06 on that bookie against the metadata of every ledger it holds (the folder
``--matched`` writes: 1,194,865 files, Pulsar-shaped, 20,000 topics), ``--runs 1 --before`` 036a760,
the machine alone; the ledgers' metadata and the digest plan's types and passwords held as columns:

    bookie-fsck ROOT                    s    CPU s  peak MiB       +s    +MiB
    no metadata                     24.12    28.98       722     0.00       0
    --metadata-dir                 134.06   170.90       942   109.94     220
    --metadata-dir --json          136.39   164.85       925   112.27     203
    before: --metadata-dir         203.16   225.51      1616   179.04     894
    before: --metadata-dir --json   253.74   255.33      1569   229.62     847

In-process (same day), growth of the resident set: the folder's view of the bookie's ledgers 498 -> 107
MiB, the digest plan made of it 382 -> 173 MiB (the columns' sort included); pass 7 7.6 -> 1.9 s (ledgers
held whole passed over by their counts and bounds). Most of the +110 s is reading the folder: 40 us a
file's open, fstat, read and close here, 23 us its parse, 1.19 M times.

Measured 2026-12-06 on that bookie against ``--matched --striped`` metadata (Qw 2 of 3, one ledger in
five changing its ensemble: no ledger's every entry is placed here, so none was passed over by its
counts and bounds), ``bookie-fsck ROOT --metadata-dir DIR --json`` once each, the code before (c864e1f)
and after it counted what each ledger's segments place here (fsck/ensemble_placement.py): pass 7
34.96 s -> 2.73 s, peak RSS 1,271 -> 1,014 MiB, the whole command 219 -> 152 s (its listing of the index,
cold, 70 and 24 s of it); the same findings (none).

Measured 2026-12-06 later, the same command and metadata once each (the machine alone), after pass 7
decided its near ledgers a block at a time and held a ledger's entries as one run where its index file
locates some (40dbb90): pass 7 3.11 -> 1.60 s, peak RSS 1,014 -> 873 MiB, the whole command 168 -> 146 s
(reading the folder ~110 s of it, cold); the same findings (none). In-process, pass 7's own peak: 1,043 ->
837 MiB. On the 2 GiB bookie of 20,000 ledgers against its striped metadata, pass 7 1.50 -> 0.53 s; against
that metadata with one ledger in seven closed 3 or 50 entries later, or left open, the same 2,592 errors.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile

from bench import commands_bench


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.metadata_pass_bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("root", nargs="?", default=None, help="the bookie (default: the 1.19 M-ledger bench bookie)")
    ap.add_argument("--base", default="./bench-out", help="folder of the bench bookies")
    ap.add_argument("--metadata-dir", default=None, metavar="DIR", help="ledger metadata (default: an empty folder)")
    ap.add_argument("--matched", action="store_true",
                    help="the metadata of every ledger the bookie holds (bench.metadata_gen.write_matching_folder: "
                         "Pulsar-shaped, closed at the last entry held), built beside ROOT's folder if missing")
    ap.add_argument("--striped", action="store_true",
                    help="with --matched: Qw 2 of 3, ensemble changes (write_matching_folder's striped layout), "
                         "in a folder of its own")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--before", default=None, metavar="DIR", help="a source checkout measured beside this install")
    a = ap.parse_args(argv)
    if a.root is None:
        from bench import scaling_bench, scan_bench
        d = os.path.abspath(scaling_bench.bookie_dir(a.base, 1, 2_000_000, "100-1000", keys_only=True))
        scan_bench.ensure_built(scaling_bench.build_args(d, 1, 2_000_000, "100-1000", keys_only=True))
        a.root = os.path.join(d, "bookie")
    if a.matched and a.metadata_dir is None:
        from bench.metadata_gen import write_matching_folder
        a.metadata_dir = os.path.join(os.path.dirname(os.path.abspath(a.root)),
                                      "striped-metadata" if a.striped else "matched-metadata")
        if not os.path.isdir(a.metadata_dir):
            n = write_matching_folder(a.root, a.metadata_dir + ".part", striped=a.striped)
            os.rename(a.metadata_dir + ".part", a.metadata_dir)
            print(f"{a.metadata_dir}: the metadata of {n} ledgers")
    with tempfile.TemporaryDirectory(prefix="bkdisk-empty-metadata-") as empty:
        md = a.metadata_dir or empty
        base = [a.root, "--no-progress"]
        rows: list[tuple[str, list[str], dict | None]] = [("no metadata", *commands_bench.command("bookie-fsck", base))]
        for tag, checkout in (("", None), ("before: ", a.before)) if a.before else (("", None),):
            for label, extra in (("--metadata-dir", []), ("--metadata-dir --json", ["--json"])):
                rows.append((tag + label, *commands_bench.command("bookie-fsck", [*base, "--metadata-dir", md, *extra],
                                                                  checkout)))
        if a.before:
            commands_bench.byte_compiled(a.before)
        got: dict[str, list[tuple[float, float, float]]] = {label: [] for label, *_ in rows}
        for _ in range(a.runs):
            for label, cmd, env in rows:
                got[label].append(commands_bench.timed(cmd, env=env, ok=(0, 4)))
    print(f"{a.root}: metadata {'an empty folder' if md == empty else md}; {a.runs} rounds, "
          f"load {os.getloadavg()[0]:.2f} (1 min)")
    print(f"{'bookie-fsck ROOT':28s} {'s':>8s} {'CPU s':>8s} {'peak MiB':>9s} {'+s':>8s} {'+MiB':>7s}")
    t0 = statistics.median(r[0] for r in got["no metadata"])
    m0 = max(r[1] for r in got["no metadata"])
    for label, runs in got.items():
        t, cpu = statistics.median(r[0] for r in runs), statistics.median(r[2] for r in runs)
        rss = max(r[1] for r in runs)
        print(f"{label:28s} {t:8.2f} {cpu:8.2f} {rss:9.0f} {t - t0:8.2f} {rss - m0:7.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
