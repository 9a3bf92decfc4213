"""Pass 1: layout and cookies: current/ folders, cookies present, valid and consistent, BookieId."""
from __future__ import annotations

import errno
import os
from collections.abc import Iterator

from bkdisk.bookie.layout import BookieDirs
from bkdisk.diskio.mapped import DiskError, read_bytes
from bkdisk.formats.bookieid import is_strict_bp41, validate_bookie_id
from bkdisk.formats.cookie import Cookie, parse_cookie
from bkdisk.formats.errors import FormatError
from bkdisk.formats.paths import CURRENT_DIR
from bkdisk.fsck.codes import Code
from bkdisk.fsck.confinement import is_inside, real_roots
from bkdisk.fsck.context import CheckContext
from bkdisk.fsck.findings import Finding
from bkdisk.indexfiles.listing import ROCKSDB_DIRS


def _same_dir(recorded: str, found: str) -> bool:
    """A cookie records dirs as configured; compare them the way they were found (absolute, normalized)."""
    if os.path.isabs(recorded):
        return os.path.normpath(recorded) == os.path.normpath(found)
    return False


def run(ctx: CheckContext) -> Iterator[Finding]:
    cookies: dict[str, Cookie] = {}
    named: set[str] = set()   # files a cookie's read already said could not be read
    for f in _read_cookies(ctx.dirs, cookies):
        if f.code == Code.FILE_UNREADABLE and f.path is not None:
            named.add(f.path)
        yield f
    yield from _consistency(ctx.dirs, cookies)
    yield from _unreadable(ctx, named)
    yield from _symlinks(ctx)


def cookie_mismatches(dirs: BookieDirs) -> list[Finding]:
    """The COOKIE_MISMATCH findings of ``dirs``: cookies that disagree, or a cookie that names another
    number of dirs than were found (copies of one bookie, or a bookie without cookies beside another,
    under one root). A command that reads the dirs as one bookie refuses them, as BookKeeper's cookie
    validation refuses to start."""
    cookies: dict[str, Cookie] = {}
    for _f in _read_cookies(dirs, cookies):
        pass   # (what a dir's own cookie lacks is fsck's to report)
    return [f for f in _consistency(dirs, cookies) if f.code == Code.COOKIE_MISMATCH]


def _read_cookies(dirs: BookieDirs, cookies: dict[str, Cookie]) -> Iterator[Finding]:
    """Each dir's cookie into ``cookies``; a finding for each dir with none that reads."""
    for d in dirs.all_dirs:
        cur = os.path.join(d, CURRENT_DIR)
        if not os.path.isdir(cur) and not _unsearchable(d):
            yield Finding(Code.LAYOUT_NO_CURRENT, path=d, detail=_in_place_of_current(cur))
            continue
        try:   # (a dir that cannot be searched fails here too: its current/ is said unreadable, not missing)
            os.listdir(cur)
        except OSError as e:
            if d not in dirs.effective_index_dirs or dirs.storage_kind == "rocksdb" or e.errno == errno.ENOENT:
                # (an index dir pass 2 walks it names, with the index folders it could not list)
                yield Finding(Code.FILE_UNREADABLE, path=cur, detail=f"cannot list ({e.strerror})", errno=e.errno)
            continue
        vp = os.path.join(cur, "VERSION")
        if not os.path.exists(vp):
            yield Finding(Code.COOKIE_MISSING, path=vp)
            continue
        try:
            c = parse_cookie(read_bytes(vp), path=vp)
        except DiskError as e:
            yield Finding(Code.FILE_UNREADABLE, path=vp, detail=e.what, errno=e.errno)
            continue
        except FormatError as e:
            yield Finding(Code.COOKIE_UNREADABLE, path=vp, offset=e.offset, detail=f"{e.expected}, found {e.found}")
            continue
        cookies[d] = c
        try:
            validate_bookie_id(c.bookie_id)
            if not is_strict_bp41(c.bookie_id):
                yield Finding(Code.BOOKIE_ID_NONSTANDARD, path=vp, detail=repr(c.bookie_id))
        except FormatError as e:
            yield Finding(Code.BOOKIE_ID_INVALID, path=vp, detail=f"{e.expected}, found {e.found}")


def _consistency(dirs: BookieDirs, cookies: dict[str, Cookie]) -> Iterator[Finding]:
    if not cookies:
        return
    items = list(cookies.items())
    ref_dir, ref = items[0]
    for d, c in items[1:]:
        diffs = []
        # Compared as BookKeeper compares them: an empty instance id is none, no index dirs are the ledger dirs.
        for field, label in (("bookie_id", "bookie id"), ("effective_instance_id", "instance id"),
                             ("journal_dirs", "journal dirs"), ("ledger_dirs", "ledger dirs"),
                             ("effective_index_dirs", "index dirs")):
            a, b = getattr(ref, field), getattr(c, field)
            if a != b:
                diffs.append(f"{label} ({a!r} in {ref_dir}, {b!r} in {d})")
        for diff in diffs:
            yield Finding(Code.COOKIE_MISMATCH, path=os.path.join(d, CURRENT_DIR, "VERSION"), detail=diff)
    # Where the cookie says the dirs are, against the configuration (compared as strings, as
    # BookKeeper does) or, without one, against where the dirs were found.
    vp = os.path.join(ref_dir, CURRENT_DIR, "VERSION")
    if dirs.configured is not None:
        cj, cl, ci = dirs.configured
        for label, in_cookie, conf in (("journal dirs", ref.journal_dirs, cj), ("ledger dirs", ref.ledger_dirs, cl),
                                       ("index dirs", ref.effective_index_dirs, ci or cl)):
            if tuple(in_cookie) != tuple(conf):
                yield Finding(Code.COOKIE_DIR_CONF_MISMATCH, path=vp,
                              detail=f"{label}: cookie {list(in_cookie)}, configuration {list(conf)}")
        return
    recorded = list(ref.journal_dirs) + list(ref.ledger_dirs) + list(ref.index_dirs or ())
    found = dirs.journal_dirs + dirs.ledger_dirs + dirs.index_dirs
    if (len(ref.journal_dirs), len(ref.ledger_dirs), len(ref.index_dirs or ())) != \
            (len(dirs.journal_dirs), len(dirs.ledger_dirs), len(dirs.index_dirs)):
        yield Finding(Code.COOKIE_MISMATCH, path=vp,
                      detail=f"the number of dirs: the cookie has {len(ref.journal_dirs)} journal, "
                             f"{len(ref.ledger_dirs)} ledger and {len(ref.index_dirs or ())} index dirs; found "
                             f"{len(dirs.journal_dirs)}, {len(dirs.ledger_dirs)} and {len(dirs.index_dirs)}")
        return
    moved = [(r, f) for r, f in zip(recorded, found) if not _same_dir(r, f)]
    if moved:
        text = "; ".join(f"{r!r} for {f}" for r, f in moved[:4]) + (" ..." if len(moved) > 4 else "")
        yield Finding(Code.COOKIE_DIR_ELSEWHERE, path=vp, detail=text)


def _unreadable(ctx: CheckContext, named: set[str]) -> Iterator[Finding]:
    """Every file below the dirs that cannot be opened for reading, named once here (those in ``named``
    were named by the read that failed on them).

    The hashed index folders are left to the one index walk (ctx.index_inventory): passes 2 and 3
    report what it could not list or read."""
    index_dirs = set(ctx.dirs.effective_index_dirs)
    for d in ctx.dirs.all_dirs:
        cur = os.path.join(d, CURRENT_DIR)
        for dirpath, dirs, files in os.walk(cur):
            if dirpath == cur and d in index_dirs:
                dirs[:] = [x for x in dirs if x in ROCKSDB_DIRS]
            for n in files:
                p = os.path.join(dirpath, n)
                if not os.access(p, os.R_OK):
                    err: int | None
                    try:   # the real reason: a symlink loop or a dangling link is not a permission
                        os.stat(p)
                        err, why = errno.EACCES, "permission denied"
                    except OSError as e:
                        err, why = e.errno, (e.strerror or "cannot read").lower()
                    ctx.unreadable[p] = why
                    if p not in named:
                        yield Finding(Code.FILE_UNREADABLE, path=p, detail=why, errno=err)


def _unsearchable(d: str) -> bool:
    """Whether dir ``d`` refuses to be searched, so that whether it has a current/ is unknown."""
    try:
        os.stat(os.path.join(d, CURRENT_DIR))
    except PermissionError:
        return True
    except OSError:
        pass
    return False


def _in_place_of_current(cur: str) -> str:
    """What is where a dir's ``current`` folder should be (an unmounted disk behind a link, often)."""
    if os.path.islink(cur):
        target = os.readlink(cur)
        try:
            os.stat(cur)
        except OSError as e:
            if e.errno == errno.ELOOP:
                return f"a symbolic link loop ({target})"
            return f"a symbolic link to {target}, which leads nowhere ({(e.strerror or 'error').lower()})"
        return f"a symbolic link to {target}, not to a folder"
    return "a file, not a folder" if os.path.lexists(cur) else "none"


def _symlinks(ctx: CheckContext) -> Iterator[Finding]:
    """Every symlink below the dirs' ``current/``, with where it points: the check reads through
    it; one that leads outside the bookie's dirs is never written through by a repair.

    Below an index dir the one index walk (ctx.index_inventory) has met them already; only the
    folders it does not enter (RocksDB's, by name) are walked here."""
    roots = real_roots(ctx.dirs)
    listed = ctx.dirs.effective_index_dirs if ctx.dirs.storage_kind != "rocksdb" else []
    for d in dict.fromkeys(ctx.dirs.all_dirs):
        cur = os.path.join(d, CURRENT_DIR)
        if d not in listed:
            yield from _walk_links([cur], roots)
            continue
        inv = ctx.index_inventory
        for di, path in inv.symlinks:
            if inv.dirs[di] == d:
                yield _link_finding(path, roots)
        yield from _walk_links([os.path.join(cur, n) for n in ROCKSDB_DIRS
                                if os.path.isdir(os.path.join(cur, n)) and not os.path.islink(os.path.join(cur, n))],
                               roots)


def _link_finding(path: str, roots) -> Finding:
    real = os.path.realpath(path)
    code = Code.SYMLINK_FOLLOWED if is_inside(real, roots) else Code.SYMLINK_OUTSIDE_DIRS
    return Finding(code, path=path, detail=real)


def _walk_links(stack: list[str], roots) -> Iterator[Finding]:
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = list(it)
        except OSError:
            continue   # an unlistable folder is reported where it is walked for content
        for e in entries:
            try:
                if e.is_symlink():
                    yield _link_finding(e.path, roots)
                elif e.is_dir(follow_symlinks=False):
                    stack.append(e.path)
            except OSError:
                continue   # vanished while listed
