"""Where BookKeeper files live: index hierarchy paths (2-level and 4-level) and file names.

specs/paths.md states the rules and why.
"""
from __future__ import annotations

from bkdisk.formats.ids import LedgerId

CURRENT_DIR = "current"
# DbLedgerStorage's two RocksDB databases, folders of each ledger dir's current/.
LOCATIONS_DB, LEDGERS_DB = "locations", "ledgers"
_HEX_DIGITS = "0123456789abcdefABCDEF"
_DROP_HEX = str.maketrans("", "", _HEX_DIGITS)
_U64_LIMIT = 1 << 64
_LONG_LIMIT = 1 << 63   # journal ids are Java longs: Long.parseLong refuses a larger value


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
        return _relpath0(l)
    return f"{(s >> 8) & 0xff:x}/{s & 0xff:x}/{(l >> 8) & 0xff:x}/{l & 0xff:x}/{lid.qualified_name}.idx"


def _relpath0(ledger: int) -> str:
    return f"{(ledger >> 8) & 0xff:x}/{ledger & 0xff:x}/{ledger:x}.idx"


def index_relpaths(scopes: list[int], ledgers: list[int]) -> list[str]:
    """index_relpath of many ledgers given as columns: the same rule, without a LedgerId per scope-0
    ledger (fsck compares every index file's path with it, by the 100k)."""
    return [_relpath0(l) if s == 0 else index_relpath(LedgerId(s, l)) for s, l in zip(scopes, ledgers)]


def parse_index_name(name: str) -> LedgerId | None:
    """The ledger an ``.idx`` file name claims, or None when the name is not an index name.

    A stem of exactly 32 hex digits whose upper 16 are not all zero is a scoped ledger's qualified
    name; any other stem is read as BookKeeper reads it (``_hex_value``) as a scope-0 ledger.
    """
    if not name.endswith(".idx"):
        return None
    stem = name[:-4]
    if len(stem) == 32 and _is_hex(stem):
        v = int(stem, 16)
        if v >> 64:
            return LedgerId(v >> 64, v & (_U64_LIMIT - 1))
    plain = _hex_value(stem)
    return None if plain is None else LedgerId(0, plain)


def parse_index_names(names: list[str]) -> tuple[list[int], list[int], list[bool]]:
    """parse_index_name of many names as columns (scope, ledger, named); a name that is not an index
    name has scope 0, ledger 0 and named False. The same rule, without a LedgerId per name."""
    stems = [x[:-4] if x.endswith(".idx") else "" for x in names]
    if not (all(stems) and not "".join(stems).translate(_DROP_HEX)):   # not all hex: one by one
        lids = [parse_index_name(x) for x in names]
        return ([x.scope if x else 0 for x in lids], [x.ledger if x else 0 for x in lids],
                [x is not None for x in lids])
    vals = [int(x, 16) for x in stems]
    scoped = [len(x) == 32 and v >> 64 > 0 for x, v in zip(stems, vals)]
    named = [s or v < _U64_LIMIT for s, v in zip(scoped, vals)]
    return ([v >> 64 if s else 0 for s, v in zip(scoped, vals)],
            [v & (_U64_LIMIT - 1) if n else 0 for n, v in zip(named, vals)], named)


def _is_hex(text: str) -> bool:
    """One or more ASCII hex digits (str.strip is the fastest such test: index names come by the 100k)."""
    return bool(text) and not text.strip(_HEX_DIGITS)


def _hex_value(stem: str) -> int | None:
    """``Long.parseLong(stem, 16)`` as BookKeeper reads file names, unsigned: one or more hex digits
    of either case, leading zeros allowed, a value below 2^64 (at most 16 significant digits). No
    sign, no ``0x``, no spaces or underscores."""
    if not _is_hex(stem):
        return None
    v = int(stem, 16)
    return v if v < _U64_LIMIT else None


def journal_name(journal_id: int) -> str:
    return f"{journal_id:x}.txn"


def entry_log_name(log_id: int) -> str:
    return f"{log_id:x}.log"


def parse_hex_name(name: str, suffix: str) -> int | None:
    """The hex id of ``<hex><suffix>`` (BookKeeper takes the text before the first '.' and parses it
    with ``Long.parseLong(text, 16)``: either case, leading zeros, at most 16 significant digits)."""
    if not name.endswith(suffix):
        return None
    return _hex_value(name[: -len(suffix)])


def parse_journal_name(name: str) -> int | None:
    """The id of a journal named ``<hex>.txn``: a non-negative Java long (BookKeeper's
    ``listJournalIds`` parses it signed, so 16 digits from 8000000000000000 up are no journal id)."""
    v = parse_hex_name(name, ".txn")
    return v if v is not None and v < _LONG_LIMIT else None


def journal_name_refused(name: str) -> str | None:
    """Why BookKeeper's journal listing throws on ``name``, or None. ``listJournalIds`` takes every
    name ending in ``.txn``, parses the text before its first '.' with ``Long.parseLong(text, 16)`` and
    lets a NumberFormatException escape: the journal thread and the replay at start-up both list the
    journals, so one such name keeps the bookie from starting."""
    if not name.endswith(".txn"):
        return None
    stem = name.split(".")[0]
    digits = stem[1:] if stem[:1] in ("+", "-") else stem
    if not _is_hex(digits):
        return f"'{stem}' is not a hex number"
    v = int(digits, 16)
    if -_LONG_LIMIT <= (-v if stem[0] == "-" else v) < _LONG_LIMIT:
        return None
    return f"'{stem}' is past the largest journal id {_LONG_LIMIT - 1:x}"


def parse_entry_log_name(name: str) -> int | None:
    return parse_hex_name(name, ".log")
