"""Run every benchmark in order (``./dev bench`` calls ``python -m bench.run_all``); arguments go to each."""
from __future__ import annotations

import sys

from bench import fsck_bench, scan_bench

BENCHES = [("scan", scan_bench.main), ("fsck", fsck_bench.main)]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    worst = 0
    for name, fn in BENCHES:
        print(f"=== bench: {name} ===", flush=True)
        worst = max(worst, fn(argv) or 0)
    return worst


if __name__ == "__main__":
    sys.exit(main())
