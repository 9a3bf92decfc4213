"""Where a ledger's entries were placed, inferred from which bookies hold copies of which entries:
ensemble size, write quorum and the ensembles (with their change points), by BookKeeper's placement
(RoundRobinDistributionSchedule) and ensemble changes (EnsembleUtils: only failed positions replaced),
each position with how sure it is. Pure; specs/salvage.md states the rules.
"""
from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

CERTAIN, INFERRED, ASSUMED, UNKNOWN = "certain", "inferred", "assumed", "unknown"
# Ensemble positions tried beyond the bookies whose copies were found: bookies whose disks are absent.
UNSEEN_POSITIONS = 2
# An unknown position weighs as this many copies missing from read disks (see infer_placement).
UNKNOWN_POSITION_COST = 3


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
