"""Whether two paths name one file: the check reports an index linked twice as one, and a repair never
moves a file onto itself."""
from __future__ import annotations

import os


def same_inode(a: str, b: str) -> bool:
    try:
        sa, sb = os.stat(a, follow_symlinks=False), os.stat(b, follow_symlinks=False)
    except OSError:
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)
