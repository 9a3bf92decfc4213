"""A ledger's metadata inferred from the copies of its entries found on bookie disks: ensembles and
quorums from where the copies are, digest type from their digest length, password from the master
keys, last entry and length as BookKeeper's recovery would close the ledger; each field with how sure
it is (certain / inferred / assumed / unknown) and why. Pure: rows in, one ``Salvaged`` out.

The rules, with the BookKeeper code each follows, are in specs/salvage.md.
"""
from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

from bkdisk.bookie.password_candidates import match_password
from bkdisk.formats.digests import DIGEST_LENGTH, DigestType
from bkdisk.formats.entry import ENTRY_V1_HEADER_SIZE, ENTRY_V2_HEADER_SIZE
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.metadata import LedgerMetadata

CERTAIN, INFERRED, ASSUMED, UNKNOWN = "certain", "inferred", "assumed", "unknown"
DIGEST_OF_LENGTH = {n: t for t, n in DIGEST_LENGTH.items()}
HEADER_SIZE = {1: ENTRY_V1_HEADER_SIZE, 2: ENTRY_V2_HEADER_SIZE}
# Ensemble positions tried beyond the bookies whose copies were found: bookies whose disks are absent.
UNSEEN_POSITIONS = 2
# An unknown position weighs as this many copies missing from read disks (see infer_placement).
UNKNOWN_POSITION_COST = 3


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


# --- placement ---------------------------------------------------------------------------------------

def write_set(entry: int, ensemble_size: int, write_quorum: int) -> list[int]:
    """Positions of ``entry``'s copies, in order (RoundRobinDistributionSchedule.WriteSetImpl.reset)."""
    return [(entry + i) % ensemble_size for i in range(write_quorum)]


def _matching(allowed: dict[str, set[int]], forbid: tuple[str, int] | None = None) -> dict[str, int] | None:
    """Distinct positions for the bookies, each within its allowed set (Kuhn's augmenting paths), or None."""
    owner: dict[int, str] = {}

    def place(b: str, seen: set[int]) -> bool:
        for p in sorted(allowed[b]):
            if (b, p) == forbid or p in seen:
                continue
            seen.add(p)
            if p not in owner or place(owner[p], seen):
                owner[p] = b
                return True
        return False

    for b in sorted(allowed):
        if not place(b, set()):
            return None
    return {b: p for p, b in owner.items()}


@dataclass
class _Segment:
    first: int
    last_fit: int
    allowed: dict[str, set[int]]
    gap_before: bool = False    # entries with no copy lie between the ensemble before's last copy and ``first``
    free: dict[str, set[int]] = field(default_factory=dict)   # ``allowed`` without the kept-position rule
    entries: list[int] = field(default_factory=list)          # the entries with copies it holds


def _fits(allowed: dict[str, set[int]], holders: set[str], entry: int, e_size: int, qw: int,
          prev: Sequence[str | None] | None, before: Sequence[int] = (), strict: bool = False
          ) -> dict[str, set[int]] | None:
    """The bookies' possible positions once ``entry``'s copies join an ensemble holding the entries
    ``before``, or None when they cannot. ``strict``: a bookie's position also excludes every write
    set it holds no copy of (its disk was read: an absent copy there is taken as another bookie's)."""
    ws = set(write_set(entry, e_size, qw))
    trial = dict(allowed)
    for b in holders:
        base = trial.get(b)
        if base is None:   # a bookie kept from the ensemble before keeps its position (EnsembleUtils)
            base = {prev.index(b)} if prev is not None and b in prev else set(range(e_size))
            if strict:
                base = base - {p for e in before for p in write_set(e, e_size, qw)}
        trial[b] = base & ws
        if not trial[b]:
            return None
    if strict:
        for b in allowed.keys() - holders:
            trial[b] = trial[b] - ws
            if not trial[b]:
                return None
    if len(trial) > e_size or _matching(trial) is None:
        return None
    return trial


def _segments(holders: dict[int, set[str]], e_size: int, qw: int, strict: bool = False
              ) -> list[tuple[_Segment, list[str | None]]] | None:
    """Greedy: each ensemble holds entries while every copy fits it; a copy that does not starts the
    next ensemble (LedgerHandle's ensemble change). None when one entry's copies fit no ensemble."""
    out: list[tuple[_Segment, list[str | None]]] = []
    seg: _Segment | None = None
    prev: list[str | None] | None = None
    for e in sorted(holders):
        if seg is not None:
            t = _fits(seg.allowed, holders[e], e, e_size, qw, prev, seg.entries, strict)
            if t is not None:
                seg.allowed, seg.last_fit = t, e
                seg.entries.append(e)
                ws = set(write_set(e, e_size, qw))
                for b in holders[e]:
                    seg.free[b] = seg.free.get(b, set(range(e_size))) & ws
                continue
            ens = _resolve(seg.allowed, e_size)
            out.append((seg, ens))
            prev = ens
        t = _fits({}, holders[e], e, e_size, qw, prev)
        if t is None:
            t = _fits({}, holders[e], e, e_size, qw, None)
            if t is None:
                return None
        ws = set(write_set(e, e_size, qw))
        seg = _Segment(0 if seg is None else e, e, t, seg is not None and e > seg.last_fit + 1,
                       {b: set(ws) for b in holders[e]}, [e])
    if seg is not None:
        out.append((seg, _resolve(seg.allowed, e_size)))
    return out


def _resolve(allowed: dict[str, set[int]], e_size: int) -> list[str | None]:
    m = _matching(allowed)
    assert m is not None
    ens: list[str | None] = [None] * e_size
    for b, p in m.items():
        ens[p] = b
    return ens


def _pinned(allowed: dict[str, set[int]], ens: list[str | None]) -> list[bool]:
    """Per position: whether its bookie could sit nowhere else (no other placement fits every copy)."""
    return [b is not None and _matching(allowed, forbid=(b, p)) is None for p, b in enumerate(ens)]


def _position_confidence(seg: _Segment, ens: list[str | None], before: list[str] | None,
                         before_ens: list[str | None] | None) -> list[str]:
    """A position is certain when its own copies pin it, inferred when a bookie kept from the ensemble
    before holds the position it held certainly there, assumed otherwise; unknown when empty."""
    out = []
    for p, (b, own) in enumerate(zip(ens, _pinned(seg.free, ens))):
        if b is None:
            out.append(UNKNOWN)
        elif own:
            out.append(CERTAIN)
        elif before is not None and before_ens is not None and before_ens[p] == b and before[p] in (CERTAIN, INFERRED):
            out.append(INFERRED)
        else:
            out.append(ASSUMED)
    return out


@dataclass
class Placement:
    ensemble_size: int
    write_quorum: int
    ensembles: list[tuple[int, list[str | None]]]
    confidence: list[list[str]]
    why: list[str]


def infer_placement(holders: dict[int, set[str]]) -> Placement | None:
    """Ensemble size, write quorum and ensembles that place every copy found by BookKeeper's rules,
    explaining the copies read disks lack at the least cost (each such copy 1, each position whose
    bookie no read disk shows UNKNOWN_POSITION_COST), then with the fewest ensemble changes, then the
    smallest ensemble; None when no entry has a copy."""
    holders = {e: h for e, h in holders.items() if h}
    if not holders:
        return None
    qw = max(len(h) for h in holders.values())
    bookies = set().union(*holders.values())
    best: tuple[tuple[int, int, int], Placement] | None = None
    for e_size, strict in itertools.product(range(qw, max(qw, len(bookies)) + 1 + UNSEEN_POSITIONS), (False, True)):
        segs = _segments(holders, e_size, qw, strict)
        if segs is None:
            continue
        # Copies a read disk should hold and does not, against positions whose bookie no read disk
        # shows: a bookie whose disk is absent is one unknown position, not copies lost on the others.
        missing = sum(ens[p] is not None and ens[p] not in holders[e]
                      for seg, ens in segs for e in seg.entries for p in write_set(e, e_size, qw))
        pl = _placement(segs, e_size, qw, holders)
        unknown = sum(c == UNKNOWN for cs in pl.confidence for c in cs)
        score = (missing + UNKNOWN_POSITION_COST * unknown, len(segs), e_size)
        if best is None or score < best[0]:
            best = (score, pl)
    return None if best is None else best[1]


def _placement(segs: list[tuple[_Segment, list[str | None]]], e_size: int, qw: int,
               holders: dict[int, set[str]]) -> Placement:
    """The ensembles of ``segs``, each position with its confidence; a position no entry of its
    ensemble was written to takes the bookie of a neighbouring ensemble where the replacement rule
    allows; a position written to whose copies no read disk holds stays unknown."""
    ensembles: list[tuple[int, list[str | None]]] = []
    confidence: list[list[str]] = []
    why: list[str] = []
    for i, (seg, ens) in enumerate(segs):
        conf = _position_confidence(seg, ens, confidence[-1] if confidence else None, segs[i - 1][1] if i else None)
        ens = list(ens)
        written = {p for e in seg.entries for p in write_set(e, e_size, qw)}
        for p, b in enumerate(ens):
            if b is not None:
                continue
            if p in written:
                why.append(f"ensemble at {seg.first}: position {p} was written to (entry "
                           f"{min(e for e in seg.entries if p in write_set(e, e_size, qw))}) and no read disk "
                           "holds its copies: its bookie is unknown (its disk is missing or unreadable)")
                continue
            # A position no entry of this ensemble went to: the bookie of a neighbouring ensemble, when
            # it is not elsewhere in this one (an ensemble change replaces only the failed positions).
            for j in (i - 1, i + 1):
                if 0 <= j < len(segs) and (nb := segs[j][1][p]) is not None and nb not in ens:
                    ens[p], conf[p] = nb, INFERRED
                    why.append(f"ensemble at {seg.first}: position {p} holds no copy; {nb} taken from the "
                               f"ensemble at {segs[j][0].first} (an ensemble change replaces only failed bookies)")
                    break
            else:
                why.append(f"ensemble at {seg.first}: position {p} holds no copy on any readable disk and no "
                           "neighbouring ensemble names it: its bookie is unknown")
        if i and seg.gap_before:
            why.append(f"ensemble change at {seg.first}: entries from {segs[i - 1][0].last_fit + 1} have no copy; "
                       "the change may lie anywhere up to here (every copy is placed the same)")
        ensembles.append((seg.first, ens))
        confidence.append(conf)
    return Placement(e_size, qw, ensembles, confidence, why)


def ensemble_at(ensembles: Sequence[tuple[int, Sequence[str | None]]], entry: int) -> Sequence[str | None]:
    """The ensemble in force for ``entry`` (LedgerMetadataImpl.getEnsembleAt: greatest first <= entry)."""
    found = ensembles[0][1]
    for first, ens in ensembles:
        if first <= entry:
            found = ens
    return found


# --- the ledger ---------------------------------------------------------------------------------------

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
    found = {k.master_key for k in keys if k.master_key is not None}
    if not found:
        return Inferred(None, UNKNOWN, "no master key on any readable disk (no .idx header, ledgers index "
                        "entry or journal key record)"), None
    if len(found) > 1:
        shown = ", ".join(sorted(k.hex() for k in found))
        return Inferred(None, UNKNOWN, f"the bookies keep different master keys ({shown})"), None
    key = found.pop()
    pw = match_password(key, candidates)
    if pw is None:
        return Inferred(None, UNKNOWN, f"master key {key.hex()} matches neither the empty password nor any of "
                        f"{len(candidates)} candidates: add candidates (--password-candidates)"), key
    holders = sorted(k.bookie for k in keys if k.master_key == key)
    what = "the empty password" if pw == b"" else "a candidate"
    return Inferred(pw, CERTAIN, f"SHA-1('ledger' + password) of {what} equals the master key {key.hex()} kept by "
                    f"{', '.join(holders)}"), key


def _close(copies: Sequence[Copy], keys: Sequence[BookieLedger], last_first: int
           ) -> tuple[int, int | None, list[int], list[int], str]:
    """(last entry, its length or None, lost entries, dropped entries, why), as LedgerRecoveryOp
    closes the ledger: from max(highest LAC any intact copy or explicit LAC carries, first entry of the
    last ensemble - 1), forward while the next entry has an intact copy."""
    intact: dict[int, Copy] = {}
    for c in copies:
        if c.intact:
            intact.setdefault(c.entry, c)
    lacs = [c.lac for c in intact.values()] + [k.explicit_lac for k in keys if k.explicit_lac is not None]
    lac = max(lacs, default=-1)
    start = max(lac, last_first - 1)
    last = start
    while last + 1 in intact:
        last += 1
    lost = [e for e in range(last + 1) if e not in intact]
    dropped = sorted({c.entry for c in copies if c.entry > last})
    why = (f"recovery reads on from max(LAC {lac}, first entry of the last ensemble {last_first} - 1) = {start} "
           f"while the next entry has an intact copy: closes at {last}")
    if dropped:
        why += f"; entry {last + 1} has no intact copy, so {len(dropped)} later entries found are left out"
    length = 0 if last < 0 else intact[last].length if last in intact else None
    return last, length, lost, dropped, why


def salvage_ledger(ledger: LedgerId, copies: Sequence[Copy], keys: Sequence[BookieLedger],
                   candidates: Sequence[bytes] = (), ack_quorum: int | None = None,
                   custom_metadata: tuple[tuple[str, bytes], ...] = ()) -> Salvaged:
    """Everything the disks say of ``ledger``, and its metadata (format 3, CLOSED) when every field a
    BookKeeper client needs is known: each ensemble position, the digest type and a verified password."""
    holders: dict[int, set[str]] = {}
    for c in copies:
        holders.setdefault(c.entry, set()).add(c.bookie)
    pl = infer_placement(holders)
    unknown = Inferred(None, UNKNOWN, "no copy of any entry was found")
    digest = _digest(copies)
    password, key = _password(keys, candidates)
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
    last, length, lost, dropped, close_why = _close(copies, keys, pl.ensembles[-1][0])
    last_f = Inferred(last, INFERRED, close_why)
    length_f = Inferred(length, INFERRED if length is not None else UNKNOWN,
                        f"the cumulative length of entry {last}" if length is not None
                        else f"entry {last} has no intact copy to give its cumulative length")
    kept = [(f, e) for f, e in pl.ensembles if f <= max(last, 0)]
    under = []
    for e in range(last + 1):
        ws = [ensemble_at(kept, e)[p] for p in write_set(e, pl.ensemble_size, pl.write_quorum)]
        n = sum(1 for c in copies if c.entry == e and c.intact and c.bookie in ws)
        if 0 < n < pl.write_quorum:
            under.append(e)
    s = Salvaged(ledger, e_size, wq, qa, ensembles, positions, digest, password, key, last_f, length_f, state,
                 lost, dropped, under)
    pw = password.value
    if not 1 <= qa_value <= pl.write_quorum:
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
