"""Pass 4: entry logs: header, framing (with resync past damage), ledgers map against the body,
every entry's digest."""
from __future__ import annotations

from typing import Iterator

from diskio.mapped import DiskError, map_file
from entrylogs.arrays import EntryLogArrays
from entrylogs.reader import Damage
from entrylogs.verify import verify_entries
from formats.ids import LedgerId
from fsck.context import CheckContext
from fsck.findings import Finding

_REASON = {Damage.ZERO_SIZE: "a zero or negative size (zeroed region)",
           Damage.BAD_SIZE: "a size that is too small or runs past the data",
           Damage.BAD_HEADER: "bytes that are not an entry header",
           Damage.TRUNCATED: "the end of the file inside a size prefix"}


def run(ctx: CheckContext) -> Iterator[Finding]:
    plan = ctx.digest_plan if ctx.options.verify_digests else None
    if plan is not None:
        for lid, dt in sorted(plan.sniffed.items()):
            yield Finding("DIGEST_SNIFFED", scope=lid.scope, ledger=lid.ledger, detail=dt.name)
        for lid, why in sorted(plan.why_not.items()):
            yield Finding("DIGEST_NOT_VERIFIED", scope=lid.scope, ledger=lid.ledger, detail=why)
    for lf in ctx.log_files:
        scan = ctx.log_scans.get(lf.path)
        if isinstance(scan, DiskError):
            if lf.path not in ctx.unreadable:
                yield Finding("FILE_UNREADABLE", path=lf.path, detail=scan.what)
            continue
        if not isinstance(scan, EntryLogArrays) or scan.size == 0:
            continue
        yield from _check_log(ctx, scan, plan)


def _check_log(ctx: CheckContext, scan: EntryLogArrays, plan) -> Iterator[Finding]:
    p = scan.path
    if scan.header_error is not None:
        e = scan.header_error
        yield Finding("LOG_HEADER_BAD", path=p, offset=e.offset, detail=f"{e.expected}, found {e.found}")
    if scan.map_error is not None:
        e = scan.map_error
        yield Finding("LEDGERS_MAP_BAD", path=p, offset=e.offset, detail=f"{e.expected}, found {e.found}")
    with map_file(p) as arr:
        for prob in scan.problems:
            off, reason, resumed = int(prob["offset"]), Damage(int(prob["reason"])), int(prob["resumed_at"])
            size = int.from_bytes(arr[off:off + 4].tobytes(), "big", signed=True) if off + 4 <= len(arr) else None
            runs_past = size is not None and size > 0 and off + 4 + size > scan.data_end
            if reason == Damage.TRUNCATED or (runs_past and resumed >= scan.data_end):
                yield Finding("LOG_TRUNCATED", path=p, offset=off,
                              detail=f"size {size} at offset {off} with {scan.data_end - off - 4} bytes left"
                              if size is not None else f"{scan.data_end - off} bytes of a size prefix")
            else:
                yield Finding("LOG_FRAMING_BROKEN", path=p, offset=off,
                              detail=f"{_REASON[reason]}; resumed at offset {resumed}",
                              extra={"resumed_at": resumed})
        if scan.ledgers_map is not None and scan.map_error is None:
            got = scan.computed_ledgers_map()
            for k in sorted(set(got) | set(scan.ledgers_map)):
                a, b = scan.ledgers_map.get(k), got.get(k)
                if a != b:
                    yield Finding("LEDGERS_MAP_MISMATCH", path=p, offset=scan.header.ledgers_map_offset,
                                  scope=k[0], ledger=k[1],
                                  detail=f"ledger {LedgerId(*k)}: map says {a} bytes, the entries add up to {b}")
        if plan is not None and len(scan.entries):
            bad = verify_entries(arr, scan.entries, plan.types, plan.passwords)
            for i in bad.tolist():
                r = scan.entries[i]
                yield Finding("DIGEST_MISMATCH", path=p, offset=int(r["offset"]), scope=int(r["scope"]),
                              ledger=int(r["ledger"]), entry=int(r["entry"]),
                              detail=_dt_name(plan, r))


def _dt_name(plan, r) -> str:
    if int(r["format"]) == 2:
        return "V2-declared"
    dt = plan.types.get(LedgerId(int(r["scope"]), int(r["ledger"])))
    return dt.name if dt is not None else "?"
