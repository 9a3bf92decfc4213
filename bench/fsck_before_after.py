"""bookie-fsck from a source checkout and from this install (or a second checkout), alternating in each
round, against a raw read of the same bytes in the same round, and the floor (a process that imports
numpy and numba and does the raw read): seconds, CPU, x raw, x all, peak RSS and entries/s.

    python -m bench.fsck_before_after ROOT --before DIR [--after DIR] [--runs 3] [--built DIR]

``--before``, ``--after``: checkouts made with ``git archive REV | tar -x -C DIR``. A checkout's
command starts through ``python -P -c`` with the checkout on PYTHONPATH, which costs more CPU than
the installed script (about 0.3 s): give ``--after`` for a gain measured between two checkouts.
``--built``: the bench folder holding ``bench-built.json`` (the bookie's entry count, for entries/s).
bench.commands_bench measures every command this way; this one only fsck, for large bookies.

Measured 2026-12-02 on the 2 GiB interleaved bookie (``bench.scaling_bench --configs 2:20000:100-1000``,
3.64 M entries), ``--before`` 0dc0bd3 against ``--after`` 7a52ab7 (pass 5 finds most locations from
the entries' side by their ids and notes each location's range once; in-process, pass 5's CPU ~0.85 ->
~0.45 s), the machine shared with a test suite: ``--runs 6`` at load 2-4, before 4.18 s (CPU 4.22 s,
736 MiB), after 4.09 s (CPU 4.31 s, 709 MiB); 8 pairs by hand at load 5-7, CPU -0.51 s (median of the
pairs), wall medians 7.83 -> 6.55 s; 6 pairs by hand at load 1.6-2.7, CPU 4.99 -> 4.72 s (medians; the pairs'
median -0.43 s), wall 3.73 -> 3.63 s (the pairs' median -0.48 s, best 3.23 -> 3.02 s), 733 -> 723 MiB.
A gain of about 0.4-0.5 CPU seconds, as pass 5's own; on this shared machine the wall time varies more.
"""
from __future__ import annotations

import argparse
import sys

from bench import commands_bench, scan_bench


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.fsck_before_after", description=__doc__.split("\n\n")[0])
    ap.add_argument("root", help="the bookie")
    ap.add_argument("--before", required=True, metavar="DIR", help="a source checkout")
    ap.add_argument("--after", default=None, metavar="DIR", help="a second checkout (default: this install)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--built", default=None, metavar="DIR", help="the bench folder the bookie was built in")
    ap.add_argument("--window-mib", type=int, default=64, help="bytes the raw read maps at once")
    a = ap.parse_args(argv)
    cmds: list[tuple[str, list[str], dict | None, tuple[int, ...]]] = []
    for tag, checkout in (("before: ", a.before), ("after: " if a.after else "", a.after)):
        cmd, env = commands_bench.command("bookie-fsck", [a.root, "--no-progress"], checkout)
        cmds.append((tag + "bookie-fsck ROOT", cmd, env, (0, 4)))
    cmds.append(("floor", *commands_bench.floor_command(a.root, a.window_mib << 20), (0,)))
    raw, total, res = commands_bench.measure(a.root, cmds, a.runs, a.window_mib << 20)
    entries = scan_bench.built_entries(a.built) if a.built else None
    print(f"{total / 2**30:.2f} GiB of logs; raw read of the logs median {raw:.2f} s; {a.runs} rounds; "
          f"entries {entries}")
    for label, (t, ratio, rss, cpu, _cpu_ratio, ratio_all) in res.items():
        rate = f"{entries / t / 1e6:.2f} M entries/s" if entries and "fsck" in label else ""
        print(f"{label:28s} {t:7.2f} s  CPU {cpu:6.2f} s  x raw {ratio:5.2f}  x all {ratio_all:5.2f}  "
              f"peak RSS {rss:5.0f} MiB  {rate}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
