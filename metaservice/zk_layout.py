"""BookKeeper's ZooKeeper znode names for ledger metadata, and bkdisk's layout for scoped (BP-35) ledgers.

Scope 0 follows BookKeeper exactly (util/StringUtils, meta/*HierarchicalLedgerManager):
  short ("legacyhierarchical"): "%010d" split 2-4-4, leaf "L" + last 4:   /ledgers/00/0000/L0001
  long  ("longhierarchical"):   "%019d" split 3-4-4-4-4:                 /ledgers/000/0000/0000/0000/L0001
  hybrid ("hierarchical", BookKeeper's default): short below Integer.MAX_VALUE, long from it on.
Scoped ledgers (scope != 0) live under <root>/scopes/<scope as 16 hex digits>/, the 64-bit ledger id as
16 hex digits split 4-4-4-4 with the same "L" leaf prefix: /ledgers/scopes/0000000000000009/0000/0000/0000/L002a.
See specs/metadata-store.md for why.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterator

JAVA_INT_MAX = (1 << 31) - 1
LAYOUT_FORMAT_VERSION = 2
MANAGER_VERSION = 1
FACTORIES = {
    "org.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory": "hybrid",
    "org.apache.bookkeeper.meta.LongHierarchicalLedgerManagerFactory": "long",
    "org.apache.bookkeeper.meta.LegacyHierarchicalLedgerManagerFactory": "short",
}
DEFAULT_FACTORY = "org.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory"
SPECIAL = ("available", "cookies", "LAYOUT", "INSTANCEID", "underreplication", "idgen", "idgen-long")
SCOPES_NODE = "scopes"


class Split:
    """One digit-split hierarchy: ``widths`` of the fixed-width rendering, decimal or hex."""

    def __init__(self, widths: tuple[int, ...], hexa: bool):
        self.widths = widths
        self.total = sum(widths)
        self.hexa = hexa
        digit = "[0-9a-f]" if hexa else "[0-9]"
        self.patterns = [re.compile(f"{digit}{{{w}}}") for w in widths[:-1]]
        self.patterns.append(re.compile(f"L{digit}{{{widths[-1]}}}"))

    def render(self, ledger: int) -> str:
        return format(ledger, f"0{self.total}x" if self.hexa else f"0{self.total}d")

    def parts(self, ledger: int) -> list[str]:
        text, out, at = self.render(ledger), [], 0
        for w in self.widths:
            out.append(text[at:at + w])
            at += w
        out[-1] = "L" + out[-1]
        return out

    def ledger_of(self, parts: list[str]) -> int:
        return int("".join(p.lstrip("L") for p in parts), 16 if self.hexa else 10)

    def walk(self, base: str, children: Callable[[str], list[str]],
             after: int | None) -> Iterator[int]:
        """Ledger ids under ``base`` in ascending order, those greater than ``after`` only."""
        low = None if after is None else self.parts(after)
        yield from self._walk(base, children, 0, [], low)

    def _walk(self, base, children, level, prefix, low) -> Iterator[int]:
        names = sorted(n for n in children(base) if self.patterns[level].fullmatch(n))
        leaf = level == len(self.widths) - 1
        for name in names:
            if low is not None and name < low[level]:
                continue
            path = prefix + [name]
            if leaf:
                if low is None or name > low[level]:
                    yield self.ledger_of(path)
                continue
            below = low if low is not None and name == low[level] else None
            yield from self._walk(f"{base}/{name}", children, level + 1, path, below)


SHORT = Split((2, 4, 4), hexa=False)
LONG = Split((3, 4, 4, 4, 4), hexa=False)
SCOPED = Split((4, 4, 4, 4), hexa=True)
SCOPED_SCOPE = re.compile("[0-9a-f]{16}")


def layout_bytes(factory: str = DEFAULT_FACTORY) -> bytes:
    """The LAYOUT znode content LedgerLayout.serialize writes."""
    return f"{LAYOUT_FORMAT_VERSION}\n{factory}:{MANAGER_VERSION}".encode()


def parse_layout(data: bytes, where: str) -> str:
    """'hybrid', 'long' or 'short' from a LAYOUT znode; ValueError naming what was expected."""
    lines = data.decode("utf-8", "replace").split("\n")
    if len(lines) != 2 or not lines[0].strip().isdigit():
        raise ValueError(f"{where}: LAYOUT is {data[:80]!r}, expected '<format version>\\n<factory>:<version>'")
    factory = lines[1].rsplit(":", 1)[0]
    if factory not in FACTORIES:
        raise ValueError(f"{where}: ledger manager factory {factory!r} is not supported "
                         f"(expected one of {', '.join(sorted(FACTORIES))})")
    return FACTORIES[factory]


def scope0_split(kind: str, ledger: int) -> Split:
    if kind == "long" or (kind == "hybrid" and ledger >= JAVA_INT_MAX):
        return LONG
    return SHORT


def ledger_path(root: str, kind: str, scope: int, ledger: int) -> str:
    """The znode of one ledger's metadata, exactly as BookKeeper names it for scope 0."""
    if scope:
        return f"{root}/{SCOPES_NODE}/{scope:016x}/" + "/".join(SCOPED.parts(ledger))
    return root + "/" + "/".join(scope0_split(kind, ledger).parts(ledger))


def scope0_walk(root: str, kind: str, children: Callable[[str], list[str]],
                after: int | None) -> Iterator[int]:
    """Scope-0 ledger ids ascending: the short tree (ids below Integer.MAX_VALUE), then the long tree."""
    if kind in ("hybrid", "short") and (after is None or after < JAVA_INT_MAX):
        for lid in SHORT.walk(root, children, after):
            if kind == "short" or lid < JAVA_INT_MAX:
                yield lid
    if kind in ("hybrid", "long"):
        low = after
        if kind == "hybrid" and (low is None or low < JAVA_INT_MAX - 1):
            low = JAVA_INT_MAX - 1
        yield from LONG.walk(root, children, low)


def _relative(root: str, path: str) -> list[str] | None:
    return path[len(root) + 1:].split("/") if path.startswith(root + "/") else None


def _scope0_splits(kind: str) -> tuple[Split, ...]:
    return {"short": (SHORT,), "long": (LONG,)}.get(kind, (SHORT, LONG))


def key_of_path(root: str, kind: str, path: str) -> tuple[int, int] | None:
    """(scope, ledger) of a ledger znode's path, as ledger_path names it; None for any other path."""
    parts = _relative(root, path)
    if parts is None:
        return None
    if parts[0] == SCOPES_NODE:
        rest = parts[2:]
        if (len(parts) == 6 and SCOPED_SCOPE.fullmatch(parts[1])
                and all(p.fullmatch(x) for p, x in zip(SCOPED.patterns, rest))):
            return int(parts[1], 16), SCOPED.ledger_of(rest)
        return None
    for split in _scope0_splits(kind):
        if len(parts) == len(split.widths) and all(p.fullmatch(x) for p, x in zip(split.patterns, parts)):
            lid = split.ledger_of(parts)
            if scope0_split(kind, lid) is split:
                return 0, lid
    return None


def is_hierarchy(root: str, kind: str, path: str) -> bool:
    """True for a znode of the ledger id hierarchy: a ledger or one of the znodes above ledgers."""
    parts = _relative(root, path)
    if parts is None:
        return False
    if parts[0] == SCOPES_NODE:
        if len(parts) == 1:
            return True
        rest = parts[2:]
        return (bool(SCOPED_SCOPE.fullmatch(parts[1])) and len(rest) <= len(SCOPED.widths)
                and all(p.fullmatch(x) for p, x in zip(SCOPED.patterns, rest)))
    return any(len(parts) <= len(split.widths) and all(p.fullmatch(x) for p, x in zip(split.patterns, parts))
               for split in _scope0_splits(kind))
