"""What a bookie's garbage collector does with an entry log: its settings (bk_server.conf, else
BookKeeper's defaults) and the decision per log, as BookKeeper's GarbageCollectorThread makes it.

specs/space.md states each rule beside the BookKeeper source it follows (release-4.16.6:
GarbageCollectorThread, EntryLogMetadata, ScanAndCompareGarbageCollector, ServerConfiguration).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from bkdisk.formats.errors import BkdiskError

DELETE, COMPACT_MINOR, COMPACT_MAJOR, KEEP, CURRENT = "delete", "compact-minor", "compact-major", "keep", "current"
ACTIONS = (DELETE, COMPACT_MINOR, COMPACT_MAJOR, KEEP, CURRENT)   # codes 0..4 of ``log_actions``
MAX_LOG_SIZE_LIMIT = 1 << 30   # BookKeeperConstants.MAX_LOG_SIZE_LIMIT, logSizeLimit's default


class GcSettingsError(BkdiskError):
    """Settings a bookie would refuse to start with (GarbageCollectorThread's constructor checks)."""


@dataclass(frozen=True)
class GcSettings:
    """The settings the decisions depend on, under their bk_server.conf names (intervals in seconds,
    gcWaitTime and gcOverreplicatedLedgerWaitTime in milliseconds, as BookKeeper reads them)."""

    minorCompactionThreshold: float = 0.2
    minorCompactionInterval: int = 3600
    majorCompactionThreshold: float = 0.8
    majorCompactionInterval: int = 86400
    gcWaitTime: int = 600000
    isForceGCAllowWhenNoSpace: bool = False
    forceAllowCompaction: bool = False
    gcOverreplicatedLedgerWaitTime: int = 86400000
    useTargetEntryLogSizeForGc: bool = False
    logSizeLimit: int = MAX_LOG_SIZE_LIMIT
    source: str = "BookKeeper's defaults"

    @property
    def minor_enabled(self) -> bool:
        return self.minorCompactionInterval > 0 and self.minorCompactionThreshold > 0

    @property
    def major_enabled(self) -> bool:
        return self.majorCompactionInterval > 0 and self.majorCompactionThreshold > 0

    @property
    def over_replicated_check(self) -> bool:
        return self.gcOverreplicatedLedgerWaitTime > 0

    def to_json(self) -> dict:
        out = asdict(self)
        out.update(minorCompactionEnabled=self.minor_enabled, majorCompactionEnabled=self.major_enabled)
        return out


_TYPES = {"minorCompactionThreshold": float, "majorCompactionThreshold": float, "minorCompactionInterval": int,
          "majorCompactionInterval": int, "gcWaitTime": int, "gcOverreplicatedLedgerWaitTime": int,
          "logSizeLimit": int, "isForceGCAllowWhenNoSpace": bool, "forceAllowCompaction": bool,
          "useTargetEntryLogSizeForGc": bool}


def _value(kind: type, text: str, key: str, where: str):
    t = text.strip()
    if kind is bool:   # commons-configuration's getBoolean: true/false, yes/no, on/off
        if t.lower() in ("true", "yes", "on"):
            return True
        if t.lower() in ("false", "no", "off"):
            return False
    else:
        try:
            return kind(t)
        except ValueError:
            pass
    raise GcSettingsError(f"{where}: {key}: expected {'a boolean' if kind is bool else kind.__name__}, found {t!r}")


def settings_from_properties(props: dict[str, str], where: str) -> GcSettings:
    """The settings a bk_server.conf's properties give (BookKeeper's default for each one absent),
    refused as GarbageCollectorThread refuses them."""
    given = {k: _value(kind, props[k], k, where) for k, kind in _TYPES.items() if k in props}
    s = GcSettings(**given, source=where)
    checks = ((s.minor_enabled, "minor", s.minorCompactionThreshold, s.minorCompactionInterval),
              (s.major_enabled, "major", s.majorCompactionThreshold, s.majorCompactionInterval))
    for enabled, name, threshold, interval in checks:
        if enabled and threshold > 1.0:
            raise GcSettingsError(f"{where}: invalid {name} compaction threshold {threshold} (the bookie refuses "
                                  f"a threshold above 1.0)")
        if enabled and interval * 1000 < s.gcWaitTime:
            raise GcSettingsError(f"{where}: {name}CompactionInterval {interval} s is shorter than gcWaitTime "
                                  f"{s.gcWaitTime} ms (the bookie refuses it)")
    if s.minor_enabled and s.major_enabled and (s.minorCompactionInterval >= s.majorCompactionInterval
                                                or s.minorCompactionThreshold >= s.majorCompactionThreshold):
        raise GcSettingsError(f"{where}: minor compaction ({s.minorCompactionThreshold}, {s.minorCompactionInterval}"
                              f" s) must be below major ({s.majorCompactionThreshold}, {s.majorCompactionInterval} s)"
                              f" in threshold and interval (the bookie refuses it)")
    return s


def settings_from_conf(conf_path: str | None) -> GcSettings:
    """The settings of ``conf_path`` (None: BookKeeper's defaults)."""
    if conf_path is None:
        return GcSettings()
    from bkdisk.bookie.layout import parse_properties
    from bkdisk.diskio.mapped import read_bytes
    return settings_from_properties(parse_properties(read_bytes(conf_path).decode("latin-1")), conf_path)


def usage(live: np.ndarray, total: np.ndarray) -> np.ndarray:
    """EntryLogMetadata.getUsage: remaining / total entry bytes, 0 for a log with no entries."""
    live, total = np.asarray(live, np.float64), np.asarray(total, np.float64)
    return np.divide(live, total, out=np.zeros_like(live), where=total > 0)


def log_actions(live: np.ndarray, total: np.ndarray, live_ledgers: np.ndarray, current: np.ndarray,
                s: GcSettings) -> np.ndarray:
    """The action code (index into ACTIONS) per log: ``current`` for a log still written; ``delete``
    when no live ledger is left in it; else the first compaction pass whose threshold its usage is
    below (a pass disabled compacts nothing), ``keep`` otherwise."""
    u = usage(live, total)
    if s.useTargetEntryLogSizeForGc:   # doCompactEntryLogs: against the target size, for logs not full
        target = np.maximum(np.asarray(total, np.float64), float(s.logSizeLimit))
        u = np.where(u < 1.0, np.asarray(live, np.float64) / target, u)
    out = np.full(len(u), ACTIONS.index(KEEP), np.int8)
    if s.major_enabled:
        out[u < s.majorCompactionThreshold] = ACTIONS.index(COMPACT_MAJOR)
    if s.minor_enabled:
        out[u < s.minorCompactionThreshold] = ACTIONS.index(COMPACT_MINOR)
    out[np.asarray(live_ledgers) == 0] = ACTIONS.index(DELETE)
    out[np.asarray(current, bool)] = ACTIONS.index(CURRENT)
    return out
