"""Salvage as a spark-submit application: ``spark-submit .../bkdisk/salvage_app.py DISK... --out DIR``
takes the same options as ``bkdisk salvage`` and uses the master spark-submit was given."""
from __future__ import annotations

import os
import sys

if __name__ == "__main__":
    # spark-submit puts this file's folder first on sys.path: its modules (cli, dump, ...) would shadow
    # packages of the same name. bkdisk itself comes from the installation.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    from bkdisk.commandline.runner import run_click
    from bkdisk.salvage_cli import salvage
    run_click(salvage, "bkdisk-salvage")
