"""The words of the audit's reports: ledgers as bkdisk names them, entries as ``ledger:entry`` ranges,
counts in the singular where there is one, and the problems as short sentences (bookie, ledgers,
entries, what to do), the worst first."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from bkdisk.formats.byte_sizes import human_bytes
from bkdisk.formats.ids import LedgerId

AUDITED = ("ok", "errors")
ENTRIES_NAMED = 8     # per sentence; the rest are counted


def ledger_name(scope: int, ledger: int) -> str:
    """The ledger as the rest of bkdisk prints it (the columns hold Java's signed longs)."""
    return str(LedgerId(scope % (1 << 64), ledger % (1 << 64)))


def plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def _ranges(ids: Iterable[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for e in sorted(set(ids)):
        if out and e == out[-1][1] + 1:
            out[-1] = (out[-1][0], e)
        else:
            out.append((e, e))
    return out


def entries_text(by_ledger: Mapping[str, Iterable[int]], limit: int = ENTRIES_NAMED) -> str:
    """``289:4, 1108:17-20``: ledger:entry (or a range), the first ``limit``, then a count."""
    ledgers = sorted(by_ledger.items(), key=lambda kv: _key(kv[0]))
    parts = [f"{l}:{a}" if a == b else f"{l}:{a}-{b}" for l, ids in ledgers for a, b in _ranges(ids)]
    return ", ".join(parts[:limit]) + (f" and {len(parts) - limit} more" if len(parts) > limit else "")


def _ledger_id(name: str) -> LedgerId:
    """The ledger ``ledger_name`` printed: decimal (at most 20 digits), else the 32-digit qualified name."""
    return LedgerId.from_qualified_name(name) if len(name) == 32 else LedgerId(0, int(name))


def _key(name: str) -> tuple[int, str]:
    return (0, f"{int(name):020d}") if name.isdigit() else (1, name)


def _ledgers_text(names: Iterable[str], limit: int = ENTRIES_NAMED) -> str:
    ls = sorted(set(names), key=_key)
    return ", ".join(ls[:limit]) + (f" and {len(ls) - limit} more" if len(ls) > limit else "")


def span(r: dict) -> range:
    return range(r["first_entry_id"], r["last_entry_id"] + 1)


# A ledger no metadata names that sits on at least this many audited bookies reads as metadata lost
# (written to a quorum, then its metadata gone), not as a deleted ledger left on one bookie. A deleted
# ledger whose entry logs await compaction on several bookies looks the same: hence the question mark.
LOST_METADATA_BOOKIES = 2
REPAIR_INDEX = "`bookie-fsck --repair` on its disk restores its index"
DB_REBUILD = "bin/bookkeeper shell rebuild-db-ledger-locations-index"
SALVAGE = ("`bkdisk salvage` rebuilds metadata from the copies, or `bkdisk metadata import` restores it from an "
           "export; if deleted on purpose, compaction reclaims the space")
RECLAIMABLE = "reclaimable: nothing to do (compaction reclaims it)"


def ledgers_named(names: Iterable[str], topics: Mapping[str, str], limit: int = ENTRIES_NAMED) -> str:
    """``ledger 17`` or ``ledgers 16, 17``, each with its Pulsar topic where its metadata names one."""
    ls = sorted(set(names), key=_key)
    text = ", ".join(f"{l} ({topics[l]})" if topics.get(l) else l for l in ls[:limit])
    return (f"ledger{'s' if len(ls) > 1 else ''} {text}"
            + (f" and {len(ls) - limit} more" if len(ls) > limit else ""))


def _recover(by: Iterable[str], bookie: str) -> str:
    """The BookKeeper command that re-replicates the ledgers ``by`` of ``bookie`` from the other copies."""
    from bkdisk.fsck.shell_commands import recover_commands  # (the shell's id rules; loaded when a line needs it)
    command, refused = recover_commands([_ledger_id(l) for l in by], bookie)
    return "; ".join(([command] if command else []) + refused)


def orphan_ledgers(orphans: list[dict]) -> list[dict]:
    """The orphans table per ledger: bookies, entries, bytes and what it looks like (``metadata lost?``
    on LOST_METADATA_BOOKIES bookies or more, else ``reclaimable``), the likely lost metadata first."""
    per: dict[str, dict[str, Any]] = {}
    for r in orphans:
        name = ledger_name(r["ledger_scope"], r["ledger_id"])
        o = per.setdefault(name, {"ledger": name, "bookies": [], "entries": 0, "bytes": 0})
        o["bookies"].append(r["bookie_id"])
        o["entries"] += r["entries"]
        o["bytes"] += r["bytes"]
    for o in per.values():
        o["bookies"].sort()
        o["verdict"] = "metadata lost?" if len(o["bookies"]) >= LOST_METADATA_BOOKIES else "reclaimable"
    return sorted(per.values(), key=lambda o: (o["verdict"] != "metadata lost?", -o["bytes"], _key(o["ledger"])))


def problem_sentences(t: dict[str, list[dict]], findings: dict[str, dict[str, Any]],
                      topics: Mapping[str, str] | None = None, db_bookies: Iterable[str] = ()) -> list[str]:
    """The problems as short sentences, one per cause, the worst first, each naming its bookies and
    ledgers (with their Pulsar topics, ``topics``) and saying what to do: entries with no intact copy,
    disks not audited, per bookie its corrupt copies, copies missing, copies in its entry logs that its
    index does not hold (``db_bookies``: DbLedgerStorage, rebuilt by BookKeeper's command), entries on
    their last copy, divergent copies, ledgers a bookie lacks, fsck's root cause per disk, then ledgers
    no metadata names (metadata lost? or reclaimable)."""
    topics = topics or {}
    db = set(db_bookies)
    out: list[str] = []
    lost: dict[str, set[int]] = defaultdict(set)
    lost_unindexed: set[str] = set()
    last: dict[str, set[int]] = defaultdict(set)
    last_on: set[str] = set()
    missing: dict[str, dict[str, set[int]]] = defaultdict(lambda: defaultdict(set))
    unindexed: dict[str, dict[str, set[int]]] = defaultdict(lambda: defaultdict(set))
    for r in t["under_replicated"]:
        name = ledger_name(r["ledger_scope"], r["ledger_id"])
        gaps = r.get("bookies_not_indexed") or []
        if r["copies_intact"] == 0:
            lost[name].update(span(r))
            lost_unindexed.update(gaps)
        elif r["copies_intact"] == 1 and r["copies_expected"] > 1:
            last[name].update(span(r))
            last_on.update(r.get("bookies_with_copy") or [])
        for b in r["bookies_missing"]:
            (unindexed if b in gaps else missing)[b][name].update(span(r))
    if lost:
        n = sum(len(v) for v in lost.values())
        out.append(f"{plural(n, 'entry', 'entries')} with no intact copy on any audited bookie: {entries_text(lost)}"
                   f" ({ledgers_named(lost, topics)}); "
                   + (f"copies sit unindexed on {', '.join(sorted(lost_unindexed))}: `bookie-fsck --repair` there "
                      "restores them" if lost_unindexed else
                      "no audited bookie serves them: audit the bookies not audited, else they are lost"))
    for d in sorted(t["disks"], key=lambda d: d["bookie_id"] or d["path"] or ""):
        if d["status"] not in AUDITED:
            out.append(f"{d['bookie_id'] or d['path']}: {d['status'].replace('_', ' ')}"
                       + (f" ({d['error']})" if d.get("error") else "") + "; its copies count as missing")
    recover: dict[str, set[str]] = defaultdict(set)
    corrupt: dict[str, dict[str, set[int]]] = defaultdict(lambda: defaultdict(set))
    for r in t["corrupt_copies"]:
        corrupt[r["bookie_id"]][ledger_name(r["ledger_scope"], r["ledger_id"])].add(r["entry_id"])
    for b, by in sorted(corrupt.items()):
        n = sum(len(v) for v in by.values())
        out.append(f"{b}: {plural(n, 'corrupt copy', 'corrupt copies')} in {ledgers_named(by, topics)}; "
                   f"entries {entries_text(by)}")
        recover[b].update(by)
    for b, by in sorted(missing.items()):
        # a corrupt copy is also a missing intact one: said once, as corrupt
        by = {l: es - corrupt.get(b, {}).get(l, set()) for l, es in by.items()}
        by = {l: es for l, es in by.items() if es}
        if not by:
            continue
        n = sum(len(v) for v in by.values())
        out.append(f"{b}: {plural(n, 'missing copy', 'missing copies')} in {ledgers_named(by, topics)}; "
                   f"entries {entries_text(by)}")
        recover[b].update(by)
    for b, by in sorted(unindexed.items()):
        n = sum(len(v) for v in by.values())
        how = (f"`bookie-fsck --repair` names the rebuild ({DB_REBUILD}, the bookie stopped)" if b in db
               else REPAIR_INDEX)
        out.append(f"{b}: {plural(n, 'copy', 'copies')} of {ledgers_named(by, topics)} in its entry logs, not "
                   f"indexed (the bookie does not serve them); entries {entries_text(by)}; {how}")
    if last:
        n = sum(len(v) for v in last.values())
        out.append(f"{plural(n, 'entry', 'entries')} down to their last intact copy"
                   + (f" (on {', '.join(sorted(last_on))})" if last_on else "") + f": {entries_text(last)} "
                   f"({ledgers_named(last, topics)}); restore their other copies first (the lines above)")
    for r in t["divergent"]:
        bookies = sorted({b for c in r["copies"] for b in c["bookies"]})
        out.append(f"{ledgers_named([ledger_name(r['ledger_scope'], r['ledger_id'])], topics)} entry "
                   f"{r['entry_id']}: {r['fingerprints']} different payloads among the copies on {', '.join(bookies)}")
    lacks: dict[str, dict[str, int]] = defaultdict(dict)
    for r in t["missing_ledgers"]:
        lacks[r["bookie_id"]][ledger_name(r["ledger_scope"], r["ledger_id"])] = r["entries_expected"]
    for b, ls in sorted(lacks.items()):
        out.append(f"{b}: holds none of the entries metadata places on it for {ledgers_named(ls, topics)} "
                   f"({plural(sum(ls.values()), 'entry', 'entries')})")
        recover[b].update(ls)
    # One command per bookie re-replicates every ledger it lost a copy of (corrupt, missing, lacking).
    for b, again in sorted(recover.items()):
        out.append(f"{b}: re-replicate {ledgers_named(again, topics)} from the other bookies: {_recover(again, b)}")
    for b, f in sorted(findings.items()):
        out.append(f"{b}: fsck found {plural(f['errors'], 'error')} on its disk; the first: {f['first']}"
                   + ("; `bookie-fsck --repair` on its disk" if f.get("repairable") else ""))
    orphans = orphan_ledgers(t["orphans"])
    for verdict, what in (("metadata lost?", SALVAGE), ("reclaimable", RECLAIMABLE)):
        group = [o for o in orphans if o["verdict"] == verdict]
        if not group:
            continue
        holders = ", ".join(sorted({b for o in group for b in o["bookies"]}))
        named = ledgers_named((o["ledger"] for o in group), {})
        size = f"{plural(sum(o['entries'] for o in group), 'entry', 'entries')}, " \
               f"{human_bytes(sum(o['bytes'] for o in group))}"
        if verdict == "metadata lost?":
            out.append(f"{named} on {holders}, no metadata names {'them' if len(group) > 1 else 'it'} ({size}): "
                       f"metadata lost? {what}")
        else:
            out.append(f"{named}, each on one bookie ({holders}), no metadata names ({size}): {what}")
    return out
