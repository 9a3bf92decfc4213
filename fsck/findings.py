"""A finding: one fault (or fact) fsck reports, as data with a stable code."""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from bkdisk.formats.ids import LedgerId
from bkdisk.fsck.codes import Code
from bkdisk.fsck.problems import PROBLEMS, Problem, Severity

T = TypeVar("T")
SEVERITY_ORDER = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}


class _NoExtra(Mapping[str, Any]):
    """The empty, read-only ``extra`` every finding without further facts shares (one object, pickled as itself)."""

    __slots__ = ()

    def __getitem__(self, key: str) -> Any:
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0

    def __reduce__(self) -> str:
        return "_NO_EXTRA"   # (the module's own object, as pickle finds it by name)

    def __repr__(self) -> str:
        return "{}"


_NO_EXTRA = _NoExtra()


def _no_extra() -> Mapping[str, Any]:
    return _NO_EXTRA


# Slots, and one shared empty ``extra``: a check may make a finding per ledger of a million-ledger bookie.
@dataclass(slots=True)
class Finding:
    code: Code          # a plain string naming a code is taken as its member
    path: str | None = None
    offset: int | None = None
    scope: int | None = None
    ledger: int | None = None
    entry: int | None = None
    detail: str = ""
    # What a repair needs, typed: where a misplaced index belongs, where a torn journal is cut,
    # the other name of a duplicated index.
    move_to: str | None = None
    cut_at: int | None = None
    other: str | None = None
    errno: int | None = None      # the OS error of a file or folder that could not be read
    extra: Mapping[str, Any] = field(default_factory=_no_extra)   # further facts for reports; repair never reads them
    # The finding this one follows from (an index location past the end of a truncated log): reports
    # list it under its cause.
    caused_by: Finding | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.code not in PROBLEMS:
            raise ValueError(f"unknown fsck finding code {self.code!r}: not in fsck/problems.py")
        if type(self.code) is not Code:   # (a plain string; Code(...) of a member costs a microsecond a finding)
            self.code = Code(self.code)

    @property
    def problem(self) -> Problem:
        return PROBLEMS[self.code]

    @property
    def lid(self) -> LedgerId:
        """The ledger the finding is about (its code always names one where this is asked)."""
        return LedgerId(self.scope or 0, given(self.ledger, f"{self.code}'s ledger"))

    @property
    def severity(self) -> Severity:
        return self.problem.severity

    @property
    def pass_no(self) -> int:
        return self.problem.pass_no

    @property
    def ledger_name(self) -> str:
        if self.ledger is None:
            return "?"
        return str(LedgerId(self.scope or 0, self.ledger))

    @property
    def message(self) -> str:
        return self.problem.text.format(path=self.path, detail=self.detail, ledger_name=self.ledger_name,
                                        entry=self.entry, offset=self.offset)

    def line(self) -> str:
        where = self.path or ""
        if self.offset is not None:
            where += f" @{self.offset}"
        return f"{self.severity.value.upper():7} {self.code} {where}: {self.message}".replace(" :", ":")

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"code": self.code, "severity": self.severity.value, "pass": self.pass_no,
                             "path": self.path, "offset": self.offset, "scope": self.scope, "ledger": self.ledger,
                             "entry": self.entry, "message": self.message}
        if self.errno is not None:
            d["errno"] = self.errno
        if self.caused_by is not None:
            d["caused_by"] = {"code": self.caused_by.code, "path": self.caused_by.path}
        if self.ledger is not None:
            d["ledger_qualified_name"] = LedgerId(self.scope or 0, self.ledger).qualified_name
        return d


def given(value: T | None, what: str) -> T:
    """``value``, which the code that made it always sets (a repair's path, a cut's offset); a missing
    one is a defect of the pass that made the finding, raised here."""
    if value is None:
        raise ValueError(f"expected {what}, found none")
    return value
