"""Shared helpers for the fsck tests: a small writer-built bookie and fault injection."""
from __future__ import annotations

import os
from dataclasses import dataclass

from bookie.layout import BookieDirs, discover
from bookie.model import WrittenBookie
from bookie.writer import write_bookie, write_metadata_dir
from bkdisk.demo import sample_spec
from fsck.api import Report, check_bookie
from fsck.context import CheckOptions


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
