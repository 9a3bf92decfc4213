"""Shared helpers for the fsck tests: a small writer-built bookie and fault injection."""
from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
from dataclasses import dataclass

from bkdisk.bookie.layout import BookieDirs, discover
from bkdisk.bookie.model import LedgerSpec, WrittenBookie
from bkdisk.bookie.writer import write_bookie, write_metadata_dir
from bkdisk.demo import sample_spec
from bkdisk.formats.digests import DigestType
from bkdisk.formats.entry import ENTRY_V1_HEADER_SIZE
from bkdisk.formats.entrylog import SIZE_PREFIX_SIZE
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.index import unpack_location
from bkdisk.formats.paths import entry_log_name
from bkdisk.fsck.api import Report, check_bookie
from bkdisk.fsck.context import CheckOptions


@dataclass
class Disk:
    root: str
    written: WrittenBookie
    md_dir: str

    @property
    def dirs(self) -> BookieDirs:
        return discover(self.root)

    def check(self, **kw) -> Report:
        return check_bookie(self.dirs, CheckOptions(metadata_dir=self.md_dir, **kw))


def make_disk(base: str) -> Disk:
    spec = sample_spec()
    root = os.path.join(base, "bookie")
    w = write_bookie(spec, root)
    md = os.path.join(base, "metadata")
    write_metadata_dir(spec, md)
    return Disk(root, w, md)


def entry_record(w: WrittenBookie, lid: LedgerId, eid: int) -> tuple[str, int]:
    """(entry log path, offset of the record's size prefix) of an entry, from what the writer recorded."""
    log_id, pos = unpack_location(w.locations[(lid, eid)])
    path = next(p for p in w.entry_log_files if os.path.basename(p) == entry_log_name(log_id))
    return path, pos - SIZE_PREFIX_SIZE


MIXED_DIGESTS = [DigestType.CRC32C, DigestType.CRC32, DigestType.CRC32C, DigestType.CRC32, DigestType.DUMMY]


def mixed_ledgers(seed: int, password: bytes, n: int = 10, entries: int = 14) -> list[LedgerSpec]:
    """Ledgers 1..n of random payloads (200-6000 bytes), their digest types taken in turn from
    MIXED_DIGESTS: enough small entry logs for the scans to be spread over threads."""
    rnd = random.Random(seed)
    return [LedgerSpec(i + 1, [rnd.randbytes(rnd.randint(200, 6000)) for _ in range(entries)],
                       digest_type=MIXED_DIGESTS[i % len(MIXED_DIGESTS)], password=password) for i in range(n)]


def flip_payload(w: WrittenBookie, lid: LedgerId, eid: int) -> None:
    """Flip a payload byte of an entry in its entry log (its digest fails, its framing holds)."""
    log, off = entry_record(w, lid, eid)
    flip(log, off + SIZE_PREFIX_SIZE + ENTRY_V1_HEADER_SIZE + 12)


def patch(path: str, offset: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def flip(path: str, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0xFF]))


def codes(report: Report, severity: str | None = None) -> set[str]:
    return {f.code for f in report.findings if severity is None or f.severity.value == severity}


def errors(report: Report) -> list:
    return [f for f in report.findings if f.severity.value == "error"]


def unprivileged(cmd: list[str]) -> list[str]:
    """``cmd`` run so that file permissions apply: as root, without the read-override capabilities."""
    if os.geteuid() != 0:
        return cmd
    setpriv = shutil.which("setpriv")
    assert setpriv, "util-linux setpriv is needed to drop root's read override"
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search", *cmd]


def check_unprivileged(root: str, md_dir: str, target: str, mode: int, *more: str) -> tuple[int, dict, str]:
    """(exit code, --json report, stderr) of ``bookie-fsck root`` run unprivileged while ``target`` has
    ``mode`` (restored after)."""
    os.chmod(target, mode)
    try:
        cmd = unprivileged([sys.executable, "-c", "from bkdisk.fsck_cli import main; main()", root, "--json",
                            "--no-progress", "--metadata-dir", md_dir, *more])
        repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=repo), timeout=300)
    finally:
        os.chmod(target, 0o755 if os.path.isdir(target) else 0o644)
    assert p.stdout, p.stderr
    return p.returncode, json.loads(p.stdout), p.stderr


def snapshot(folder: str) -> dict[str, tuple]:
    """Every name below ``folder`` with its type, size, mtime and bytes' hash: what any write changes."""
    out = {}
    for dirpath, dirs, files in os.walk(folder):
        for n in dirs + files:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            digest = None
            if os.path.isfile(p) and not os.path.islink(p):
                with open(p, "rb") as f:
                    digest = hashlib.sha256(f.read()).hexdigest()
            out[os.path.relpath(p, folder)] = (st.st_mode, st.st_size, st.st_mtime_ns, digest)
    return out
