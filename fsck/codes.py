"""Every fsck finding code as a module constant, generated from the one problem table.

Passes import codes by name (``from fsck.codes import INDEX_MISPLACED``): a misspelt code is an
ImportError when the pass is loaded, not a finding nobody can look up.
"""
from __future__ import annotations

from fsck.problems import PROBLEMS

globals().update({code: code for code in PROBLEMS})
__all__ = sorted(PROBLEMS)
