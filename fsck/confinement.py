"""Which paths a repair may write: only those whose real path lies inside the bookie's own dirs.

The check reads through symlinks; a repair never creates, moves or replaces a file whose real path
(every symlink on the way resolved) is outside the dirs the bookie was configured with.
"""
from __future__ import annotations

import os

from bkdisk.bookie.layout import BookieDirs


def real_roots(dirs: BookieDirs) -> list[str]:
    """The real path of every configured dir, each ending in a separator."""
    return sorted({os.path.realpath(d).rstrip(os.sep) + os.sep for d in dirs.all_dirs})


def is_inside(real: str, roots: list[str]) -> bool:
    real = real.rstrip(os.sep) + os.sep
    return any(real.startswith(r) for r in roots)


def first_link(path: str, dirs: BookieDirs) -> str | None:
    """The first symlink on ``path`` below the configured dir that holds it (as written), else None."""
    path = os.path.abspath(path)
    for d in sorted(dirs.all_dirs, key=len, reverse=True):
        d = os.path.abspath(d)
        if path == d or path.startswith(d.rstrip(os.sep) + os.sep):
            at = d
            for part in os.path.relpath(path, d).split(os.sep):
                at = os.path.join(at, part)
                if os.path.islink(at):
                    return at
            return None
    return None


def escape(path: str, dirs: BookieDirs) -> str | None:
    """Why writing ``path`` (a file to create, replace or remove) would leave the bookie's dirs, or
    None when it would not: the link that leads outside and where it points."""
    roots = real_roots(dirs)
    if is_inside(os.path.realpath(path), roots):
        return None
    link = first_link(path, dirs)
    if link is not None:
        return f"{link} is a symlink to {os.path.realpath(link)}, outside the bookie's dirs"
    return f"{path} resolves to {os.path.realpath(path)}, outside the bookie's dirs"
