"""The disks table's scrub columns (``bkdisk audit --state``; null without it): per disk the bytes
and logs the run read deep and light, and whether every log was deep-checked within the interval."""
from __future__ import annotations

import pyarrow as pa

SCRUB_DISK_FIELDS = [("payload_bytes", pa.int64()), ("deep_bytes", pa.int64()), ("light_bytes", pa.int64()),
                     ("logs_total", pa.int64()), ("logs_deep_checked", pa.int64()),
                     ("all_verified_within_interval", pa.bool_()),
                     ("oldest_deep_check", pa.timestamp("us", tz="UTC")), ("lagging_logs", pa.string())]
