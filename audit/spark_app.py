"""The audit as a spark-submit application: ``spark-submit .../audit/spark_app.py DISK... --metadata-dir D
--out DIR`` takes the same options as ``bkdisk audit`` and uses the master spark-submit was given."""
from __future__ import annotations

import os
import sys

if __name__ == "__main__":
    # spark-submit runs this file as a script, which puts its own folder first on sys.path: the
    # audit's modules (cli, job, rows, ...) would then also be importable as top-level names and shadow
    # any package of the same name. bkdisk itself comes from the installation.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    from bkdisk.audit.cli import audit
    from bkdisk.commandline.runner import run_click
    run_click(audit, "bkdisk-audit")
