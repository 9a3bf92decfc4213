"""The benchmarks (``./dev bench`` calls ``python -m bench.run_all``).

``./dev bench`` runs every benchmark with its defaults, in order; ``./dev bench NAME [ARGS]`` runs one
with its own options (``./dev bench NAME --help``). Each prints its figures against a baseline
measured in the same run (a raw read of the same bytes, or the direct alternative).
"""
from __future__ import annotations

import importlib
import sys

BENCHES = {
    "scan": ("bench.scan_bench", "jitted scanners vs a raw read of the same entry logs and journals"),
    "commands": ("bench.commands_bench", "whole commands (inventory, fsck, --help) as processes vs a raw read"),
    "scaling": ("bench.scaling_bench", "fsck and inventory over 0.5/2/4 GiB and 20k/200k ledgers"),
    "fsck": ("bench.fsck_bench", "fsck passes on the benchmark bookie"),
    "cold": ("bench.cold_bench", "bookie-fsck of a bookie no page cache holds vs reads of the same files, cold"),
    "fsck-before-after": ("bench.fsck_before_after", "bookie-fsck of this install vs a source checkout, same rounds"),
    "fixed-cost": ("bench.fixed_cost_bench", "inventory and fsck on a twin bookie of a few MiB (their fixed cost) "
                                             "vs raw reads of the 2 GiB bookie: the best ratio reachable"),
    "lane-timeline": ("bench.lane_timeline", "one fsck of a bookie: each lane's busy time, each core's idle share"),
    "thread-cpu": ("bench.thread_cpu", "a command's CPU by thread name of its JVM: where an audit's time goes"),
    "index-walk": ("bench.index_walk_bench", "the .idx hierarchy walk: os.scandir vs the native walker"),
    "rocksdb": ("bench.rocksdb_bench", "RocksDB locations: lookups, full iteration, DbLedgerStorage fsck"),
    "rocksdb-scan": ("bench.rocksdb_scan_bench", "a 20M-key locations database RocksDB wrote: dump and fsck's read "
                                                 "vs sst_dump, ldb scan, a raw read"),
    "space": ("bench.space_bench", "bkdisk space (ledgers maps, and --scan) as processes vs a raw read of the logs"),
    "audit": ("bench.audit_bench", "the Spark audit over 1-8 disks vs fsck + inventory direct, the join alone"),
    "metaservice": ("bench.metaservice_bench", "64 clients: embedded store, ZooKeeper via the service, kazoo direct"),
    "audit-scale": ("bench.audit_scale_bench",
                    "the audit of 3 disks with 10^4-10^7 more ledgers of metadata (folder, service)"),
    "scrub": ("bench.scrub_bench", "a week of nightly audits (--state, 7d) of 8 disks vs the --deep-all audit"),
    "header-reads": ("bench.header_reads_bench", "a light check's reads (a page per entry header) vs every byte, "
                                                 "cold, and scan-disk --state light vs --deep-all"),
    "metadata-pass": ("bench.metadata_pass_bench", "bookie-fsck with --metadata-dir (pass 7) vs without, on a "
                                                   "bookie of a million ledgers whose metadata is lost (--matched: "
                                                   "all of it)"),
    "salvage": ("bench.salvage_bench", "bkdisk salvage of many small ledgers over 8 disks vs the audit of them"),
    "bulk-read": ("bench.bulk_read_bench", "a million ledgers streamed through ReadLedgers vs the store read directly"),
    "metadata-import": ("bench.metadata_import_bench", "metadata import of a million ledgers (SQLite, ZooKeeper) vs "
                                                       "export, the per-ledger import and kazoo direct"),
}
DEFAULT = ["scan", "commands", "fsck", "index-walk", "rocksdb", "rocksdb-scan", "metaservice", "audit"]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("-h", "--help", "list"):
        for name, (_mod, what) in BENCHES.items():
            print(f"{name:12} {what}")
        return 0
    if argv and not argv[0].startswith("-"):
        if argv[0] not in BENCHES:
            print(f"bench: no benchmark {argv[0]!r}; one of {', '.join(BENCHES)}", file=sys.stderr)
            return 16
        return importlib.import_module(BENCHES[argv[0]][0]).main(argv[1:]) or 0
    worst = 0
    for name in DEFAULT:
        print(f"=== bench: {name} ===", flush=True)
        worst = max(worst, importlib.import_module(BENCHES[name][0]).main(argv) or 0)
    return worst


if __name__ == "__main__":
    sys.exit(main())
