"""Finding a bookie's journal, ledger and index dirs: from a root folder, a bk_server.conf, or by hand."""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from formats.errors import BkdiskError
from formats.paths import CURRENT_DIR


class LayoutError(BkdiskError):
    """The dirs of a bookie could not be determined."""


@dataclass
class BookieDirs:
    """A bookie's configured dirs (each used as ``<dir>/current``)."""

    journal_dirs: list[str]
    ledger_dirs: list[str]
    index_dirs: list[str] = field(default_factory=list)   # empty: the ledger dirs hold the index
    root: str | None = None
    conf_path: str | None = None

    @property
    def effective_index_dirs(self) -> list[str]:
        return self.index_dirs or self.ledger_dirs

    def current(self, d: str) -> str:
        return os.path.join(d, CURRENT_DIR)

    @property
    def all_dirs(self) -> list[str]:
        seen, out = set(), []
        for d in self.journal_dirs + self.ledger_dirs + self.index_dirs:
            if d not in seen:
                seen.add(d)
                out.append(d)
        return out

    @property
    def storage_kind(self) -> str:
        """'index-files' (Interleaved/Sorted), 'rocksdb' (DbLedgerStorage) or 'empty'."""
        for d in self.effective_index_dirs:
            cur = self.current(d)
            if os.path.isdir(os.path.join(cur, "ledgers")) and os.path.isdir(os.path.join(cur, "locations")):
                return "rocksdb"
        for d in self.effective_index_dirs:
            for dirpath, _dirs, files in os.walk(self.current(d)):
                if any(f.endswith(".idx") or f.endswith(".idx.rloc") for f in files):
                    return "index-files"
        return "empty"


def _kind_of(cur: str) -> set[str]:
    try:
        names = os.listdir(cur)
    except OSError:
        return set()
    kinds = set()
    if any(n.endswith(".txn") for n in names):
        kinds.add("journal")
    if any(n.endswith(".log") or n == "lastId" or n.startswith("lastMark") for n in names):
        kinds.add("ledger")
    if any(len(n) <= 2 and os.path.isdir(os.path.join(cur, n)) for n in names) or \
            {"ledgers", "locations"} <= set(names):
        kinds.add("index")
    if not kinds and "VERSION" in names:
        kinds.add("unknown")
    return kinds


def discover(root: str) -> BookieDirs:
    """Find dirs under ``root`` (up to 3 levels) that have a ``current/`` and classify them by content.

    A dir with ``.txn`` files is a journal dir; one with entry logs, lastId or lastMark a ledger
    dir. Dirs are listed in sorted path order, the order BookKeeper's tools print them in.
    """
    root = os.path.abspath(root)
    if not os.path.isdir(root):
        raise LayoutError(f"{root}: not a directory")
    journal, ledger = [], []
    for dirpath, dirs, _files in os.walk(root):
        depth = dirpath[len(root):].count(os.sep)
        if CURRENT_DIR in dirs:
            kinds = _kind_of(os.path.join(dirpath, CURRENT_DIR))
            if "journal" in kinds:
                journal.append(dirpath)
            if "ledger" in kinds or ("index" in kinds and "journal" not in kinds):
                ledger.append(dirpath)
            if not kinds - {"unknown"} and "unknown" in kinds:
                # An empty dir with a cookie: a journal dir if named like one, else a ledger dir.
                (journal if "journal" in os.path.basename(dirpath) else ledger).append(dirpath)
            dirs.remove(CURRENT_DIR)
        if depth >= 3:
            dirs[:] = []
        dirs.sort()
    if not journal and not ledger:
        raise LayoutError(f"{root}: no bookie dirs found (no '<dir>/current' with journals, entry logs or cookies)")
    return BookieDirs(sorted(journal), sorted(ledger), [], root=root)


def parse_properties(text: str) -> dict[str, str]:
    """Java .properties as bk_server.conf uses them: key=value or key: value, # and ! comments."""
    out: dict[str, str] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        i += 1
        while line.endswith("\\") and i < len(lines):
            line = line[:-1] + lines[i].strip()
            i += 1
        if not line or line[0] in "#!":
            continue
        for j, c in enumerate(line):
            if c in "=:" or c.isspace():
                k, v = line[:j].strip(), line[j + 1:].strip()
                if c.isspace() and v[:1] in ("=", ":"):
                    v = v[1:].strip()
                out[k] = v
                break
        else:
            out[line] = ""
    return out


def _dir_list(v: str | None) -> list[str]:
    return [p.strip() for p in v.split(",") if p.strip()] if v else []


def from_conf(conf_path: str) -> BookieDirs:
    """Dirs from a BookKeeper server config: journalDirectories (or journalDirectory),
    ledgerDirectories, indexDirectories."""
    try:
        with open(conf_path, encoding="utf-8") as f:
            props = parse_properties(f.read())
    except OSError as e:
        raise LayoutError(f"{conf_path}: cannot read ({e.strerror})") from None
    journal = _dir_list(props.get("journalDirectories")) or _dir_list(props.get("journalDirectory"))
    ledger = _dir_list(props.get("ledgerDirectories"))
    index = _dir_list(props.get("indexDirectories"))
    if not journal or not ledger:
        raise LayoutError(f"{conf_path}: needs journalDirectories (or journalDirectory) and ledgerDirectories")
    base = os.path.dirname(os.path.abspath(conf_path))
    absd = lambda ds: [d if os.path.isabs(d) else os.path.normpath(os.path.join(base, d)) for d in ds]
    return BookieDirs(absd(journal), absd(ledger), absd(index), conf_path=conf_path)
