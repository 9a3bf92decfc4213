"""While an audit drives Spark, py4j's records of an interrupted call are dropped wherever py4j logs
them (its modules' own loggers pass records up to the root's handlers past the root's filters); the
project's own records still get through."""
from __future__ import annotations

import io
import logging

from bkdisk.audit import spark_logging


def test_records_of_py4js_module_loggers_are_dropped_and_others_kept():
    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        with spark_logging.quiet_interrupts():
            logging.getLogger("py4j.clientserver").error("an interrupted call's traceback")
            logging.getLogger("py4j.java_gateway").error("another")
            logging.getLogger("bkdisk.audit.x").error("kept")
        logging.getLogger("py4j.clientserver").error("after the audit: passed on")
    finally:
        root.removeHandler(handler)
    assert buf.getvalue().splitlines() == ["kept", "after the audit: passed on"]
