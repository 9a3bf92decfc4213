"""Every fsck finding code, its severity, its pass and its one-line text, in one table.

specs/fsck.md documents these codes; a test checks that the page and this table agree. fsck/codes.py
declares each code as a member of the ``Code`` enum, written from this table by ``codes_module``
(``python -m bkdisk.fsck.problems > fsck/codes.py``); a test checks that the file is what the table gives.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass


class Severity(enum.StrEnum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


# What a repair does about a finding (fsck/repair/repairs.py carries each out); None: nothing it can do.
MOVE_INDEX = "move-index"            # a misplaced .idx to the path its ledger id dictates
FINISH_MOVE = "finish-move"          # drop the old name of an index moved half way (two names, one inode)
REBUILD_INDEX = "rebuild-index"      # a .idx rebuilt from the entry logs
CUT_JOURNAL = "cut-journal"          # a torn journal tail zero-filled after the last whole record
REMOVE_TEMP = "remove-temp"          # a temp file of bookie-fsck's own, left by a killed repair
REPAIR_KINDS = (MOVE_INDEX, FINISH_MOVE, REBUILD_INDEX, CUT_JOURNAL, REMOVE_TEMP)


@dataclass(frozen=True)
class Problem:
    code: str
    severity: Severity
    pass_no: int
    text: str          # a format string over the finding's fields; says what was expected and found
    repair: str | None = None   # one of REPAIR_KINDS

    @property
    def repairable(self) -> bool:
        return self.repair is not None


PASS_NAMES = {
    1: "layout and cookies",
    2: "index hierarchy",
    3: "index files",
    4: "entry logs",
    5: "index to entry-log cross-check",
    6: "journals",
    7: "ledger metadata",
}

# DbLedgerStorage keeps its index in RocksDB: passes 2, 3 and 5 check the databases in the places of
# the .idx checks.
DB_INDEX_PASS_NAMES = {
    2: "RocksDB index databases",
    3: "ledgers index",
    5: "locations to entry-log cross-check",
}


def pass_name(number: int, storage_kind: str) -> str:
    """What pass ``number`` checks on a bookie of ``storage_kind`` ("index-files" or "rocksdb")."""
    if storage_kind == "rocksdb":
        return DB_INDEX_PASS_NAMES.get(number, PASS_NAMES[number])
    return PASS_NAMES[number]


E, W, I = Severity.ERROR, Severity.WARNING, Severity.INFO

_TABLE = [
    # pass 1: layout and cookies
    Problem("LAYOUT_NO_CURRENT", E, 1, "expected a 'current' folder in {path}, found {detail}"),
    Problem("COOKIE_MISSING", E, 1, "expected a cookie at {path}, found none"),
    Problem("COOKIE_UNREADABLE", E, 1, "expected a valid cookie: {detail}"),
    Problem("COOKIE_MISMATCH", E, 1, "expected every dir's cookie to agree on {detail}"),
    Problem("BOOKIE_ID_INVALID", E, 1, "expected a valid BookieId (BP-41): {detail}"),
    Problem("BOOKIE_ID_NONSTANDARD", W, 1,
            "bookie id {detail} is valid for BookKeeper but outside BP-41's letters, digits, ':', '-', '.'"),
    Problem("COOKIE_DIR_ELSEWHERE", W, 1,
            "cookie records {detail}; the dirs were found elsewhere (moved or copied disk)"),
    Problem("COOKIE_DIR_CONF_MISMATCH", E, 1, "expected the cookie's dirs to match the configuration: {detail}"),
    Problem("FILE_UNREADABLE", E, 1, "expected a readable file: {detail}"),
    Problem("SYMLINK_FOLLOWED", I, 1,
            "{path} is a symlink to {detail}, inside the bookie's dirs; the check reads through it"),
    Problem("SYMLINK_OUTSIDE_DIRS", W, 1,
            "{path} is a symlink to {detail}, outside the bookie's dirs: the check reads through it, repair never "
            "writes through it"),
    # pass 2: index hierarchy
    Problem("INDEX_MISPLACED", E, 2,
            "expected ledger {ledger_name}'s index at {detail}, found it at {path}", MOVE_INDEX),
    Problem("INDEX_SCOPED_IN_2LEVEL", E, 2,
            "expected scoped ledger {ledger_name}'s index in the 4-level hierarchy at {detail}, found "
            "it at {path}", MOVE_INDEX),
    Problem("INDEX_DUPLICATE", E, 2, "expected one index for ledger {ledger_name}, found another at {detail}"),
    Problem("INDEX_BAD_NAME", W, 2,
            "expected an index file named '<hex ledger id>.idx' or '<32 hex digits>.idx', found {path}"),
    Problem("INDEX_RELOCATION_LEFTOVER", W, 2,
            "ledger {ledger_name}'s index is still named {path} after an interrupted relocation; "
            "BookKeeper renames it to {detail} at startup", MOVE_INDEX),
    Problem("INDEX_MOVE_UNFINISHED", W, 2,
            "{path} and {detail} are two names of one index file (a move interrupted between link and "
            "unlink); repair removes the misplaced name", FINISH_MOVE),
    Problem("STALE_TEMP_FILE", W, 2,
            "a temp file left by an interrupted bookie-fsck repair: {path} ({detail})", REMOVE_TEMP),
    Problem("STRAY_FILE", W, 2, "expected only index files in the hashed folders, found {path} ({detail})"),
    # pass 3: index files
    Problem("INDEX_HEADER_BAD", E, 3, "expected an index header: {detail}", REBUILD_INDEX),
    Problem("INDEX_TRUNCATED", E, 3, "expected whole 8-byte location slots, found {detail}", REBUILD_INDEX),
    Problem("INDEX_MASTER_KEY_MISMATCH", E, 3, "expected the master key the journal recorded ({detail})"),
    Problem("JOURNAL_MASTER_KEY_BAD", W, 3,
            "expected the journal's ledger-key record to hold ledger {ledger_name}'s master key ({detail})"),
    Problem("INDEX_NOT_FENCED", E, 3,
            "expected ledger {ledger_name} fenced (the journal has a fence record before lastMark), "
            "found not fenced", REBUILD_INDEX),
    Problem("INDEX_EXPLICIT_LAC_BAD", E, 3, "expected an explicit-LAC body for ledger {ledger_name}: {detail}"),
    Problem("INDEX_LOCATION_MISSING_LOG", E, 3,
            "expected entry log {detail} for ledger {ledger_name} entry {entry}, found no such log", REBUILD_INDEX),
    Problem("INDEX_LOCATION_OUT_OF_RANGE", E, 3,
            "expected a location inside entry log {detail} for ledger {ledger_name} entry {entry}", REBUILD_INDEX),
    # pass 4: entry logs
    Problem("LOG_HEADER_BAD", E, 4, "expected an entry log header: {detail}"),
    Problem("LOG_FRAMING_BROKEN", E, 4, "expected a framed entry at this offset, found {detail}"),
    Problem("LOG_TRUNCATED", E, 4, "expected the entry to end within the file, found {detail}"),
    Problem("LOG_TORN_TAIL", W, 4,
            "the current entry log ends inside an entry no index points at, which the journal holds for replay (a "
            "write cut by a crash): {detail}"),
    Problem("LEDGERS_MAP_BAD", E, 4, "expected a readable ledgers map: {detail}"),
    Problem("LEDGERS_MAP_MISMATCH", E, 4, "expected the ledgers map to match the entries: {detail}"),
    Problem("DIGEST_MISMATCH", E, 4,
            "expected a valid {detail} digest for ledger {ledger_name} entry {entry}, found a mismatch"),
    Problem("DIGEST_NOT_VERIFIED", I, 4, "digests of ledger {ledger_name} not verified: {detail}"),
    Problem("DIGEST_SNIFFED", I, 4, "digest types not known from metadata; the entries verify as {detail}"),
    Problem("LOG_MISSING", E, 4, "expected entry log {detail}"),
    Problem("LOG_UNLISTED", W, 4, "expected entry log {detail}"),
    Problem("LOG_ID_DUPLICATE", E, 4,
            "expected entry log id {detail}"),
    Problem("LASTID_BAD", W, 4, "expected {path} to hold the hex id of the newest entry log: {detail}"),
    # pass 5: cross-check
    Problem("INDEX_LOCATION_WRONG", E, 5, "expected ledger {ledger_name} entry {entry} at {detail}", REBUILD_INDEX),
    Problem("ENTRY_NOT_INDEXED", E, 5,
            "expected ledger {ledger_name} entry {entry} in its index, found it only in the entry "
            "log ({detail})", REBUILD_INDEX),
    Problem("LEDGER_NOT_INDEXED", E, 5,
            "expected an index for ledger {ledger_name}, which its metadata lists and which has "
            "{detail} in the entry logs", REBUILD_INDEX),
    Problem("LEDGER_INDEX_MISSING", W, 5,
            "ledger {ledger_name} has {detail} in the entry logs and a ledger key in the journal but no index: a "
            "lost index, or a ledger deleted since (give --metadata-dir to tell; with metadata a lost index is "
            "repaired)"),
    Problem("GARBAGE_ENTRIES", I, 5, "{detail} (collectable by garbage collection)"),
    # pass 6: journals
    Problem("JOURNAL_NAME_BAD", E, 6,
            "expected a journal id before '.txn' in {path}: {detail}; BookKeeper's journal listing throws on "
            "the name, and the bookie does not start"),
    Problem("JOURNAL_HEADER_BAD", E, 6, "expected a journal header 'BKLG' + version: {detail}"),
    Problem("JOURNAL_EMPTY", I, 6,
            "{path} is empty: created, and nothing reached the disk (a crash right after it was opened); "
            "BookKeeper finds no record in it"),
    Problem("JOURNAL_EMPTY_REPLAYED", W, 6,
            "{path} is empty, after lastMark and before a newer journal: created by a bookie that stopped before "
            "writing to it, or truncated since (a restart replays nothing from it)"),
    Problem("JOURNAL_RECORD_CORRUPT", E, 6, "expected a valid journal record: {detail}"),
    Problem("JOURNAL_TORN_TAIL", E, 6, "expected the journal to end cleanly, found a torn tail: {detail}", CUT_JOURNAL),
    Problem("JOURNAL_OLD_TORN_TAIL", W, 6,
            "a journal wholly before lastMark ends in a torn record (a crash while it was current; BookKeeper never "
            "replays it again): {detail}"),
    Problem("JOURNAL_TAIL_GARBAGE", W, 6, "expected zeros after the journal's end, found {detail}"),
    Problem("JOURNAL_RECORDS_NOT_REPLAYED", E, 6,
            "expected every record a restart replays before the zero length that ends the journal: {detail}"),
    Problem("JOURNAL_REPLAYED_KEYS_DIFFER", E, 6,
            "expected one master key in ledger {ledger_name}'s ledger-key records after lastMark, found {detail}: a "
            "restart replays them, the first makes the ledger's handle, the handle refuses the next, and the "
            "start fails"),
    Problem("JOURNAL_REPLAYED_KEY_BAD", E, 6,
            "expected ledger {ledger_name}'s ledger-key record after lastMark to hold its master key, found "
            "{detail}"),
    Problem("JOURNAL_REPLAYED_LAC_BAD", E, 6,
            "expected ledger {ledger_name}'s explicit-LAC record after lastMark to verify, found a body whose digest "
            "does not ({detail}): a restart replays it into storage, and a client reading the ledger's LAC from "
            "this bookie gets it"),
    Problem("LASTMARK_BAD", E, 6, "expected a 16-byte lastMark (journal id, offset), found {detail}"),
    Problem("LASTMARK_TRAILING_BYTES", W, 6, "expected a 16-byte lastMark, found {detail}"),
    Problem("LASTMARK_MISSING_JOURNAL", E, 6,
            "expected journal {detail} named by lastMark, found none (the bookie will not start)"),
    Problem("LASTMARK_PAST_END", E, 6, "expected lastMark inside its journal: {detail}"),
    Problem("LASTMARK_MID_RECORD", E, 6,
            "expected lastMark at a record's start (a restart reads a record length there): {detail}"),
    Problem("LASTMARK_DISAGREE", W, 6, "expected the same lastMark in every ledger dir: {detail}"),
    Problem("LASTMARK_MISSING_IN_DIR", W, 6,
            "expected a lastMark file in {path} as in the other ledger dirs: {detail}"),
    Problem("LASTMARK_MISSING", W, 6,
            "expected a lastMark file BookKeeper can read in {path}; a restart replays every journal"),
    Problem("LASTMARK_NOT_READ", I, 6, "{path} is a lastMark file BookKeeper does not read: {detail}"),
    Problem("REPLAY_PENDING", I, 6, "{detail}"),
    Problem("REPLAY_NOT_IN_STORAGE", W, 6, "{detail}"),
    Problem("REPLAY_LEDGER_UNKNOWN", W, 6, "{detail}"),
    Problem("REPLAY_ENTRY_DROPPED", E, 6, "expected a restart to replay the entry into storage: {detail}"),
    # DbLedgerStorage's RocksDB indexes (fsck/dbindex.py), checked in the places of passes 2, 3 and 5
    Problem("DBINDEX_UNREADABLE", E, 2, "expected a readable RocksDB index at {path}: {detail}"),
    Problem("DBINDEX_BLOCK_CHECKSUM", E, 2, "expected an intact SST block at {path} offset {offset}: {detail}"),
    Problem("DBINDEX_SST_MISSING", E, 2, "expected the SST the MANIFEST {path} names: {detail}"),
    Problem("DBINDEX_WAL_TORN", W, 2, "WAL {path} ends in a torn record at {offset}: {detail}"),
    Problem("DBINDEX_LEDGER_UNKNOWN", E, 3, "expected ledger {ledger_name} in the ledgers index, found {detail}"),
    Problem("DBINDEX_LEDGER_MISSING", E, 3,
            "expected ledger {ledger_name} (master key in the journal) in the ledgers index, found none"),
    Problem("DBINDEX_MASTER_KEY_MISMATCH", E, 3, "expected the master key the journal recorded ({detail})"),
    Problem("DBINDEX_NOT_FENCED", E, 3,
            "expected ledger {ledger_name} fenced (the journal has a fence record before lastMark), found not fenced"),
    Problem("JOURNAL_EXPLICIT_LAC_BAD", W, 3,
            "expected the journal's explicit-LAC record to hold ledger {ledger_name}'s LAC ({detail})"),
    Problem("DBINDEX_EXPLICIT_LAC_BAD", E, 3, "expected an explicit-LAC body for ledger {ledger_name}: {detail}"),
    Problem("DBINDEX_EXPLICIT_LAC_MISMATCH", E, 3,
            "expected ledger {ledger_name}'s explicit LAC as the journal recorded it: {detail}"),
    Problem("DBINDEX_LOCATION_MISSING_LOG", E, 5,
            "expected entry log {detail} for ledger {ledger_name} entry {entry}, found no such log"),
    Problem("DBINDEX_LOCATION_WRONG", E, 5, "expected ledger {ledger_name} entry {entry} at {detail}"),
    Problem("DBINDEX_ENTRY_NOT_INDEXED", E, 5,
            "expected a location for ledger {ledger_name} entry {entry}, stored at {path} offset {offset} and not "
            "awaiting journal replay; found none (reads of it fail){detail}"),
    Problem("DBINDEX_ENTRY_UNINDEXED", I, 5,
            "entry {entry} of ledger {ledger_name} at {path} offset {offset} has no location ({detail})"),
    # pass 7: metadata
    Problem("METADATA_SKIPPED", I, 7, "{detail}"),
    Problem("ORPHAN_LEDGER", W, 7, "ledger {ledger_name} is on disk but has no metadata ({detail})"),
    Problem("METADATA_UNLOADABLE", W, 7,
            "ledger {ledger_name}'s metadata cannot be loaded by BookKeeper's client: {detail} (no entry of it is "
            "checked against it)"),
    Problem("LEDGER_OVER_REPLICATED", I, 7,
            "ledger {ledger_name} is on disk but closed with this bookie in none of its ensembles ({detail})"),
    Problem("ENTRY_MISSING", E, 7,
            "expected ledger {ledger_name} entry {entry} on this bookie (per its ensemble), found none{detail}"),
    Problem("ENTRIES_MISSING", E, 7,
            "expected {detail} of ledger {ledger_name} on this bookie (per its ensembles), found none"),
    Problem("ENTRIES_UNCHECKED", W, 7,
            "expected to compare the entries of every ledger placed on this bookie with what it holds, {detail}"),
]
PROBLEMS: dict[str, Problem] = {p.code: p for p in _TABLE}
assert len(PROBLEMS) == len(_TABLE), "duplicate fsck problem code"


def codes_module() -> str:
    """The text of fsck/codes.py: one ``Code`` member per row of the table, in the table's order."""
    members = "\n".join(f'    {code} = "{code}"' for code in PROBLEMS)
    return f'''"""Every fsck finding code as a member of one enum, written from the problem table (fsck/problems.py).

Generated by ``python -m bkdisk.fsck.problems > fsck/codes.py``; a test fails when this file and the table
disagree. Passes name codes as ``Code.INDEX_MISPLACED``: a misspelt code is a type error for mypy and
an AttributeError when the line runs, never a finding nobody can look up. Each member is its code's
text (a str), so reports and JSON show the code itself.
"""
from __future__ import annotations

import enum


class Code(enum.StrEnum):
{members}
'''


if __name__ == "__main__":
    print(codes_module(), end="")
