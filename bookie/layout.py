"""Finding a bookie's journal, ledger and index dirs: from a root folder, a bk_server.conf, or by hand."""
from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bkdisk.formats.errors import BkdiskError
from bkdisk.formats.paths import CURRENT_DIR

if TYPE_CHECKING:
    from bkdisk.formats.cookie import Cookie


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
    # The dir strings exactly as a configuration names them (journal, ledger, index), which is
    # what BookKeeper compares with the cookie.
    configured: tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]] | None = None

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
            for _dirpath, _dirs, files in os.walk(self.current(d)):
                if any(f.endswith(".idx") or f.endswith(".idx.rloc") for f in files):
                    return "index-files"
        return "empty"


def _kind_of(cur: str) -> set[str]:
    try:
        names = os.listdir(cur)
    except OSError:   # a bookie's dir all the same: kept by its name, and listing it fails where it is read
        return {"unknown"}
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


def _cookie_of(d: str) -> Cookie | None:
    from bkdisk.diskio.mapped import read_bytes
    from bkdisk.formats.cookie import parse_cookie
    p = os.path.join(d, CURRENT_DIR, "VERSION")
    try:
        return parse_cookie(read_bytes(p), path=p)
    except (BkdiskError, OSError):
        return None


def bookie_id_of(dirs: BookieDirs) -> str | None:
    """The bookie id of the first cookie that parses (ledger dirs first); None when none does."""
    for d in dirs.ledger_dirs + dirs.journal_dirs + dirs.index_dirs:
        c = _cookie_of(d)
        if c is not None:
            return c.bookie_id
    return None


def instance_ids_of(dirs: BookieDirs, with_none: bool = False) -> dict[str, str | None]:
    """Dir -> the instance id its cookie records (the cluster it was formatted for), for every dir
    whose cookie parses and records one; ``with_none``: also those whose cookie parses and records
    none (None), which BookKeeper's cookie check tells from any id (Cookie.verifyInternal)."""
    out: dict[str, str | None] = {}
    for d in dirs.ledger_dirs + dirs.journal_dirs + dirs.index_dirs:
        c = _cookie_of(d)
        if c is not None and (c.instance_id or with_none):
            out[d] = c.instance_id or None
    return out


def _natural(path: str) -> list:
    """Sort key that puts journal2 before journal10."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", path)]


def _in_cookie_order(found: list[str], recorded: tuple[str, ...]) -> list[str]:
    """Order found dirs as the cookie lists them (lastMark.N is numbered by that order).

    A found dir matches a recorded one when their trailing path components agree; dirs that
    match nothing keep natural order after the matched ones.
    """
    rest = sorted(found, key=_natural)
    out = []
    for r in recorded:
        parts = [x for x in r.replace("\\", "/").split("/") if x and x != "."]
        best, depth = None, 0
        for f in rest:
            fp = [x for x in f.split(os.sep) if x]
            k = 0
            while k < min(len(parts), len(fp)) and parts[-1 - k] == fp[-1 - k]:
                k += 1
            if k > depth:
                best, depth = f, k
        if best is not None:
            out.append(best)
            rest.remove(best)
    return out + rest


# Levels below a ROOT searched for a ``current/``: a bound on the walk of a folder that holds no bookie (/mnt, /).
SEARCH_DEPTH = 3


def _has_subfolder(path: str) -> bool:
    try:
        with os.scandir(path) as it:
            return any(e.is_dir() for e in it)   # (a link to a folder counts, as the walk follows links)
    except OSError:
        return False


def _why_not_a_folder(path: str) -> str:
    """Why ``path`` is not a folder to search: missing (or a link that leads nowhere), out of reach (a
    folder above it this user cannot search), or something else."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "no such folder" + (" (a symbolic link that leads nowhere)" if os.path.islink(path) else "")
    except OSError as e:
        return f"cannot be reached ({e.strerror})"
    return "a file, not a folder" if stat.S_ISREG(st.st_mode) else "not a folder"


def discover_all(root: str, notes: list[str] | None = None) -> list[BookieDirs]:
    """Every bookie under ``root`` (up to SEARCH_DEPTH levels, following symlinks): dirs with a ``current/``,
    classified by content and grouped by the bookie id of their cookies.

    ``.txn`` files make a journal dir; entry logs, lastId or lastMark a ledger dir; only hashed
    index folders (or DbLedgerStorage's RocksDB folders) an index dir. Within a bookie the dirs
    are in the order its cookie lists them, the order ``lastMark.<i>`` files are numbered by.

    ``notes``, when given, gets one line when bookies were found but folders below SEARCH_DEPTH that could
    hold more were left unsearched (naming the first): bookies there are not in the list.
    """
    root = os.path.abspath(root)
    if not os.path.isdir(root):
        raise LayoutError(f"{root}: {_why_not_a_folder(root)}")
    found: list[tuple[str, set[str]]] = []
    no_current: list[str] = []   # folders without a current/ folder (none, or a dangling link, a loop, a file)
    seen_real = set()
    cut: str | None = None   # the first folder whose subfolders were left unsearched
    unsearched: str | None = None   # the first such folder whose subfolders could hold bookie dirs
    def unlisted(e: OSError) -> None:
        # A folder that cannot be listed may be a dir its bookie's cookie names: kept with those without
        # a current/, so that the commands say they could not list it rather than miss it.
        if e.filename is not None:
            no_current.append(os.fspath(e.filename))

    for dirpath, dirs, _files in os.walk(root, followlinks=True, onerror=unlisted):
        real = os.path.realpath(dirpath)
        if real in seen_real:      # a symlink loop, or the same dir reached twice
            dirs[:] = []
            continue
        seen_real.add(real)
        depth = dirpath[len(root):].count(os.sep)
        if CURRENT_DIR in dirs:
            found.append((dirpath, _kind_of(os.path.join(dirpath, CURRENT_DIR))))
            dirs.remove(CURRENT_DIR)
        else:
            no_current.append(dirpath)
        if depth >= SEARCH_DEPTH:
            cut = cut or (dirpath if dirs else None)
            # Could a bookie dir be below? Looked one level further only (the walk stays bounded): one needs
            # two levels (<sub>/current), so subfolders that hold no folder cannot hold one; nor do the
            # folders of a found bookie dir (lost+found or previous/ beside its current/). A deeper tree
            # without any current/ still counts.
            if notes is not None and unsearched is None and dirs and \
                    not any(os.path.join(dirpath, "").startswith(os.path.join(d, "")) for d, _k in found) and \
                    any(_has_subfolder(os.path.join(dirpath, d)) for d in sorted(dirs)):
                unsearched = dirpath
            dirs[:] = []
        dirs.sort()
    if not found:
        deeper = f"; folders below {cut} not searched: give the folder that holds the bookie's dirs" if cut else ""
        raise LayoutError(f"{root}: no bookie dirs found up to {SEARCH_DEPTH} levels below it (no '<dir>/current' "
                          f"with journals, entry logs or cookies){deeper}")
    groups: dict[str | None, list[tuple[str, set[str], Cookie | None]]] = {}
    for d, kinds in found:
        c = _cookie_of(d)
        groups.setdefault(c.bookie_id if c is not None else None, []).append((d, kinds, c))
    if None in groups and len(groups) == 2:
        # Dirs without a readable cookie belong to the one bookie there is (fsck reports the cookie).
        nameless = groups.pop(None)
        next(iter(groups.values())).extend(nameless)
    out = []
    for _bid, members in groups.items():
        journal, ledger, index = [], [], []
        for d, kinds, _c in members:
            if "journal" in kinds:
                journal.append(d)
            if "ledger" in kinds:
                ledger.append(d)
            elif "index" in kinds and "journal" not in kinds:
                index.append(d)
            elif kinds == {"unknown"}:
                (journal if "journal" in os.path.basename(d) else ledger).append(d)
        cookie = next((c for _d, _k, c in members if c is not None), None)
        if cookie is not None:
            # A dir the cookie names, beside this bookie's other dirs, whose current/ is missing or
            # leads nowhere (an unmounted disk behind a link) stays in the lists: listing it fails, and
            # that is what fsck and inventory say. (Several bookies side by side name the same folders.)
            parents = {os.path.dirname(d) for d, _k, _c in members}
            for kind, named in ((journal, cookie.journal_dirs), (ledger, cookie.ledger_dirs),
                                (index, cookie.index_dirs or ())):
                names = {os.path.basename(os.path.normpath(n.replace("\\", "/"))) for n in named}
                kind += [d for d in no_current if os.path.basename(d) in names and os.path.dirname(d) in parents
                         and d not in kind]
            journal = _in_cookie_order(journal, cookie.journal_dirs)
            ledger = _in_cookie_order(ledger, cookie.ledger_dirs)
            index = _in_cookie_order(index, cookie.index_dirs or ())
        else:
            journal, ledger, index = (sorted(x, key=_natural) for x in (journal, ledger, index))
        if index and not ledger:
            ledger, index = index, []
        if journal or ledger or index:   # (a current/ that holds nothing names no bookie)
            out.append(BookieDirs(journal, ledger, index, root=root))
    if not out:
        raise LayoutError(f"{root}: no bookie dirs found (the '<dir>/current' folders there hold no journals, "
                          "entry logs, index or cookies)")
    if notes is not None and unsearched is not None:
        notes.append(f"folders below {unsearched} were not searched (more than {SEARCH_DEPTH} levels below "
                     f"{root}); give that folder as a ROOT of its own to include its bookies")
    return out


def folder_of(dirs: BookieDirs) -> str:
    """The folder that holds all of a bookie's dirs (what to give as its ROOT)."""
    return os.path.commonpath(dirs.all_dirs)


def discover(root: str) -> BookieDirs:
    """The one bookie under ``root``; several bookies there is an error naming each and its folder."""
    found = discover_all(root)
    if len(found) > 1:
        each = [f"{bookie_id_of(b) or '?'} in {folder_of(b)}" for b in found]
        raise LayoutError(f"{root}: holds {len(found)} bookies ({', '.join(each)}); give the folder of one")
    return found[0]


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
    from bkdisk.diskio.mapped import DiskError, read_bytes
    try:
        # Opened without blocking (a FIFO is refused, never waited on); Java reads .properties as
        # ISO-8859-1: every byte decodes, so no file can fail to decode.
        props = parse_properties(read_bytes(conf_path).decode("latin-1"))
    except DiskError as e:
        raise LayoutError(str(e)) from None
    journal = _dir_list(props.get("journalDirectories")) or _dir_list(props.get("journalDirectory"))
    ledger = _dir_list(props.get("ledgerDirectories"))
    index = _dir_list(props.get("indexDirectories"))
    if not journal or not ledger:
        raise LayoutError(f"{conf_path}: needs journalDirectories (or journalDirectory) and ledgerDirectories")
    base = os.path.dirname(os.path.abspath(conf_path))
    def absd(ds: list[str]) -> list[str]:
        return [d if os.path.isabs(d) else os.path.normpath(os.path.join(base, d)) for d in ds]
    return BookieDirs(absd(journal), absd(ledger), absd(index), conf_path=conf_path,
                      configured=(tuple(journal), tuple(ledger), tuple(index)))
