"""Which digest type and password to verify each ledger's entries with: metadata first, else sniffed."""
from __future__ import annotations

from dataclasses import dataclass, field

from diskio.mapped import map_file
from entrylogs.arrays import EntryLogArrays
from formats.digests import DigestType
from formats.entry import sniff_digest_type
from formats.ids import LedgerId
from fsck.context import CheckContext


@dataclass
class DigestPlan:
    types: dict[LedgerId, DigestType | None] = field(default_factory=dict)   # None: cannot verify
    passwords: dict[LedgerId, bytes] = field(default_factory=dict)
    sniffed: dict[LedgerId, DigestType] = field(default_factory=dict)
    why_not: dict[LedgerId, str] = field(default_factory=dict)


def build_plan(ctx: CheckContext) -> DigestPlan:
    plan = DigestPlan()
    md = ctx.metadata or {}
    first: dict[LedgerId, tuple[str, int, int]] = {}
    for path, scan in ctx.log_scans.items():
        if not isinstance(scan, EntryLogArrays) or len(scan.entries) == 0:
            continue
        e = scan.entries
        for i in range(len(e)):
            lid = LedgerId(int(e["scope"][i]), int(e["ledger"][i]))
            if lid not in first and int(e["format"][i]) == 1:
                first[lid] = (path, int(e["offset"][i]), int(e["size"][i]))
        for lid in {LedgerId(int(s), int(l)) for s, l in zip(e["scope"][e["format"] == 2], e["ledger"][e["format"] == 2])}:
            m = md.get(lid)
            plan.types.setdefault(lid, None)   # V2: type comes from each entry's flags
            if m is not None and m.password is not None:
                plan.passwords[lid] = m.password
    for lid, (path, off, size) in first.items():
        m = md.get(lid)
        if m is not None and m.digest_type is not None:
            plan.types[lid] = DigestType.parse(m.digest_type)
            plan.passwords[lid] = m.password or b""
            continue
        with map_file(path) as arr:
            dt = sniff_digest_type(arr[off + 4:off + 4 + size].tobytes())
        if dt is not None:
            plan.types[lid] = dt
            plan.sniffed[lid] = dt
        else:
            plan.types[lid] = None
            plan.why_not[lid] = ("the first entry verifies as neither CRC32C nor CRC32: HMAC needs the ledger "
                                 "password, DUMMY has no digest; give --metadata-dir")
    return plan
