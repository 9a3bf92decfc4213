"""audit.arrow_no_pandas: after it, the conversions the disk scans make give what they give with pandas,
and pandas is never loaded (each in a process of its own: pyarrow's choice lasts a process)."""
from __future__ import annotations

import json
import subprocess
import sys

# The scans' conversions: zoned timestamps to datetimes (the scrub state), integer columns to numpy
# (sliced, chunked), Python values and numpy arrays to Arrow with and without a type, rows to batches.
SCRIPT = r"""
import datetime, json, sys
import numpy as np
import pyarrow as pa
if sys.argv[1] == "without":
    from bkdisk.audit.arrow_no_pandas import arrow_without_pandas
    arrow_without_pandas()
ts = pa.timestamp("us", tz="UTC")
when = pa.array([0, None, -62_135_596_800_000_000, 253_402_300_799_999_999, 1_796_317_376_597_123], pa.int64()).cast(ts)
batch = pa.RecordBatch.from_arrays([when, pa.array(["a", None, "", "é", "x"])], names=["when", "text"])
rows = [{k: (v.astimezone(datetime.UTC).isoformat() if isinstance(v, datetime.datetime) else v) for k, v in r.items()}
        for r in batch.to_pylist()]
ints = pa.array([2**63 - 1, -(2**63), 0, 5, 7], pa.int64())
arrays = [ints.to_numpy().tolist(), ints[2:].to_numpy().tolist(),
          pa.chunked_array([ints[1:3], ints[3:]]).to_numpy().tolist(),
          pa.array([1, None, 3]).to_pylist(), pa.array(np.arange(4, dtype=np.uint64)).to_pylist(),
          pa.array([None, False], pa.bool_()).to_pylist(), pa.scalar("x").as_py(),
          pa.repeat(pa.scalar("d", pa.string()), 3).to_pylist(),
          pa.RecordBatch.from_pylist([{"a": 1, "b": "z"}, {"a": None, "b": None}]).to_pylist()]
print(json.dumps({"rows": rows, "arrays": arrays, "pandas": "pandas" in sys.modules}))
if sys.argv[1] == "without":
    print(int(pa.table({"a": [1, 2]}).to_pandas()["a"].sum()))   # an explicit to_pandas still loads it
"""


def _run(mode: str) -> list[str]:
    r = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def test_conversions_without_pandas_equal_those_with_it_and_load_no_pandas():
    (with_pandas,) = _run("with")
    without, to_pandas = _run("without")
    got, want = json.loads(without), json.loads(with_pandas)
    assert want.pop("pandas") is True, "pyarrow no longer loads pandas by itself: the module is not needed"
    assert got.pop("pandas") is False
    assert got == want
    assert to_pandas == "3"
