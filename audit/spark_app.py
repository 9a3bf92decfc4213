"""The audit as a spark-submit application: ``spark-submit .../audit/spark_app.py DISK... --metadata-dir D
--out DIR`` takes the same options as ``bkdisk audit`` and uses the master spark-submit was given."""
from __future__ import annotations

import os
import sys

if __name__ == "__main__":
    # spark-submit runs this file as a script: make its package importable when not installed, then
    # import it (so these imports follow the path set up here).
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from bkdisk.audit.cli import audit
    from bkdisk.commandline.runner import run_click
    run_click(audit, "bkdisk-audit")
