"""RocksDB's own tools (Debian's ``rocksdb-tools``: ``ldb``, ``sst_dump``) driven for tests and benchmarks:
databases written by RocksDB itself, with the table options DbLedgerStorage uses set through the
database's OPTIONS file, and RocksDB's own reading of them.

``ldb`` takes compression and block size on its command line but neither format_version nor the
checksum type, so ``create`` makes an empty database with the first two, then edits its OPTIONS file;
every later ``ldb`` open loads that file (``--try_load_options`` is its default for an existing
database). Every ``ldb`` open also replays the WAL into a new level-0 table: read a database's WAL as
written before any other ``ldb`` command opens it (``scan`` works on a copy).
"""
from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable

import numpy as np

CHECKSUMS = {"none": "kNoChecksum", "crc32c": "kCRC32c", "xxhash": "kxxHash", "xxhash64": "kxxHash64",
             "xxh3": "kXXH3"}
_HEX = np.frombuffer(b"0123456789abcdef", np.uint8)


def tool(name: str) -> str:
    """The path of a RocksDB tool; an error saying what to install when it is missing."""
    path = shutil.which(name)
    if path is None:
        raise RuntimeError(f"{name} not found: install Debian's rocksdb-tools package (./dev test installs it)")
    return path


def ldb(db: str | os.PathLike, *args: str, stdin: bytes | None = None, **kw) -> str:
    """Run ``ldb --db=DB ARGS``; its stdout (an error carrying its stderr when it fails)."""
    p = subprocess.run([tool("ldb"), f"--db={os.fspath(db)}", *args], input=stdin, capture_output=True, **kw)
    if p.returncode != 0:
        raise RuntimeError(f"ldb {' '.join(args)}: exit {p.returncode}: {p.stderr.decode(errors='replace')[-400:]}")
    return p.stdout.decode()


def create(db: str | os.PathLike, *, format_version: int, compression: str, checksum: str,
           block_size: int = 65536) -> None:
    """An empty database with these table options (``compression`` as ``ldb --compression_type`` names it)."""
    ldb(db, "--create_if_missing", f"--compression_type={compression}", f"--block_size={block_size}", "load",
        stdin=b"")
    for path in glob.glob(os.path.join(os.fspath(db), "OPTIONS-*")):
        with open(path) as f:
            text = f.read()
        text, n1 = re.subn(r"(?m)^(\s*format_version=)\d+$", rf"\g<1>{format_version}", text)
        text, n2 = re.subn(r"(?m)^(\s*checksum=)\w+$", rf"\g<1>{CHECKSUMS[checksum]}", text)
        if (n1, n2) != (1, 1):
            raise RuntimeError(f"{path}: no format_version or checksum line to set")
        with open(path, "w") as f:
            f.write(text)


def hex_lines(keys: np.ndarray, values: np.ndarray) -> bytes:
    """``ldb load --hex`` input: ``0xKEY ==> 0xVALUE`` per row of (n, K) keys and (n, V) values."""
    n, k = keys.shape
    v = values.shape[1]
    line = np.empty((n, 2 + 2 * k + 7 + 2 * v + 1), np.uint8)
    line[:, :2] = np.frombuffer(b"0x", np.uint8)
    line[:, 2:2 + 2 * k:2], line[:, 3:2 + 2 * k:2] = _HEX[keys >> 4], _HEX[keys & 15]
    at = 2 + 2 * k
    line[:, at:at + 7] = np.frombuffer(b" ==> 0x", np.uint8)
    at += 7
    line[:, at:at + 2 * v:2], line[:, at + 1:at + 2 * v:2] = _HEX[values >> 4], _HEX[values & 15]
    line[:, -1] = ord("\n")
    return line.tobytes()


def load(db: str | os.PathLike, chunks: Iterable[bytes], *args: str) -> None:
    """``ldb load --hex`` of the lines in ``chunks``, streamed to its stdin."""
    with subprocess.Popen([tool("ldb"), f"--db={os.fspath(db)}", "--hex", *args, "load"], stdin=subprocess.PIPE,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) as p:
        for c in chunks:
            p.stdin.write(c)
        p.stdin.close()
        err = p.stderr.read()
    if p.returncode != 0:
        raise RuntimeError(f"ldb load: exit {p.returncode}: {err.decode(errors='replace')[-400:]}")


def scan(db: str | os.PathLike, *args: str) -> list[tuple[bytes, bytes]]:
    """``ldb scan --hex`` of a copy of the database (the open would flush the WAL of the original)."""
    with tempfile.TemporaryDirectory(prefix="ldb-scan-") as d:
        copy = os.path.join(d, "db")
        shutil.copytree(db, copy)
        out = ldb(copy, "--hex", *args, "scan")
    rows = []
    for line in out.splitlines():
        k, v = line.split(" : ")
        rows.append((bytes.fromhex(k[2:]), bytes.fromhex(v[2:])))
    return rows
