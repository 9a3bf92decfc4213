"""Where BookKeeper files live: index hierarchy paths (2-level and 4-level) and file names.

specs/paths.md states the rules and why.
"""
from __future__ import annotations

import re

from formats.errors import FormatError
from formats.ids import LedgerId

CURRENT_DIR = "current"
_HEX = re.compile(r"[0-9a-f]{1,16}")
_QNAME = re.compile(r"[0-9a-f]{32}")


def index_relpath(lid: LedgerId) -> str:
    """Path of a ledger's ``.idx`` below ``<indexDir>/current``.

    Scope 0: BookKeeper's IndexPersistenceMgr rule, bits 8-15 then bits 0-7 of the ledger id,
    lowercase hex without padding, file ``Long.toHexString(id).idx``.
    Scope != 0: four one-byte levels (bits 8-15 and 0-7 of the scope, then of the ledger), so no
    directory holds more than 256 entries at any level, and the file is named by the 32-digit
    qualified name, which never collides with a scope-0 name (at most 16 digits).
    """
    s, l = lid
    if s == 0:
        return f"{(l >> 8) & 0xff:x}/{l & 0xff:x}/{l:x}.idx"
    return f"{(s >> 8) & 0xff:x}/{s & 0xff:x}/{(l >> 8) & 0xff:x}/{l & 0xff:x}/{lid.qualified_name}.idx"


def parse_index_name(name: str) -> LedgerId | None:
    """The ledger an ``.idx`` file name claims, or None when the name is not an index name."""
    if not name.endswith(".idx"):
        return None
    stem = name[:-4]
    if _QNAME.fullmatch(stem):
        lid = LedgerId.from_qualified_name(stem)
        return lid if lid.scope != 0 else None  # a scope-0 ledger never uses the 32-digit name
    v = _canonical_hex(stem)
    return None if v is None else LedgerId(0, v)


def _canonical_hex(stem: str) -> int | None:
    """Long.toHexString's form only: lowercase, no leading zeros (RocksDB's 000009.log is not ours)."""
    if not _HEX.fullmatch(stem):
        return None
    v = int(stem, 16)
    return v if f"{v:x}" == stem else None


def journal_name(journal_id: int) -> str:
    return f"{journal_id:x}.txn"


def entry_log_name(log_id: int) -> str:
    return f"{log_id:x}.log"


def parse_hex_name(name: str, suffix: str) -> int | None:
    """The hex id of ``<hex><suffix>`` (BookKeeper takes the text before the first '.')."""
    if not name.endswith(suffix):
        return None
    return _canonical_hex(name[: -len(suffix)])


def parse_journal_name(name: str) -> int | None:
    return parse_hex_name(name, ".txn")


def parse_entry_log_name(name: str) -> int | None:
    return parse_hex_name(name, ".log")


def require_hex_name(name: str, suffix: str) -> int:
    v = parse_hex_name(name, suffix)
    if v is None:
        raise FormatError(f"a file name '<lowercase hex>{suffix}'", repr(name))
    return v
