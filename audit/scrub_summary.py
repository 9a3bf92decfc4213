"""What a scrub run (``bkdisk audit --state``) says: summary.json's ``"scrub"`` object from the disks
table's scrub columns (audit/scrub_task.py), and the report's one line on it."""
from __future__ import annotations

import datetime
from typing import Any

from bkdisk.audit.rows import AUDITED

SUMS = ("payload_bytes", "deep_bytes", "light_bytes", "logs_total", "logs_deep_checked")


def _days(interval: datetime.timedelta) -> str:
    days = interval / datetime.timedelta(days=1)
    return f"{days:g} days" if days != 1 else "day"


def scrub_summary(disks: list[dict[str, Any]], interval: datetime.timedelta | None) -> dict[str, Any] | None:
    """The cluster's scrub figures, None for an audit without --state whose scan-disk files carry no
    scrub either (``bkdisk scan-disk --state``: then the interval is ``--deep-interval``'s, default 7
    days). A disk not audited lags (its payloads were not verified by this run) with its status as
    the reason."""
    if interval is None:
        if not any(d.get("payload_bytes") is not None for d in disks):
            return None
        from bkdisk.audit.scrub_schedule import DEFAULT_INTERVAL
        interval = DEFAULT_INTERVAL
    out: dict[str, Any] = {k: sum(d.get(k) or 0 for d in disks) for k in SUMS}
    lagging = []
    for d in disks:
        name = d["bookie_id"] or d["path"]
        if d["status"] not in AUDITED:
            lagging.append({"disk": name, "why": d["status"] + (f" ({d['error']})" if d.get("error") else "")})
        elif not d.get("all_verified_within_interval"):
            lagging.append({"disk": name, "why": d.get("lagging_logs") or "not verified"})
    checks = [d.get("oldest_deep_check") for d in disks if d["status"] in AUDITED]
    known = [c for c in checks if c is not None]
    oldest = min(known) if known and len(known) == len(checks) else None   # (a log never checked: none)
    if oldest is not None and oldest.tzinfo is None:   # (Spark's Parquet timestamps read back without a zone: UTC)
        oldest = oldest.replace(tzinfo=datetime.UTC)
    out.update(interval_seconds=int(interval.total_seconds()), all_verified_within_interval=not lagging,
               oldest_deep_check=oldest.isoformat() if oldest is not None else None, lagging=lagging)
    return out


def scrub_line(scrub: dict[str, Any]) -> str:
    """"every payload byte verified in the last 7 days: yes", or which disks and logs lag and why."""
    head = f"every payload byte verified in the last {_days(datetime.timedelta(seconds=scrub['interval_seconds']))}"
    if scrub["all_verified_within_interval"]:
        return f"{head}: yes"
    return f"{head}: no; " + "; ".join(f"{x['disk']}: {x['why']}" for x in scrub["lagging"])
