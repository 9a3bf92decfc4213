"""``human_bytes``: a byte count in human units (B, KiB, MiB, GiB, TiB), the one every report prints.

Here, at the bottom, because every report uses it: fsck's, ``bkdisk space``'s and the audit's text and
HTML reports."""
from __future__ import annotations

UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def human_bytes(n: int) -> str:
    """``n`` bytes: whole bytes below 1 KiB, else one decimal in the largest unit under 1024 (TiB at most)."""
    size = float(n)
    for unit in UNITS:
        if abs(size) < 1024 or unit == UNITS[-1]:
            return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"
