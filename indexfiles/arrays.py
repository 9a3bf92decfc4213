"""Record arrays of an index-hierarchy walk, and the reference (pure-Python) way to produce them.

The jitted walk (indexfiles/scan.py) returns the same IndexInventory; tests compare the two.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from diskio.mapped import DiskError
from formats import index as fi
from formats.errors import FormatError
from formats.paths import CURRENT_DIR, parse_index_name
from indexfiles.reader import read_index

INDEX_FILE_DTYPE = np.dtype([
    ("dir", "<i4"),          # index into the walked dirs
    ("scope", "<u8"),        # the ledger the file name claims
    ("ledger", "<u8"),
    ("named", "?"),          # False: the name does not parse as an index name
    ("depth", "<i4"),        # path components below current/ (2 for scope 0, 4 for scoped, when placed right)
    ("size", "<i8"),
    ("header_ok", "?"),
    ("version", "<i4"),
    ("state_bits", "<u4"),
    ("present", "<i8"),      # slots that hold a location
    ("last_entry", "<i8"),   # -1 when none
    ("trailing", "<i4"),     # bytes of a partial last slot
])
LOCATION_DTYPE = np.dtype([("file", "<i4"), ("entry", "<i8"), ("log", "<u4"), ("pos", "<u4")])
# Names BookKeeper's own storage keeps in current/ (never strays).
KNOWN_CURRENT_FILES = ("VERSION", "lastId", "lastMark")
ROCKSDB_DIRS = ("ledgers", "locations")


@dataclass
class IndexInventory:
    dirs: list[str]
    paths: list[str] = field(default_factory=list)          # one per file row
    relpaths: list[str] = field(default_factory=list)       # below <dir>/current
    files: np.ndarray = field(default_factory=lambda: np.zeros(0, INDEX_FILE_DTYPE))
    headers: list[fi.IndexHeader | None] = field(default_factory=list)
    errors: list[FormatError | DiskError | None] = field(default_factory=list)
    locations: np.ndarray = field(default_factory=lambda: np.zeros(0, LOCATION_DTYPE))
    strays: list[tuple[str, str]] = field(default_factory=list)   # (path, why)


def list_index_candidates(dirs: list[str]) -> tuple[list[tuple[int, str, str]], list[tuple[str, str]]]:
    """Every ``*.idx`` below each ``<dir>/current`` as (dir index, path, relpath), plus stray files.

    Strays are files inside the hashed folders that are not index files (``.idx.rloc`` leftovers
    of a relocation included). RocksDB folders of DbLedgerStorage are not descended.
    """
    found, strays = [], []
    for di, d in enumerate(dirs):
        stack = [(os.path.join(d, CURRENT_DIR), 0, "")]
        while stack:
            folder, depth, rel = stack.pop()
            try:
                with os.scandir(folder) as it:
                    entries = sorted(it, key=lambda e: e.name)
            except OSError as e:
                strays.append((folder, f"cannot list ({e.strerror})"))
                continue
            for e in entries:
                name = e.name
                if e.is_dir(follow_symlinks=False):
                    if depth == 0 and name in ROCKSDB_DIRS:
                        continue
                    # relative paths are built while descending (cheaper than os.path.relpath per file)
                    stack.append((e.path, depth + 1, rel + name + os.sep))
                elif name.endswith(".idx"):
                    found.append((di, e.path, rel + name))
                elif depth > 0:
                    why = "leftover of an index relocation" if name.endswith(".idx.rloc") else "not an index file"
                    strays.append((e.path, why))
    found.sort(key=lambda t: (t[0], t[2]))
    return found, strays


def walk_index_dirs_reference(dirs: list[str]) -> IndexInventory:
    inv = IndexInventory(list(dirs))
    cands, inv.strays = list_index_candidates(dirs)
    rows, locs = [], []
    for fidx, (di, path, rel) in enumerate(cands):
        lid = parse_index_name(os.path.basename(path))
        depth = rel.count(os.sep)
        inv.paths.append(path)
        inv.relpaths.append(rel)
        try:
            x = read_index(path)
        except (FormatError, DiskError) as e:
            size = os.path.getsize(path) if os.access(path, os.F_OK) else -1
            rows.append((di, lid.scope if lid else 0, lid.ledger if lid else 0, lid is not None, depth, size,
                         False, -1, 0, 0, -1, 0))
            inv.headers.append(None)
            inv.errors.append(e)
            continue
        nz = np.flatnonzero(x.locations)
        rows.append((di, lid.scope if lid else 0, lid.ledger if lid else 0, lid is not None, depth, x.size, True,
                     x.header.version, x.header.state_bits, len(nz), int(nz[-1]) if len(nz) else -1,
                     x.trailing_bytes))
        inv.headers.append(x.header)
        inv.errors.append(None)
        v = x.locations[nz]
        part = np.zeros(len(nz), LOCATION_DTYPE)
        part["file"] = fidx
        part["entry"] = nz
        part["log"] = (v >> np.uint64(32)).astype(np.uint32)
        part["pos"] = (v & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        locs.append(part)
    inv.files = np.array(rows, dtype=INDEX_FILE_DTYPE)
    inv.locations = np.concatenate(locs) if locs else np.zeros(0, LOCATION_DTYPE)
    return inv
