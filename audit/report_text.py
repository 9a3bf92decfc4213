"""The words of the audit's reports: ledgers as bkdisk names them, entries as ``ledger:entry`` ranges,
counts in the singular where there is one, and the problems as short sentences (bookie, ledgers,
entries), the worst first."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

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


def _key(name: str) -> tuple[int, str]:
    return (0, f"{int(name):020d}") if name.isdigit() else (1, name)


def _ledgers_text(names: Iterable[str], limit: int = ENTRIES_NAMED) -> str:
    ls = sorted(set(names), key=_key)
    return ", ".join(ls[:limit]) + (f" and {len(ls) - limit} more" if len(ls) > limit else "")


def span(r: dict) -> range:
    return range(r["first_entry_id"], r["last_entry_id"] + 1)


def problem_sentences(t: dict[str, list[dict]], findings: dict[str, dict[str, Any]]) -> list[str]:
    """The problems as short sentences, the worst first: entries with no intact copy, disks not
    audited, corrupt and missing copies per bookie, entries on their last copy, divergent copies,
    ledgers a bookie lacks, fsck's errors per disk, orphan ledgers."""
    out: list[str] = []
    lost: dict[str, set[int]] = defaultdict(set)
    last: dict[str, set[int]] = defaultdict(set)
    last_on: set[str] = set()
    missing: dict[str, dict[str, set[int]]] = defaultdict(lambda: defaultdict(set))
    for r in t["under_replicated"]:
        name = ledger_name(r["ledger_scope"], r["ledger_id"])
        if r["copies_intact"] == 0:
            lost[name].update(span(r))
        elif r["copies_intact"] == 1 and r["copies_expected"] > 1:
            last[name].update(span(r))
            last_on.update(r.get("bookies_with_copy") or [])
        for b in r["bookies_missing"]:
            missing[b][name].update(span(r))
    if lost:
        n = sum(len(v) for v in lost.values())
        out.append(f"{plural(n, 'entry', 'entries')} with no intact copy on any audited bookie: {entries_text(lost)}")
    for d in sorted(t["disks"], key=lambda d: d["bookie_id"] or d["path"] or ""):
        if d["status"] not in AUDITED:
            out.append(f"{d['bookie_id'] or d['path']}: {d['status'].replace('_', ' ')}"
                       + (f" ({d['error']})" if d.get("error") else ""))
    corrupt: dict[str, dict[str, set[int]]] = defaultdict(lambda: defaultdict(set))
    for r in t["corrupt_copies"]:
        corrupt[r["bookie_id"]][ledger_name(r["ledger_scope"], r["ledger_id"])].add(r["entry_id"])
    for b, by in sorted(corrupt.items()):
        n = sum(len(v) for v in by.values())
        out.append(f"{b}: {plural(n, 'corrupt copy', 'corrupt copies')} in ledger{'s' if len(by) > 1 else ''} "
                   f"{_ledgers_text(by)}; entries {entries_text(by)}")
    for b, by in sorted(missing.items()):
        # a corrupt copy is also a missing intact one: said once, as corrupt
        by = {l: es - corrupt.get(b, {}).get(l, set()) for l, es in by.items()}
        by = {l: es for l, es in by.items() if es}
        if not by:
            continue
        n = sum(len(v) for v in by.values())
        out.append(f"{b}: {plural(n, 'missing copy', 'missing copies')} in ledger{'s' if len(by) > 1 else ''} "
                   f"{_ledgers_text(by)}; entries {entries_text(by)}")
    if last:
        n = sum(len(v) for v in last.values())
        out.append(f"{plural(n, 'entry', 'entries')} down to their last intact copy"
                   + (f" (on {', '.join(sorted(last_on))})" if last_on else "") + f": {entries_text(last)}")
    for r in t["divergent"]:
        bookies = sorted({b for c in r["copies"] for b in c["bookies"]})
        out.append(f"ledger {ledger_name(r['ledger_scope'], r['ledger_id'])} entry {r['entry_id']}: "
                   f"{r['fingerprints']} different payloads among the copies on {', '.join(bookies)}")
    lacks: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for r in t["missing_ledgers"]:
        lacks[r["bookie_id"]].append((ledger_name(r["ledger_scope"], r["ledger_id"]), r["entries_expected"]))
    for b, ls in sorted(lacks.items()):
        out.append(f"{b}: holds none of the entries metadata places on it for ledger{'s' if len(ls) > 1 else ''} "
                   f"{_ledgers_text(l for l, _n in ls)} ({plural(sum(n for _l, n in ls), 'entry', 'entries')})")
    for b, f in sorted(findings.items()):
        out.append(f"{b}: fsck found {plural(f['errors'], 'error')} on its disk; the first: {f['first']}")
    orphans: dict[str, list[dict]] = defaultdict(list)
    for r in t["orphans"]:
        orphans[r["bookie_id"]].append(r)
    for b, rs in sorted(orphans.items()):
        out.append(f"{b}: {plural(sum(r['entries'] for r in rs), 'entry', 'entries')} of "
                   f"{plural(len(rs), 'ledger')} no metadata names ({human_bytes(sum(r['bytes'] for r in rs))} "
                   f"reclaimable by compaction)")
    return out


def human_bytes(n: int) -> str:
    v: float = n
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if v < 1024 or unit == "TiB":
            return f"{n} B" if unit == "B" else f"{v:.1f} {unit}"
        v /= 1024
    return f"{n} B"
