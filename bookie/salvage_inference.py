"""A ledger's metadata inferred from the copies of its entries found on bookie disks: ensembles and
quorums from where the copies are, digest type from their digest length, password from the master
keys, last entry and length as BookKeeper's recovery would close the ledger; each field with how sure
it is (certain / inferred / assumed / unknown) and why. Pure: rows in, one ``Salvaged`` out.

The rules, with the BookKeeper code each follows, are in specs/salvage.md.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from bkdisk.bookie.password_candidates import match_kept_keys
from bkdisk.bookie.salvage_placement import (
    ASSUMED,
    CERTAIN,
    INFERRED,
    UNKNOWN,
    ensemble_at,
    infer_placement,
    write_set,
)
from bkdisk.formats.digests import DIGEST_LENGTH, DigestType
from bkdisk.formats.entry import ENTRY_V1_HEADER_SIZE, ENTRY_V2_HEADER_SIZE
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.ledger_metadata import LedgerMetadata

DIGEST_OF_LENGTH = {n: t for t, n in DIGEST_LENGTH.items()}
HEADER_SIZE = {1: ENTRY_V1_HEADER_SIZE, 2: ENTRY_V2_HEADER_SIZE}


@dataclass(frozen=True)
class Copy:
    """One copy of an entry on one bookie, as the disk scan gives it."""

    bookie: str
    entry: int
    intact: bool           # its digest did not fail (an unverifiable DUMMY/HMAC copy counts intact)
    verified: bool         # its digest was checked and matched
    lac: int               # the LAC the entry carries
    length: int            # the ledger length after this entry (the entry's cumulative length field)
    size: int              # the stored entry: header, digest, payload
    entry_format: int = 1
    where: tuple | None = None   # where the copy's bytes are (for an HmacCheck); opaque here
    payload: str | None = None   # the payload's hash, when the scan gave one
    served: bool = True          # its bookie's index holds it (a copy no index holds is not read by BookKeeper)


# Verifies copies' HMAC-SHA1 digests with a password: (copies verified, copies that failed); a copy
# it cannot read counts in neither.
HmacCheck = Callable[[bytes, Sequence[Copy]], tuple[int, int]]
HMAC_COPIES_CHECKED = 3


@dataclass(frozen=True)
class BookieLedger:
    """What one bookie keeps of a ledger beside its entries: the master key (.idx header, the ledgers
    index of DbLedgerStorage, the journal's key records) and its explicit LAC."""

    bookie: str
    master_key: bytes | None = None
    explicit_lac: int | None = None


@dataclass(frozen=True)
class Inferred:
    value: object
    confidence: str
    why: str


@dataclass
class Salvaged:
    ledger: LedgerId
    ensemble_size: Inferred
    write_quorum: Inferred
    ack_quorum: Inferred
    ensembles: Inferred          # ((first entry, (bookie or None, ...)), ...)
    positions: Inferred          # per ensemble, per position: certain/inferred/assumed/unknown
    digest_type: Inferred
    password: Inferred           # bytes, only when its master key matched
    master_key: bytes | None
    last_entry_id: Inferred
    length: Inferred
    state: Inferred
    lost_entries: list[int] = field(default_factory=list)          # no intact copy, at or before the last entry
    dropped_entries: list[int] = field(default_factory=list)       # copies after the last entry recovery reaches
    under_replicated: list[int] = field(default_factory=list)      # fewer intact copies than the write quorum
    metadata: LedgerMetadata | None = None
    no_metadata_because: str | None = None



def _digest(copies: Sequence[Copy]) -> Inferred:
    """From each copy's digest length: stored size - header - payload (the difference of cumulative
    lengths with the entry before), confirmed by verified copies."""
    length_of: dict[int, int] = {}
    for c in copies:
        if c.intact:
            length_of.setdefault(c.entry, c.length)
    votes: dict[int, int] = {}
    for c in copies:
        before = 0 if c.entry == 0 else length_of.get(c.entry - 1)
        if not c.intact or before is None:
            continue
        n = c.size - HEADER_SIZE.get(c.entry_format, ENTRY_V1_HEADER_SIZE) - (c.length - before)
        votes[n] = votes.get(n, 0) + 1
    known = {n: v for n, v in votes.items() if n in DIGEST_OF_LENGTH}
    if not known:
        return Inferred(None, UNKNOWN, "no intact copy whose entry before it has one: the digest length is unknown"
                        if not votes else f"digest lengths {sorted(votes)} are no digest type's")
    n = max(known, key=lambda k: known[k])
    t = DIGEST_OF_LENGTH[n]
    other = sum(votes.values()) - known[n]
    verified = sum(c.verified for c in copies)
    note = f"; {other} copies disagree" if other else ""
    if verified and t in (DigestType.CRC32, DigestType.CRC32C):
        return Inferred(t.name, CERTAIN if not other else INFERRED,
                        f"digest length {n} on {known[n]} copies; {verified} copies verified as {t.name}{note}")
    if t == DigestType.DUMMY:
        return Inferred(t.name, INFERRED,
                        f"digest length 0 on {known[n]} copies (DUMMY carries nothing to verify){note}")
    return Inferred(t.name, INFERRED, f"digest length {n} on {known[n]} copies (not verified){note}")


def _password(keys: Sequence[BookieLedger], candidates: Sequence[bytes]) -> tuple[Inferred, bytes | None]:
    m = match_kept_keys([(k.bookie, k.master_key) for k in keys], candidates)
    return Inferred(m.password, CERTAIN if m.password is not None else UNKNOWN, m.why), m.master_key


def _close(copies: Sequence[Copy], keys: Sequence[BookieLedger], last_first: int
           ) -> tuple[int, int | None, list[int], list[int], str, str | None]:
    """(last entry, its length or None, lost entries (the first LOST_LISTED), dropped entries, why, why not
    to trust it), as LedgerRecoveryOp closes the ledger: from max(highest LAC any intact copy or explicit
    LAC carries, first entry of the last ensemble - 1), forward while the next entry has an intact copy.

    An entry's LAC lies below its own id (the writer's LAC when it sent it): a higher one is no LAC. An
    explicit LAC past every entry any disk holds names entries no disk given has (a bookie's disk not
    given) or is damaged: it carries recovery no further than those entries, and the ledger is not closed
    (the last value says why)."""
    intact: dict[int, Copy] = {}
    for c in copies:
        if c.intact:
            intact.setdefault(c.entry, c)
    highest = max((c.entry for c in copies), default=-1)
    explicit = [(k.explicit_lac, k.bookie) for k in keys if k.explicit_lac is not None]
    beyond = max((x for x in explicit if x[0] > highest), default=None)
    lacs = [c.lac for c in intact.values() if c.lac < c.entry] + [min(x, highest) for x, _b in explicit]
    lac = max(lacs, default=-1)
    start = max(lac, last_first - 1)
    last = start
    while last + 1 in intact:
        last += 1
    lost = _missing(sorted(e for e in intact if e <= last), last)
    dropped = sorted({c.entry for c in copies if c.entry > last})
    why = (f"recovery reads on from max(LAC {lac}, first entry of the last ensemble {last_first} - 1) = {start} "
           f"while the next entry has an intact copy: closes at {last}")
    if dropped:
        why += f"; entry {last + 1} has no intact copy, so {len(dropped)} later entries found are left out"
    length = 0 if last < 0 else intact[last].length if last in intact else None
    distrust = None if beyond is None else (
        f"{beyond[1]}'s explicit LAC {beyond[0]} is past every entry found (the highest is {highest}): entries up "
        "to it were acknowledged and no disk given holds them (a bookie's disk was not given), or that LAC is "
        "damaged")
    return last, length, lost, dropped, why, distrust


LOST_LISTED = 1 << 20   # lost entry ids a row lists at most (a recovery point past a damaged LAC could name 2^63)


def _missing(held: list[int], last: int) -> list[int]:
    """The ids 0..``last`` not in ``held`` (sorted, distinct), the first LOST_LISTED of them."""
    out: list[int] = []
    nxt = 0
    for e in held + [last + 1]:
        out.extend(range(nxt, min(e, nxt + LOST_LISTED - len(out))))
        if len(out) >= LOST_LISTED:
            break
        nxt = e + 1
    return out


def divergent(copies: Sequence[Copy]) -> dict[int, str]:
    """Entry -> what its intact copies disagree on (the cumulative length, the stored size, the payload).
    What the writer sent is the payload and the ledger length after it: recovery and re-replication send
    those again as read, with the LAC of the handle that sends them and a digest over that, so the LAC
    is not compared; the stored size is compared between copies of one entry format only, and payload
    hashes on their common prefix (a scrub's light walk keeps a short one). Two intact copies (a DUMMY
    one has no digest; a CRC can be recomputed) that differ leave unknown which the writer wrote."""
    seen: dict[int, Copy] = {}
    out: dict[int, str] = {}
    for c in copies:
        if not c.intact:
            continue
        first = seen.setdefault(c.entry, c)
        if first is c or c.entry in out:
            continue
        what = [name for name, differ in (("length", first.length != c.length),
                                          ("size", first.entry_format == c.entry_format and first.size != c.size),
                                          ("payload", _hashes_differ(first.payload, c.payload)))
                if differ]
        if what:
            out[c.entry] = f"{'/'.join(what)} ({first.bookie} and {c.bookie})"
    return out


def _hashes_differ(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return False
    n = min(len(a), len(b))
    return a[:n] != b[:n]


def _confirm_hmac(digest: Inferred, password: Inferred, copies: Sequence[Copy], check: HmacCheck | None
                  ) -> tuple[Inferred, Inferred]:
    """An HMAC ledger whose password matched its master key: its digests verified with that password
    (MacDigestManager), which makes the digest type certain and confirms the password."""
    if check is None or digest.value != DigestType.HMAC.name or not isinstance(password.value, bytes):
        return digest, password
    ok, bad = check(password.value, [c for c in copies if c.intact][:HMAC_COPIES_CHECKED])
    if bad:
        return (Inferred(digest.value, INFERRED, f"{digest.why}; {bad} copies fail HMAC with the matched password"),
                password)
    if not ok:
        return digest, password
    return (Inferred(digest.value, CERTAIN, f"{digest.why}; {ok} copies verified as HMAC with the password"),
            Inferred(password.value, CERTAIN, f"{password.why}; confirmed by the HMAC of {ok} copies"))


def salvage_ledger(ledger: LedgerId, copies: Sequence[Copy], keys: Sequence[BookieLedger],
                   candidates: Sequence[bytes] = (), ack_quorum: int | None = None,
                   custom_metadata: tuple[tuple[str, bytes], ...] = (), hmac_check: HmacCheck | None = None
                   ) -> Salvaged:
    """Everything the disks say of ``ledger``, and its metadata (format 3, CLOSED) when every field a
    BookKeeper client needs is known: each ensemble position, the digest type and a verified password."""
    holders: dict[int, set[str]] = {}
    for c in copies:
        holders.setdefault(c.entry, set()).add(c.bookie)
    pl = infer_placement(holders)
    unknown = Inferred(None, UNKNOWN, "no copy of any entry was found")
    digest = _digest(copies)
    password, key = _password(keys, candidates)
    digest, password = _confirm_hmac(digest, password, copies, hmac_check)
    state = Inferred("CLOSED", INFERRED, "a lost metadata store has no live writer: closed as recovery closes it "
                     "(ReadOnlyLedgerHandle.closeRecovered)")
    if pl is None:
        return Salvaged(ledger, unknown, unknown, unknown, unknown, unknown, digest, password, key, unknown, unknown,
                        state, no_metadata_because="no copy of any entry was found")
    why_place = "; ".join(pl.why)
    e_size = Inferred(pl.ensemble_size, INFERRED, "the smallest ensemble size under which BookKeeper's placement "
                      "puts every copy found with the fewest ensemble changes")
    wq = Inferred(pl.write_quorum, INFERRED, "the most bookies holding one entry")
    qa_value = pl.write_quorum if ack_quorum is None else ack_quorum
    if ack_quorum is not None:
        qa = Inferred(ack_quorum, CERTAIN, "given (--ack-quorum)")
    else:
        qa = Inferred(qa_value, ASSUMED, "not on disk: the write quorum, as BookKeeper's createLedger "
                      "without an ack quorum takes it")
    flat = [c for cs in pl.confidence for c in cs]
    worst = UNKNOWN if UNKNOWN in flat else ASSUMED if ASSUMED in flat else INFERRED if INFERRED in flat else CERTAIN
    ens_why = why_place or "every position is pinned by the copies it holds"
    if ASSUMED in flat:
        ens_why += ("; positions marked assumed could hold their bookies in another order (every entry goes to "
                    "each of them): one order is chosen")
    ensembles = Inferred(tuple((f, tuple(e)) for f, e in pl.ensembles), worst, ens_why)
    positions = Inferred(tuple(tuple(c) for c in pl.confidence), worst, ens_why)
    last, length, lost, dropped, close_why, distrust = _close(copies, keys, pl.ensembles[-1][0])
    last_f = Inferred(last, INFERRED, close_why)
    length_f = Inferred(length, INFERRED if length is not None else UNKNOWN,
                        f"the cumulative length of entry {last}" if length is not None
                        else f"entry {last} has no intact copy to give its cumulative length")
    kept = [(f, e) for f, e in pl.ensembles if f <= max(last, 0)]
    under = []
    intact_on: dict[int, set[str]] = {}
    for c in copies:
        if c.intact and c.served and c.entry <= last:
            intact_on.setdefault(c.entry, set()).add(c.bookie)
    for e in sorted(intact_on):   # (an entry with no intact copy is lost, not under-replicated)
        ws = [ensemble_at(kept, e)[p] for p in write_set(e, pl.ensemble_size, pl.write_quorum)]
        n = sum(1 for b in set(ws) if b in intact_on[e])
        if 0 < n < pl.write_quorum:
            under.append(e)
    s = Salvaged(ledger, e_size, wq, qa, ensembles, positions, digest, password, key, last_f, length_f, state,
                 lost, dropped, under)
    pw = password.value
    split = divergent(copies)
    if split:
        first = min(split)
        s.no_metadata_because = (f"intact copies of {len(split)} entr{'y' if len(split) == 1 else 'ies'} disagree, "
                                 f"which was written is unknown: entry {first} on its {split[first]}")
    elif distrust is not None:
        s.no_metadata_because = distrust
    elif damaged := sorted({c.bookie for c in copies if c.entry == last + 1}):
        # (LedgerRecoveryOp closes on "no such entry" only: any other read error fails the recovery)
        s.no_metadata_because = (f"entry {last + 1} has copies ({', '.join(damaged)}) and none is intact: "
                                 "BookKeeper's recovery fails on that read, it does not close the ledger before it "
                                 f"({len(dropped)} entr{'y' if len(dropped) == 1 else 'ies'} from it on would be "
                                 "left out)")
    elif unserved := sorted({c.entry for c in copies if c.intact and c.entry <= last} - set(intact_on)):
        where = sorted({c.bookie for c in copies if c.entry == unserved[0]})
        s.no_metadata_because = (f"{len(unserved)} entr{'y' if len(unserved) == 1 else 'ies'} (entry {unserved[0]} "
                                 f"first) have intact copies only where their bookie's index does not hold them "
                                 f"({', '.join(where)}): BookKeeper reads none of them (rebuild the index with "
                                 "bookie-fsck --repair, then salvage again; or the ledger was deleted since)")
    elif absent := sorted(set(lost) - {c.entry for c in copies}):
        s.no_metadata_because = (f"{len(absent)} entr{'y' if len(absent) == 1 else 'ies'} at or before the last "
                                 f"({last}) have no copy on any disk given (entry {absent[0]} first): a bookie's disk "
                                 "was not given, or every copy went with its disk; ensembles inferred from the "
                                 "other disks would leave out the bookies that hold them (give every bookie of the "
                                 "cluster)")
    elif not 1 <= qa_value <= pl.write_quorum:
        s.no_metadata_because = f"--ack-quorum {qa_value} is not within 1..write quorum {pl.write_quorum}"
    elif any(b is None for _f, e in kept for b in e):
        s.no_metadata_because = "an ensemble position's bookie is on no readable disk: " + why_place
    elif digest.value is None:
        s.no_metadata_because = "digest type unknown: " + digest.why
    elif not isinstance(pw, bytes):
        s.no_metadata_because = "password not found: " + password.why
    elif length is None:
        s.no_metadata_because = length_f.why
    else:
        s.metadata = LedgerMetadata(
            format_version=3, write_quorum=pl.write_quorum, ensemble_size=pl.ensemble_size,
            ack_quorum=qa_value,
            length=length, last_entry_id=last, state="CLOSED",
            ensembles=tuple((f, tuple(str(b) for b in e)) for f, e in kept), digest_type=str(digest.value),
            password=pw, ctime=None, custom_metadata=custom_metadata)
    return s
