"""Whether a command gives the same findings and rows at two memory limits: the default ceiling (the
spilled path on a large bookie) against a limit with memory to spare (everything held).

Each command runs as a whole process, as the scaling bench runs it: ``bookie-fsck --json`` compared by its
findings and summary (its pass timings differ run to run), ``inventory --jsonl`` by the SHA-256 and line
count of its output, ``--parquet`` and ``scan-disk`` by their rows in fixed slices, whatever the row
groups (``scan-disk`` with one run id and without its ``scan_seconds`` column).
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile

OK = (0, 4)   # the commands' codes for clean and for errors found (a bench bookie may hold either)


def _checked(cmd: list[str], code: int | None) -> None:
    if code not in OK:
        raise SystemExit(f"{' '.join(cmd)}: exit {code}")


def _run(cmd: list[str], env: dict | None, **kw) -> subprocess.CompletedProcess:
    p = subprocess.run(cmd, env=env, **kw)
    _checked(cmd, p.returncode)
    return p


def _fsck(cmd: list[str], env: dict | None) -> object:
    doc = json.loads(_run(cmd + ["--json"], env, capture_output=True).stdout)
    return doc["findings"], doc["summary"]


def _jsonl(cmd: list[str], env: dict | None) -> tuple[str, int]:
    h, lines = hashlib.sha256(), 0
    with subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE) as p:
        out = p.stdout
        assert out is not None
        for block in iter(lambda: out.read(1 << 20), b""):
            h.update(block)
            lines += block.count(b"\n")
    _checked(cmd, p.returncode)
    return h.hexdigest(), lines


def _parquet_digest(path: str, drop: tuple[str, ...] = (), rows: int = 1 << 16) -> tuple[str, int]:
    """A digest of the rows, never the whole file in memory: the rows in slices of ``rows`` (whatever
    the file's row groups: their size follows the memory limit), each as an Arrow IPC stream."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    f, h = pq.ParquetFile(path), hashlib.sha256()
    pending: list[pa.RecordBatch] = []

    def digest(t: pa.Table) -> None:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, t.schema) as w:
            w.write_table(t.combine_chunks())
        h.update(sink.getvalue())

    for batch in f.iter_batches(batch_size=rows):
        pending.append(batch.drop_columns([c for c in drop if c in batch.schema.names]))
        if sum(len(x) for x in pending) >= rows:
            t = pa.Table.from_batches(pending).combine_chunks()
            whole = len(t) // rows * rows
            for at in range(0, whole, rows):
                digest(t.slice(at, rows))
            pending = [x for x in t.slice(whole).to_batches() if len(x)]
    if pending:
        digest(pa.Table.from_batches(pending))
    return h.hexdigest(), f.metadata.num_rows


def outputs(name: str, cmd: list[str], env: dict | None, tmp: str) -> object:
    """What ``name`` (a scaling-bench command) gives, in a comparable form. ``cmd`` is its command line
    with the memory limit to use; file outputs go to ``tmp``."""
    if name == "fsck":
        return _fsck([a for a in cmd if a != "--no-progress"], env)
    if name == "inventory --jsonl":
        return _jsonl(cmd, env)
    if name in ("inventory --parquet", "scan-disk"):
        out = os.path.join(tmp, "compare.parquet")
        i = cmd.index("--parquet" if name != "scan-disk" else "--out")
        run = cmd[:i + 1] + [out] + cmd[i + 2:] + (["--run-id", "bench"] if name == "scan-disk" else [])
        _run(run, env, stdout=subprocess.DEVNULL)
        return _parquet_digest(out, ("scan_seconds",) if name == "scan-disk" else ())
    raise ValueError(f"no output comparison for {name}")


def same_at(name: str, cmd: list[str], env: dict | None, limit: int, spare: int) -> tuple[bool, str]:
    """Run ``cmd`` at ``--memory-limit limit`` and at ``spare``; (equal, what was compared)."""
    base = list(cmd)
    if "--memory-limit" in base:
        i = base.index("--memory-limit")
        del base[i:i + 2]
    with tempfile.TemporaryDirectory(prefix="bench-same-") as tmp:
        a = outputs(name, base + ["--memory-limit", str(limit)], env, tmp)
        b = outputs(name, base + ["--memory-limit", str(spare)], env, tmp)
    what = {"fsck": "findings and summary", "inventory --jsonl": "SHA-256 and lines"}.get(name, "rows")
    return a == b, what


def same_as_checkout(roots: list[str], checkout: str, extra: list[str]) -> list[tuple[str, bool]]:
    """bookie-fsck's findings and summary over each of ``roots`` from this install and from a source
    ``checkout`` (``git archive REV | tar -x -C DIR``), with ``extra`` options: (root, equal) each."""
    from bench import commands_bench
    out = []
    for root in roots:
        here = _fsck(commands_bench.command("bookie-fsck", [root, *extra])[0], None)
        there = _fsck(*commands_bench.command("bookie-fsck", [root, *extra], checkout))
        out.append((root, here == there))
    return out


def main(argv: list[str] | None = None) -> int:
    import argparse
    ap = argparse.ArgumentParser(prog="python -m bench.same_outputs",
                                 description="bookie-fsck's findings over bookies: this install against a checkout")
    ap.add_argument("roots", nargs="+", help="bookies to check")
    ap.add_argument("--before", required=True, metavar="DIR", help="a source checkout (git archive REV)")
    ap.add_argument("--fsck-args", default="", help="more bookie-fsck options, one string (--metadata-dir DIR ...)")
    a = ap.parse_args(argv)
    got = same_as_checkout(a.roots, a.before, a.fsck_args.split())
    for root, equal in got:
        print(f"{'same     ' if equal else 'DIFFERENT'} {root}")
    return 0 if all(equal for _r, equal in got) else 1


if __name__ == "__main__":
    import sys
    sys.exit(main())
