"""The audit trail: one line per mutation (create, write, remove, a bookie's registration and its
end) with the caller (peer, client certificate name, which token), the ledger or bookie, and the
outcome, refused calls included. Never a token or a password: only which kind of token it was.

A mutation's thread only notes what its line will say (the peer, the ids, the status code); a
writer thread of its own turns the notes into lines and writes them to stderr a batch at a time,
20 ms after the first of them, so that the call pays neither for formatting nor for a write (unless
the writer falls 100,000 lines behind: then the call writes, as a bound on what is held). The lines
keep the form of the service's log lines (time, logger name, message). ``flush`` writes what is
noted at once (the service's stop, the process's exit); a process killed outright loses the lines
of its last moments (20 ms, more on a loaded machine)."""
from __future__ import annotations

import atexit
import sys
import threading
import time
from collections import deque
from typing import Any

import grpc

from bkdisk.formats.ids import LedgerId
from bkdisk.metaservice.proto import metaservice_pb2 as pb

NAME = "bkdisk.metaservice.audit"
BATCH_SECONDS = 0.02
MAX_NOTED = 100_000     # lines waiting for the writer beyond which a call writes them itself


def caller(context: grpc.ServicerContext, token: str, certificate_names: bool) -> tuple[str, str | None, str]:
    """Who called, as plain values: the peer, the name of its client certificate (looked up only where
    the service asks for certificates: elsewhere a call has none), which token."""
    cn = None
    if certificate_names:
        names = (context.auth_context() or {}).get("x509_common_name")
        cn = names[0].decode("utf-8", "replace") if names else None
    return context.peer(), cn, token


def _who_text(who: tuple[str, str | None, str]) -> str:
    peer, cn, token = who
    return f"peer={peer}{f' cert={cn!r}' if cn else ''} token={token}"


def _ledger(scope: int, ledger: int) -> str:
    return f"ledger={LedgerId(scope, ledger).qualified_name}"


def _subject(request: Any, response: Any) -> tuple:
    """What a line names, as plain values (the request may be reused once the call is over)."""
    if isinstance(request, pb.BookieRequest):
        return ("bookie", request.bookie_id)
    if request.HasField("ledger_id"):
        return ("ledger", request.ledger_scope_id, request.ledger_id)
    if response is not None and response.code == pb.SUCCESS:      # a Create that generated the id
        return ("ledger", response.ledger_scope_id, response.ledger_id)
    return ("new", request.ledger_scope_id)


def _subject_text(subject: tuple) -> str:
    if subject[0] == "bookie":
        return f"bookie={subject[1]!r}"
    if subject[0] == "ledger":
        return _ledger(subject[1], subject[2])
    if subject[0] == "batch":
        return f"batch of {subject[1]}"
    return f"ledger=new-in-scope-{subject[1]}"


def _outcome(code: int | str) -> str:
    return code if isinstance(code, str) else pb.StatusCode.Name(code)


class _Lines:
    """The process's audit lines: noted by any thread, written in order by one writer thread."""

    def __init__(self) -> None:
        self.on = False                # ``enable``: a library's embedded service writes no trail of its own
        self._notes: deque[tuple] = deque()
        self._due = threading.Event()
        self._write_lock = threading.Lock()
        self._writer: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._stamp = (-1, "")

    def note(self, *parts: Any) -> None:
        if not self.on:
            return
        self._notes.append((time.time(), parts))
        if self._writer is None:
            self._start()
        if len(self._notes) > MAX_NOTED:      # the writer cannot keep up (a stalled stderr): write here
            self.flush()
        # Set, the writer has yet to clear it, and its flush comes after the clear: it takes this line.
        if not self._due.is_set():
            self._due.set()

    def _start(self) -> None:
        with self._start_lock:
            if self._writer is None:
                atexit.register(self.flush)
                self._writer = threading.Thread(target=self._run, name="audit-trail", daemon=True)
                self._writer.start()

    def _run(self) -> None:
        while True:
            self._due.wait()
            time.sleep(BATCH_SECONDS)
            self._due.clear()           # before the flush: a line noted during it sets it again
            self.flush()

    def flush(self) -> None:
        with self._write_lock:
            lines = []
            while self._notes:
                t, parts = self._notes.popleft()
                try:
                    text = _line(*parts)
                except Exception as exc:      # a note the trail cannot word must not stop the writer
                    text = f"{parts[0]} (its audit line could not be formatted: {type(exc).__name__})"
                lines.append(f"{self._time(t)} {NAME} {text}\n")
            stream = sys.stderr
            if lines and stream is not None:       # None: started with stderr closed, nowhere to write
                try:
                    stream.write("".join(lines))
                    stream.flush()
                except (OSError, ValueError):      # stderr closed meanwhile
                    pass

    def _time(self, t: float) -> str:
        """As the logging module's asctime: local time to the second, then milliseconds."""
        second = int(t)
        if self._stamp[0] != second:
            self._stamp = (second, time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(second)))
        return f"{self._stamp[1]},{int((t - second) * 1000):03d}"


def _line(method: str, who: tuple, subject: tuple, outcome: int | str, extra: str = "") -> str:
    return f"{method} {_who_text(who)} {_subject_text(subject)}{extra} outcome={_outcome(outcome)}"


LINES = _Lines()


def enable(on: bool = True) -> None:
    """Write the trail to stderr from now on (``bkdisk metadata serve`` does, always); a service a program
    embeds (``metaservice.server.serve``) writes none unless that program asks for it."""
    LINES.on = on


def flush() -> None:
    """Write every line noted so far."""
    LINES.flush()


def unary(method: str, who: tuple, request: Any, response: Any) -> None:
    """The line(s) of a unary mutation by ``who`` (``caller``): one, or one per request of a batch
    (and one for a batch refused whole)."""
    if isinstance(response, pb.LedgerBatchResponse):
        if response.code != pb.SUCCESS or not response.responses:
            LINES.note(method, who, ("batch", len(request.requests)), response.code)
        for i, (q, r) in enumerate(zip(request.requests, response.responses)):
            LINES.note(f"{method}[{i}]", who, _subject(q, r), r.code)
    else:
        LINES.note(method, who, _subject(request, response), response.code)


def failed(method: str, who: tuple, request: Any, exc: BaseException) -> None:
    LINES.note(method, who, _subject(request, None), type(exc).__name__)


def registration(method: str, token: str, certificate_names: bool, behaviour: Any) -> Any:
    """A bookie's Register stream: a line for its first answer, and one when a registration that
    took ends."""
    def run(request, context):
        who = caller(context, token, certificate_names)
        registered = False
        try:
            for r in behaviour(request, context):
                if not registered:
                    LINES.note(method, who, _subject(request, r), r.code, f" read_only={request.read_only}")
                    registered = r.code == pb.SUCCESS
                yield r
        finally:
            if registered:
                LINES.note(f"{method}-ended", who, _subject(request, None), "UNREGISTERED")
    return run
