"""`bkdisk dump` prints, byte for byte, what BookKeeper's own shell printed on the golden corpora.

Every tool-output file of the kinds `bkdisk dump` reproduces (readjournal, readjournal -msg,
readlog, readlog -msg, readlogmetadata, ledger -m, lastmark) in every corpus, cluster-3's bookies
included, is compared in full with our dump of the same file. Commands come from each manifest's
``tool_outputs``. The JSON mode is checked against the manifests' ``journal_records`` and
``entry_log_records``; ledger metadata text against the manifests' ``to_string``.

Not compared: ``listfilesondisc`` and ``localconsistencycheck`` (not `dump` commands).
"""
from __future__ import annotations

import json
import re
import shlex
from collections import defaultdict
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import GOLDEN

from bkdisk.dump.command import dump


def _corpora() -> list[Path]:
    """Every bookie tree with a manifest and shell outputs: the single corpora and cluster-3's bookies."""
    if not GOLDEN.is_dir():
        return []
    found = []
    for m in sorted(GOLDEN.glob("*/manifest.json")) + sorted(GOLDEN.glob("*/bookies/*/manifest.json")):
        if (m.parent / "tool-output").is_dir():
            found.append(m.parent)
    return found


def _manifest(corpus: Path) -> dict:
    return json.loads((corpus / "manifest.json").read_text())


def _shell_args(command: str) -> tuple[dict[str, str], str, list[str]]:
    """``bookkeeper shell [-entryformat X] <cmd> [flags] <id>`` -> (global options, cmd, rest)."""
    toks = shlex.split(command)
    assert toks[:2] == ["bookkeeper", "shell"], command
    toks = toks[2:]
    glob: dict[str, str] = {}
    while toks and toks[0].startswith("-"):
        glob[toks[0]] = toks[1]
        toks = toks[2:]
    return glob, toks[0], toks[1:]


def _find_log(corpus: Path, man: dict, log_id: int, ledger_dir: str | None) -> Path:
    dirs = [ledger_dir] if ledger_dir else man["ledger_dirs"]
    hits = [corpus / d / "current" / f"{log_id:x}.log" for d in dirs]
    hits = [h for h in hits if h.is_file()]
    assert len(hits) == 1, f"entry log {log_id} in {dirs}: {hits}"
    return hits[0]


def _find_journal(corpus: Path, man: dict, journal_id: int) -> Path:
    hits = [corpus / d / "current" / f"{journal_id:x}.txn" for d in man["journal_dirs"]]
    hits = [h for h in hits if h.is_file()]
    assert len(hits) == 1, hits
    return hits[0]


def _cases() -> list:
    """(corpus, tool-output file, our dump argv) for every comparable tool output."""
    out = []
    for corpus in _corpora():
        man = _manifest(corpus)
        for t in man["tool_outputs"]:
            name = Path(t["file"]).name
            glob, cmd, rest = _shell_args(t["command"])
            case_id = f"{corpus.relative_to(GOLDEN)}/{name}"
            if cmd == "readjournal":
                jid = int(rest[-1])
                argv = ["journal", str(_find_journal(corpus, man, jid))]
                if "-msg" in rest:
                    # BookKeeper's ReadJournalCommand takes its entry formatter from its own -e
                    # flag, not from the shell's global -entryformat: these "-msg-hex" files hold
                    # the default StringEntryFormatter output (UTF-8 text), and so does our default.
                    argv.insert(1, "--msg")
                out.append(pytest.param(corpus, name, argv, id=case_id))
            elif cmd in ("readlog", "readlogmetadata"):
                log_id = int(rest[-1])
                m = re.fullmatch(r"readlog(?:metadata)?-(?:msg-hex-)?(?:(ledgers\d*)-)?([0-9a-f]+)\.txt", name)
                assert m, name
                path = _find_log(corpus, man, log_id, m.group(1))
                argv = ["entrylog", str(path)]
                if cmd == "readlogmetadata":
                    argv.insert(1, "--metadata")
                if "-msg" in rest:
                    # readlog does honour the shell's -entryformat (HexDumpEntryFormatter).
                    argv[1:1] = ["--msg", "--entry-format", glob.get("-entryformat", "string")]
                out.append(pytest.param(corpus, name, argv, id=case_id))
            elif cmd == "ledger":
                assert rest[0] == "-m", t["command"]
                lid = int(rest[-1])
                out.append(pytest.param(corpus, name, ["index", str(corpus), "--ledger-id", str(lid)],
                                        id=case_id + "[root]"))
                rel = f"{(lid >> 8) & 0xff:x}/{lid & 0xff:x}/{lid:x}.idx"
                idx = [corpus / d / "current" / rel for d in man["ledger_dirs"]]
                idx = [p for p in idx if p.is_file()]
                assert len(idx) == 1, idx
                out.append(pytest.param(corpus, name, ["index", str(idx[0])], id=case_id + "[idx]"))
            elif cmd == "lastmark":
                out.append(pytest.param(corpus, name, ["lastmark", str(corpus)], id=case_id))
    return out


CASES = _cases()


def _run(argv: list[str]):
    return CliRunner().invoke(dump, argv, catch_exceptions=False)


def test_golden_corpora_are_present():
    assert GOLDEN.is_dir(), f"golden corpora missing: {GOLDEN}"
    corpora = _corpora()
    assert len(corpora) >= 7, corpora
    kinds = defaultdict(int)
    for c in CASES:
        kinds[c.values[2][0]] += 1
    # every kind of shell output is exercised
    assert set(kinds) == {"journal", "entrylog", "index", "lastmark"}, kinds


@pytest.mark.parametrize("corpus, name, argv", CASES)
def test_dump_prints_what_the_bookkeeper_shell_printed(corpus: Path, name: str, argv: list[str]):
    expected = (corpus / "tool-output" / name).read_bytes()
    res = _run(argv)
    assert res.exit_code == 0, res.stderr
    got = res.stdout_bytes
    # The shell's last println and ours agree, but tolerate a single trailing newline difference.
    if got.rstrip(b"\n") != expected.rstrip(b"\n"):
        g, e = got.split(b"\n"), expected.split(b"\n")
        first = next((i for i, (a, b) in enumerate(zip(g, e)) if a != b), min(len(g), len(e)))
        pytest.fail(f"{name}: first difference at line {first + 1}:\n  ours:       {g[first:first + 1]!r}\n"
                    f"  bookkeeper: {e[first:first + 1]!r}\n  ({len(g)} vs {len(e)} lines)")


# --------------------------------------------------------------------------------------------
# JSON mode against the manifests


def _json_lines(argv: list[str]) -> list[dict]:
    res = _run(argv + ["--json"])
    assert res.exit_code == 0, res.stderr
    return [json.loads(line) for line in res.stdout.splitlines()]


def _text_blocks(argv: list[str]) -> list[tuple[str, int, int]]:
    """(Lid, Eid, ByteOffset) of every FormatUtil block the text mode prints."""
    res = _run(argv)
    assert res.exit_code == 0, res.stderr
    return [(m.group(1), int(m.group(2)), int(m.group(3)))
            for m in re.finditer(r"^--------- Lid=(-?\d+), Eid=(-?\d+), ByteOffset=(\d+), EntrySize=\d+ ---------$",
                                 res.stdout, re.M)]


def _journal_files() -> list:
    out = []
    for corpus in _corpora():
        man = _manifest(corpus)
        for d in man["journal_dirs"]:
            for f in sorted((corpus / d / "current").glob("*.txn")):
                out.append(pytest.param(corpus, f, id=f"{corpus.relative_to(GOLDEN)}/{f.name}"))
    return out


def _log_files() -> list:
    out = []
    for corpus in _corpora():
        man = _manifest(corpus)
        for d in man["ledger_dirs"]:
            for f in sorted((corpus / d / "current").glob("*.log")):
                out.append(pytest.param(corpus, d, f, id=f"{corpus.relative_to(GOLDEN)}/{d}/{f.name}"))
    return out


@pytest.mark.parametrize("corpus, path", _journal_files())
def test_journal_json_records_equal_text_blocks_and_manifest(corpus: Path, path: Path):
    man = _manifest(corpus)
    want = [r for r in man["journal_records"] if r["journal_file"] == path.name]
    recs = _json_lines(["journal", str(path)])
    assert [(r["offset"], r["ledger"], r["entry"], r["size"]) for r in recs] == \
        [(w["offset"], int(w["ledger_id"]), w["entry_id"], w["length"]) for w in want]
    assert [r["kind"] for r in recs] == [w["kind"] for w in want]
    assert all(r["scope"] == 0 and isinstance(r["ledger"], int) for r in recs)
    blocks = _text_blocks(["journal", str(path)])
    assert [(int(lid) & (2 ** 64 - 1), e, off) for lid, e, off in blocks] == \
        [(r["ledger"], r["entry"], r["offset"]) for r in recs]


@pytest.mark.parametrize("corpus, ledger_dir, path", _log_files())
def test_entrylog_json_records_equal_text_blocks_and_manifest(corpus: Path, ledger_dir: str, path: Path):
    man = _manifest(corpus)
    want = [r for r in man["entry_log_records"]
            if r["entry_log_file"] == path.name and r.get("ledger_dir", man["ledger_dirs"][0]) == ledger_dir]
    recs = _json_lines(["entrylog", str(path)])
    assert [(r["offset"], r["ledger"], r["entry"], r["size"]) for r in recs] == \
        [(w["offset"], int(w["ledger_id"]), w["entry_id"], w["size"]) for w in want]
    blocks = _text_blocks(["entrylog", str(path)])
    assert [(int(lid) & (2 ** 64 - 1), e, off) for lid, e, off in blocks] == \
        [(r["ledger"], r["entry"], r["offset"]) for r in recs]
    # --metadata --json: per-ledger sizes are the sum of (size + 4) of the ledger's entries
    sizes: dict[int, int] = defaultdict(int)
    for w in want:
        sizes[int(w["ledger_id"])] += w["size"] + 4
    meta = _json_lines(["entrylog", "--metadata", str(path)])
    assert {m["ledger"]: m["size"] for m in meta} == dict(sizes)
    assert len(meta) == len(sizes)


def test_ledger_options_filter_journal_and_entrylog_records():
    corpus = GOLDEN / "interleaved-v6-hostport"
    man = _manifest(corpus)
    jf = corpus / "journal" / "current" / "1a200497c65.txn"
    want = [r for r in man["journal_records"] if r["journal_file"] == jf.name and r["ledger_id"] == "255"]
    got = _json_lines(["journal", str(jf), "--ledger-id", "0xff"])
    assert [(r["offset"], r["entry"]) for r in got] == [(w["offset"], w["entry_id"]) for w in want]
    assert len(got) > 1
    # the text mode keeps the shell's header lines and prints only that ledger's blocks
    blocks = _text_blocks(["journal", str(jf), "--ledger-qualified-name", f"{255:032x}"])
    assert [(int(l), e, o) for l, e, o in blocks] == [(255, w["entry_id"], w["offset"]) for w in want]
    # a scope other than 0 names another ledger: nothing of scope 0 matches
    assert _json_lines(["journal", str(jf), "--ledger-id", "255", "--ledger-scope-id", "1"]) == []

    log = corpus / "ledgers1" / "current" / "0.log"
    res = _run(["entrylog", str(log), "--ledger-id", "256", "--entry-id", "3"])
    assert res.exit_code == 0
    assert res.stdout.splitlines()[0] == "Scan entry log 0 (0.log) for LedgerId 256 for EntryId 3"
    assert [b[:2] for b in _text_blocks(["entrylog", str(log), "--ledger-id", "256", "--entry-id", "3"])] == \
        [("256", 3)]
    res = _run(["entrylog", str(log), "--ledger-id", "999"])
    assert res.stdout.splitlines() == ["Scan entry log 0 (0.log) for LedgerId 999",
                                       "LedgerId 999 is not available in the entry log 0 (0.log)"]
    meta = _json_lines(["entrylog", "--metadata", str(log), "--ledger-id", "4660"])
    assert [m["ledger"] for m in meta] == [4660]


def test_index_json_locations_match_the_entry_log_records():
    corpus = GOLDEN / "sorted-v5-bookieid"
    man = _manifest(corpus)
    lid = 0x7ffffffffffffffe
    recs = _json_lines(["index", str(corpus), "--ledger-qualified-name", f"{lid:032x}"])
    head, locs = recs[0], recs[1:]
    assert head["kind"] == "header" and head["ledger"] == lid and head["explicit_lac"] == 7
    logs = {r["entry_id"]: (int(r["entry_log_file"].split(".")[0], 16), r["offset"])
            for r in man["entry_log_records"] if int(r["ledger_id"]) == lid}
    assert {r["entry"]: (r["log"], r["offset"]) for r in locs} == logs
    assert all(r["pos"] == r["offset"] + 4 for r in locs)


def test_index_page_size_lists_whole_pages_like_bookkeeper():
    corpus = GOLDEN / "interleaved-v4-smallpage"           # pageSize 1024: 128 slots a page
    expected = (corpus / "tool-output" / "ledger-1.txt").read_text()
    res = _run(["index", str(corpus), "--ledger-id", "1", "--page-size", "1024"])
    assert res.exit_code == 0 and res.stdout == expected
    # with 8192-byte pages the 3072-byte index holds no whole page: BookKeeper lists no slot
    res = _run(["index", str(corpus), "--ledger-id", "1", "--page-size", "8192"])
    assert res.stdout.splitlines()[-1] == "===== LEDGER: 1 =====" and "entries      : 384" in res.stdout


def test_index_of_a_dbstorage_bookie_says_why_there_is_none():
    res = CliRunner().invoke(dump, ["index", str(GOLDEN / "dbstorage-v6-bookieid"), "--ledger-id", "1"])
    assert res.exit_code == 8 and "RocksDB" in res.stderr and len(res.stderr.splitlines()) == 1


def test_lastmark_of_a_file_a_ledger_dir_and_a_root_agree():
    corpus = GOLDEN / "interleaved-v6-hostport"
    expected = (corpus / "tool-output" / "lastmark.txt").read_text()
    for p in (corpus, corpus / "ledgers0", corpus / "ledgers0" / "current" / "lastMark"):
        res = _run(["lastmark", str(p)])
        assert res.exit_code == 0 and res.stdout == expected, p
    (obj,) = _json_lines(["lastmark", str(corpus)])
    assert obj["journal_file"] == "1a200497c66.txn" and obj["offset"] == 19456 and len(obj["files"]) == 2


def _metadata_files() -> list:
    out = []
    for corpus in sorted({GOLDEN / "cluster-3"} | {c for c in _corpora() if (c / "metadata").is_dir()}):
        man = _manifest(corpus)
        for m in man.get("metadata_files", []):
            out.append(pytest.param(corpus, m, id=f"{corpus.relative_to(GOLDEN)}/{m['file']}"))
    return out


@pytest.mark.parametrize("corpus, meta", _metadata_files())
def test_metadata_prints_bookkeepers_ledger_metadata_to_string(corpus: Path, meta: dict):
    res = _run(["metadata", str(corpus / meta["file"])])
    assert res.exit_code == 0, res.stderr
    if meta["metadata_format_version"] == 1:
        # The manifest's to_string is of the object before it was written as format 1, which
        # cannot hold the digest type, password or ack quorum: BookKeeper reading the file back
        # prints neither digestType nor password, and ackQuorumSize = writeQuorumSize.
        assert "digestType=" not in res.stdout and "password=" not in res.stdout
        assert res.stdout.startswith("LedgerMetadata{formatVersion=1,")
    else:
        assert res.stdout == meta["to_string"] + "\n"
    (obj,) = _json_lines(["metadata", str(corpus / meta["file"])])
    assert obj["state"] == meta["state"] and obj["format_version"] == meta["metadata_format_version"]
    # BookKeeper prints a password (even an empty one) exactly when hasPassword(); format 1 holds none
    has = meta["metadata_format_version"] != 1 and "password=" in meta["to_string"]
    assert obj["has_password"] is has and (obj["password_hex"] is not None) is has


def test_metadata_has_password_for_an_empty_password_and_not_for_format_1():
    corpus = GOLDEN / "cluster-3"
    (empty,) = _json_lines(["metadata", str(corpus / "metadata" / "2a.bin")])    # ledger 42, password ""
    assert empty["has_password"] is True and empty["password_hex"] == ""
    vectors = GOLDEN / "metadata-vectors"
    (v1,) = _json_lines(["metadata", str(vectors / "v1-bk4.0.bin")])
    (v2,) = _json_lines(["metadata", str(vectors / "v2-bk4.2.bin")])
    assert v1["has_password"] is False and v2["has_password"] is True


def test_cookie_prints_its_fields():
    corpus = GOLDEN / "interleaved-v6-hostport"
    man = _manifest(corpus)
    res = _run(["cookie", str(corpus / "journal")])
    assert res.exit_code == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[:2] == ["layoutVersion: 5", f"bookieHost: {man['bookie_id']}"]
    assert "ledgerDirs: 2\tout/interleaved-v6-hostport/ledgers0\tout/interleaved-v6-hostport/ledgers1" in lines
    (obj,) = _json_lines(["cookie", str(corpus / "cookies" / "VERSION.custom-bookieid")])
    assert obj["bookie_id"] == "bookie-1.rack-a" and obj["layout_version"] == 5
