"""The command-line layer: what every command of bkdisk stands on, below the commands and above the
libraries.

Exit codes and the click runner that maps click's own outcomes to them, the guarded runner (bad input
becomes one line on stderr and an exit code; a mapped read that faults becomes one line naming the
file), the options naming a ledger or bounding memory, progress and output helpers, and
``lazy_import`` for the libraries a command's start-up must not pay for. The front ends of ``bkdisk``,
``bookie-fsck`` and the Spark audit use it; no library (formats ... fsck, metaservice) imports it
(tests/test_layering.py).
"""
