"""`bkdisk metadata` and `bkdisk bookies` as a user runs them: the service in its own process on a free
loopback port (embedded store), the client commands as subprocesses; and fsck reading metadata from it."""
from __future__ import annotations

import dataclasses
import filecmp
import json
import select
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import GOLDEN

from bkdisk.formats.errors import BkdiskError
from bkdisk.formats.metadata import parse_metadata, serialize_metadata
from bkdisk.metaservice.channel import MetadataError

BKDISK = [sys.executable, "-c", "from bkdisk.cli import main; main()"]
CORPORA = sorted({p.parent.parent.name for p in GOLDEN.glob("*/metadata/*.bin")})


def bkdisk(*args: str, check: int | None = 0) -> subprocess.CompletedProcess:
    out = subprocess.run([*BKDISK, *args], capture_output=True, text=True, timeout=120)
    if check is not None:
        assert out.returncode == check, (args, out.returncode, out.stderr)
    return out


class Served:
    def __init__(self, tmp: Path, *extra: str, store: str | None = None):
        self.proc = subprocess.Popen([*BKDISK, "metadata", "serve", "--store", store or f"sqlite:{tmp / 'meta.db'}",
                                      "--bind", "127.0.0.1:0", *extra],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line.startswith("bkdisk metadata: serving "), (line, self.proc.stderr.read())
        self.addr = line.split(" on ")[1].strip()
        assert self.addr.startswith("127.0.0.1:")

    def __call__(self, *args: str, check: int | None = 0) -> subprocess.CompletedProcess:
        return bkdisk(*args, "--server", self.addr, check=check)

    def json(self, *args: str):
        return json.loads(self(*args, "--json").stdout)

    def stop(self) -> None:
        self.proc.terminate()
        assert self.proc.wait(30) == 0          # SIGTERM is a clean stop


@pytest.fixture()
def served(tmp_path):
    s = Served(tmp_path)
    yield s
    s.stop()


def _one_line(out: subprocess.CompletedProcess, code: int, *words: str) -> None:
    assert out.returncode == code, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bkdisk: "), out.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])


@pytest.mark.parametrize("corpus", CORPORA)
def test_import_then_export_gives_the_golden_files_byte_for_byte(served, corpus, tmp_path):
    folder = GOLDEN / corpus / "metadata"
    got = served.json("metadata", "import", str(folder))
    bins = sorted(folder.glob("*.bin"))
    assert got["imported"] == len(bins) > 0
    listed = served.json("metadata", "list")
    assert [x["ledger_id"] for x in listed] == sorted(int(f.stem, 16) for f in bins)
    out = tmp_path / "export"
    assert served.json("metadata", "export", str(out))["exported"] == len(bins)
    assert sorted(p.name for p in out.iterdir()) == sorted(f.name for f in bins)    # format 3, <hex id>.bin
    for f in bins:
        assert filecmp.cmp(f, out / f.name, shallow=False), f
    # every ledger's password: the owner's alone, whatever the umask (the store's file too)
    assert {oct(p.stat().st_mode & 0o777) for p in [out, *out.iterdir()]} == {"0o700", "0o600"}
    assert (tmp_path / "meta.db").stat().st_mode & 0o077 == 0
    # as stored: the .bin files again (they were imported in preference to .txt)
    stored = tmp_path / "stored"
    served("metadata", "export", str(stored), "--format", "stored")
    assert sorted(p.name for p in stored.iterdir()) == sorted(f.name for f in bins)


def test_get_list_create_delete_json(served, tmp_path):
    folder = GOLDEN / "cluster-3" / "metadata"
    src = folder / "10.bin"
    made = served.json("metadata", "create", "--from", str(src))
    assert (made["ledger_scope_id"], made["ledger_id"], made["version"]) == (0, 0, 0)   # generated id
    served.json("metadata", "create", "--from", str(src), "--ledger-id", "0x10")
    scoped = served.json("metadata", "create", "--from", str(folder / "2a.bin"),
                         "--ledger-qualified-name", "00000000000000070000000000000005")
    assert (scoped["ledger_scope_id"], scoped["ledger_id"]) == (7, 5)
    got = served.json("metadata", "get", "--ledger-id", "16", "--out", str(tmp_path / "x.bin"))
    assert got["version"] == 0 and got["ledger_qualified_name"] == "00000000000000000000000000000010"
    assert got["metadata"]["ensembles"][0]["bookies"] == ["bk-1.rack-a", "bk-2.rack-a", "bk-3.rack-b"]
    assert (tmp_path / "x.bin").read_bytes() == src.read_bytes()
    assert (tmp_path / "x.bin").stat().st_mode & 0o777 == 0o600   # (its password)
    scoped_md = served.json("metadata", "get", "--ledger-id", "5", "--ledger-scope-id", "7")["metadata"]
    assert scoped_md["format_version"] == 3
    as_text = served.json("metadata", "get", "--ledger-id", "16", "--format-version", "2")
    assert as_text["metadata"]["format_version"] == 2
    listed = served.json("metadata", "list")
    assert [(x["ledger_scope_id"], x["ledger_id"]) for x in listed] == [(0, 0), (0, 16), (7, 5)]
    assert served.json("metadata", "list", "--ledger-scope-id", "7") == [
        {"ledger_scope_id": 7, "ledger_id": 5, "ledger_qualified_name": "00000000000000070000000000000005"}]
    assert served.json("metadata", "delete", "--ledger-id", "16", "--expected-version", "0")["deleted"] is True
    _one_line(served("metadata", "get", "--ledger-id", "16", check=None), 2, "LEDGER_NOT_FOUND")
    _one_line(served("metadata", "delete", "--ledger-id", "5", "--ledger-scope-id", "7", "--expected-version", "3",
                     check=None), 5, "BAD_VERSION")
    text = served("metadata", "get", "--ledger-id", "0").stdout
    assert text.startswith("ledger 0 (scope 0) version 0: CLOSED")
    # a scoped ledger is exported under its qualified name, which import reads back
    served("metadata", "export", str(tmp_path / "out"))
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["0.bin", "00000000000000070000000000000005.bin"]
    served("metadata", "delete", "--ledger-qualified-name", "00000000000000070000000000000005")
    served("metadata", "delete", "--ledger-id", "0")
    assert served.json("metadata", "import", str(tmp_path / "out"))["imported"] == 2
    assert served.json("metadata", "get", "--ledger-id", "5", "--ledger-scope-id", "7")["version"] == 0


def test_import_again_skips_or_overwrites_and_list_is_decimal_with_a_header(served, tmp_path):
    folder = GOLDEN / "cluster-3" / "metadata"
    bins = sorted(folder.glob("*.bin"))
    assert served.json("metadata", "import", str(folder))["imported"] == len(bins)
    again = served.json("metadata", "import", str(folder), "--skip-existing")
    assert again["imported"] == 0 and len(again["skipped"]) == len(bins)
    # a changed file overwrites its ledger with a versioned write; an unchanged one is left at its version
    changed = tmp_path / "changed"
    changed.mkdir()
    for f in bins:
        (changed / f.name).write_bytes(f.read_bytes())
    other = bins[1].read_bytes()
    (changed / bins[0].name).write_bytes(other)
    got = served.json("metadata", "import", str(changed), "--overwrite")
    # "overwritten" names only the ledger written; the others held the file's bytes already
    first = int(bins[0].stem, 16)
    assert got["imported"] == 0 and [x["ledger_id"] for x in got["overwritten"]] == [first]
    assert sorted(x["ledger_id"] for x in got["unchanged"]) == sorted(int(f.stem, 16) for f in bins[1:])
    text = served("metadata", "import", str(changed), "--overwrite").stdout
    assert text.strip() == f"imported 0 ledgers from {changed}, {len(bins)} unchanged (they hold these bytes)"
    assert served.json("metadata", "get", "--ledger-id", str(first))["version"] == 1
    assert served.json("metadata", "get", "--ledger-id", str(int(bins[1].stem, 16)))["version"] == 0
    lines = served("metadata", "list").stdout.splitlines()
    assert lines[0] == "scope\tledger\tqualified_name"
    assert [line.split("\t")[1] for line in lines[1:]] == [str(x) for x in sorted(int(f.stem, 16) for f in bins)]
    assert lines[1].split("\t")[2] == f"{int(bins[0].stem, 16):032x}"


def test_serve_logs_each_request_at_v_and_its_start_and_stop(tmp_path):
    s = Served(tmp_path, "-v")
    try:
        _one_line(s("metadata", "get", "--ledger-id", "9", check=None), 2, "LEDGER_NOT_FOUND")
        s("metadata", "list")
    finally:
        s.proc.terminate()
        assert s.proc.wait(30) == 0
    out, err = s.proc.stdout.read(), s.proc.stderr.read()
    assert out.startswith("bkdisk metadata: stopped serving sqlite:")
    reads = [line for line in err.splitlines() if " Read " in line]
    assert len(reads) == 1 and "LEDGER_NOT_FOUND" in reads[0], err
    assert len([line for line in err.splitlines() if " Iterate " in line]) == 1, err


def test_bookies_register_lives_while_the_command_runs(served):
    reg = subprocess.Popen([*BKDISK, "bookies", "register", "bk-9.rack-z", "--host", "10.1.2.3", "--port", "3181",
                            "--server", served.addr], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert reg.stdout.readline().startswith("registered bk-9.rack-z (writable) at 10.1.2.3:3181")
    listed = served.json("bookies", "list")
    assert [b["bookie_id"] for b in listed] == ["bk-9.rack-z"]
    assert served("bookies", "resolve", "bk-9.rack-z").stdout.strip() == "bk-9.rack-z\t10.1.2.3:3181"
    # another bookie under the same id while this one lives: refused once the service waited for it to go
    _one_line(served("bookies", "register", "bk-9.rack-z", "--host", "10.9.9.9", "--port", "3181", check=None), 3,
              "BOOKIE_EXISTS")
    assert served("bookies", "resolve", "bk-9.rack-z").stdout.strip() == "bk-9.rack-z\t10.1.2.3:3181"
    reg.terminate()
    assert reg.wait(30) == 0
    assert served.json("bookies", "list") == []
    _one_line(served("bookies", "info", "bk-9.rack-z", check=None), 2, "BOOKIE_NOT_FOUND")


def test_watch_prints_every_change_in_order(served):
    src = str(GOLDEN / "cluster-3" / "metadata" / "10.bin")
    served("metadata", "create", "--from", src, "--ledger-id", "1")
    served("metadata", "create", "--from", src, "--ledger-id", "2", "--ledger-scope-id", "9")
    served("metadata", "delete", "--ledger-id", "1")
    out = served("metadata", "watch", "--after-sequence", "0", "--count", "3", "--json").stdout
    events = [json.loads(line) for line in out.splitlines()]
    assert [(e["change"], e["ledger_scope_id"], e["ledger_id"], e["sequence"]) for e in events] == [
        ("CREATED", 0, 1, 1), ("CREATED", 9, 2, 2), ("DELETED", 0, 1, 3)]
    # one ledger: its current state first; then a change made while the watch runs
    watcher = subprocess.Popen([*BKDISK, "metadata", "watch", "--ledger-id", "2", "--ledger-scope-id", "9",
                                "--count", "2", "--json", "--server", served.addr],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = json.loads(watcher.stdout.readline())
    assert (first["change"], first["version"]) == ("CURRENT", 0)
    served("metadata", "delete", "--ledger-id", "2", "--ledger-scope-id", "9")
    second = json.loads(watcher.stdout.readline())
    assert (second["change"], second["ledger_id"], second["sequence"]) == ("DELETED", 2, 4)
    assert watcher.wait(30) == 0


def test_a_watch_says_when_its_service_goes_and_reopens_it(tmp_path):
    """A watch that gave a change, its service killed: one line on stderr says the stream was lost and
    is being reopened (not silence until it is killed)."""
    s = Served(tmp_path)
    watcher = subprocess.Popen([*BKDISK, "metadata", "watch", "--ledger-id", "5", "--json", "--server", s.addr],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        s("metadata", "create", "--from", str(GOLDEN / "cluster-3" / "metadata" / "10.bin"), "--ledger-id", "5")
        assert json.loads(watcher.stdout.readline())["change"] in ("CURRENT", "CREATED")
        s.proc.kill()
        s.proc.wait(30)
        ready, _w, _x = select.select([watcher.stderr], [], [], 60)
        assert ready, "the watch said nothing of its lost service in 60 s"
        line = watcher.stderr.readline()
        assert line.startswith(f"bkdisk metadata: watch: the stream to {s.addr} was lost (RPC_UNAVAILABLE"), line
        assert "reopening it until the service answers" in line
    finally:
        watcher.kill()
        watcher.wait(30)


def test_a_peer_that_takes_the_connection_and_never_answers_is_said_within_the_timeout(tmp_path):
    """A stopped service, or another program on the port: every command ends with one line (exit 8)
    after --timeout, a watch and a bulk read too (they have no deadline of their own)."""
    import socket
    listener = socket.socket()
    listener.bind(("127.0.0.2", 0))
    listener.listen(16)
    addr = f"127.0.0.2:{listener.getsockname()[1]}"
    try:
        for args in (("metadata", "watch", "--ledger-id", "16", "--count", "1"), ("metadata", "list"),
                     ("metadata", "get", "--ledger-id", "16"), ("metadata", "export", str(tmp_path / "x")),
                     ("bookies", "list")):
            out = bkdisk(*args, "--server", addr, "--timeout", "1", check=8)
            lines = out.stderr.strip().splitlines()
            assert len(lines) == 1 and "no answer within 1 s" in lines[0], (args, out.stderr)
    finally:
        listener.close()


def test_import_creates_nothing_when_a_file_parses_but_the_service_would_refuse_it(served, tmp_path):
    """Every file is checked before anything is created: one the service refuses (quorums BookKeeper cannot
    load, a BookieId twice, a scope-0 id past 2^63 - 1) stops the import before the first CreateMany."""
    golden = GOLDEN / "cluster-3" / "metadata"
    md = parse_metadata((golden / "1000.bin").read_bytes())
    members = md.ensembles[0][1]
    refused = {
        "3e9.bin": (dataclasses.replace(md, write_quorum=md.ensemble_size + 1), "write quorum"),
        "3ea.bin": (dataclasses.replace(md, ensembles=((0, (members[0],) * len(members)),)), "names a bookie twice"),
        "8000000000000000.bin": (md, "outside 0..9223372036854775807"),
    }
    for name, (bad, why) in refused.items():
        folder = tmp_path / name
        shutil.copytree(golden, folder)
        (folder / name).write_bytes(serialize_metadata(bad))
        _one_line(served("metadata", "import", str(folder), check=None), 7, str(folder / name), why, "nothing imported")
        assert served.json("metadata", "list") == [], name


def test_bad_input_gets_one_line_and_an_exit_code(served, tmp_path):
    garbage = tmp_path / "bad" / "1f.bin"
    garbage.parent.mkdir()
    garbage.write_bytes(b"BookieMetadataFormatVersion\t3\n\xff\xff")
    _one_line(served("metadata", "import", str(garbage.parent), check=None), 8, str(garbage), "offset")
    assert served.json("metadata", "list") == []                 # nothing imported from a bad folder
    _one_line(served("metadata", "create", "--from", str(garbage), check=None), 8, str(garbage), "offset")
    empty = tmp_path / "empty"
    empty.mkdir()
    _one_line(served("metadata", "import", str(empty), check=None), 8, "no ledger metadata files")
    folder = GOLDEN / "cluster-3" / "metadata"
    served("metadata", "import", str(folder))
    # a ledger that exists is the service's answer, not a failure to reach it: exit 3, as create's
    _one_line(served("metadata", "import", str(folder), check=None), 3, "10.bin", "LEDGER_EXISTS")
    for args, why in [(("metadata", "get"), "needs --ledger-id"),
                      (("metadata", "get", "--ledger-id", "zz"), "--ledger-id"),
                      (("metadata", "get", "--ledger-scope-id", "1"), "--ledger-scope-id needs --ledger-id")]:
        out = served(*args, check=None)
        assert out.returncode == 16 and why in out.stderr, out.stderr
    _one_line(bkdisk("metadata", "list", "--server", "nowhere", check=None), 8, "grpc://HOST:PORT")
    _one_line(bkdisk("metadata", "list", "--server", "127.0.0.1:1", "--timeout", "1", check=None), 8,
              "cannot reach the metadata service at 127.0.0.1:1", "RPC_UNAVAILABLE")
    _one_line(bkdisk("metadata", "get", "--ledger-id", "1", "--server", "127.0.0.1:1", "--timeout", "1",
                     check=None), 8, "cannot reach")
    out = bkdisk("metadata", "serve", "--store", "mysql:x", check=None)
    assert out.returncode == 16 and "expected sqlite:PATH or zk://" in out.stderr
    _one_line(bkdisk("metadata", "serve", "--store", f"sqlite:{tmp_path}/no/such/m.db", check=None), 8,
              "no such directory")


def test_a_token_guards_every_call_made_from_the_command_line(tmp_path):
    s = Served(tmp_path, "--token", "s3cret")
    try:
        src = str(GOLDEN / "cluster-3" / "metadata" / "10.bin")
        _one_line(s("metadata", "create", "--from", src, "--ledger-id", "1", check=None), 6,
                  "the service needs a token: --token or BKDISK_METADATA_TOKEN")
        _one_line(s("metadata", "create", "--from", src, "--ledger-id", "1", "--token", "nope", check=None), 6,
                  "the service refused the token")
        assert s.json("metadata", "list", "--token", "s3cret") == []
        s("metadata", "create", "--from", src, "--ledger-id", "1", "--token", "s3cret")
        assert s.json("metadata", "get", "--ledger-id", "1", "--token", "s3cret")["version"] == 0
        for read in (("metadata", "get", "--ledger-id", "1"), ("metadata", "list"),       # reads need it too
                     ("metadata", "export", str(tmp_path / "out")), ("bookies", "list")):
            _one_line(s(*read, check=None), 6, "the service needs a token: --token or BKDISK_METADATA_TOKEN")
    finally:
        s.stop()


def test_bookies_list_info_resolve(served):
    from bkdisk.metaservice.resolver import DiscoveryClient, service_info
    d = DiscoveryClient(served.addr)
    regs = [d.register("bk-1.rack-a", service_info("10.0.0.1", 3181, {"rack": "a"})),
            d.register("10.0.0.2:3181", service_info("10.0.0.2", 3181), read_only=True)]
    try:
        listed = served.json("bookies", "list")
        assert [(b["bookie_id"], b["read_only"]) for b in listed] == [("bk-1.rack-a", False), ("10.0.0.2:3181", True)]
        assert [b["bookie_id"] for b in served.json("bookies", "list", "--read-only")] == ["10.0.0.2:3181"]
        info = served.json("bookies", "info", "bk-1.rack-a")
        assert info["properties"] == {"rack": "a"} and info["endpoints"][0]["port"] == 3181
        assert served.json("bookies", "resolve", "bk-1.rack-a") == {"bk-1.rack-a": "10.0.0.1:3181"}
        _one_line(served("bookies", "resolve", "bk-9", check=None), 2, "cannot resolve 'bk-9'", "BOOKIE_NOT_FOUND")
        _one_line(served("bookies", "info", "bad id", check=None), 7, "BAD_REQUEST")
        assert bkdisk("bookies", "resolve", "--legacy", "10.0.0.7:3181", "--json").stdout.strip() == \
            '{"10.0.0.7:3181": "10.0.0.7:3181"}'
        # a BookieId refused before any call is a bad request, as the service's answer to it is (7), not "retry" (8)
        _one_line(bkdisk("bookies", "resolve", "--legacy", "bk-1.rack-a", check=None), 7, "legacy mode")
        _one_line(served("bookies", "resolve", "bad id", check=None), 7, "invalid BookieId")
        for host in ("", "h\nx", "a b"):
            out = served("bookies", "register", "bk-9", "--host", host, "--port", "1", check=None)
            assert out.returncode == 16 and "--host" in out.stderr, out.stderr
    finally:
        for r in regs:
            r.close()
        d.close()


def test_fsck_with_metadata_from_the_service_finds_what_the_folder_gives(served, tmp_path):
    import shutil
    root = GOLDEN / "interleaved-v4-smallpage"
    md = tmp_path / "metadata"              # a copy without ledger 1: fsck then has something to say
    shutil.copytree(root / "metadata", md)
    for f in md.glob("1.*"):
        f.unlink()
    served("metadata", "import", str(md))
    fsck = [sys.executable, "-c", "from bkdisk.fsck_cli import main; main()", str(root), "--json", "--no-progress"]

    def run(*extra: str) -> tuple[int, dict]:
        out = subprocess.run([*fsck, *extra], capture_output=True, text=True, timeout=300)
        assert out.returncode in (0, 4), out.stderr
        return out.returncode, json.loads(out.stdout)

    code_dir, by_dir = run("--metadata-dir", str(md))
    code_svc, by_service = run("--metadata", f"grpc://{served.addr}")
    assert code_svc == code_dir
    assert by_service["findings"] == by_dir["findings"]
    assert [(p["pass"], p["counts"], p["skipped"]) for p in by_service["passes"]] == \
        [(p["pass"], p["counts"], p["skipped"]) for p in by_dir["passes"]]
    _code, without = run()
    assert without["findings"] != by_dir["findings"]          # the metadata made a difference
    assert "ORPHAN_LEDGER" in {f["code"] for f in by_service["findings"]}
    both = subprocess.run([*fsck, "--metadata", f"grpc://{served.addr}", "--metadata-dir", str(md)],
                          capture_output=True, text=True, timeout=60)
    assert both.returncode == 16 and "exclude each other" in both.stderr
    down = subprocess.run([*fsck, "--metadata", "grpc://127.0.0.1:1"], capture_output=True, text=True, timeout=120)
    assert down.returncode == 8 and len(down.stderr.strip().splitlines()) == 1, down.stderr


@pytest.mark.parametrize("argv", [["metadata", "--help"], ["metadata", "serve", "--help"], ["bookies", "--help"],
                                  ["metadata", "export", "--help"]])
def test_help_loads_no_grpc_or_kazoo(argv):
    probe = ("import json, sys\nfrom bkdisk.cli import main\ntry:\n"
             "    main(" + repr(argv) + ")\nexcept SystemExit as e:\n"
             "    code = e.code\nprint(json.dumps([code, sorted({m.split('.')[0] for m in sys.modules} & "
             "{'grpc', 'kazoo', 'numba', 'pyspark', 'google'})]))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [0, []], out.stderr


def test_tls_serve_and_client(tmp_path):
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)
    s = Served(tmp_path, "--tls-cert", str(cert), "--tls-key", str(key))
    try:
        src = str(GOLDEN / "cluster-3" / "metadata" / "10.bin")
        s("metadata", "create", "--from", src, "--ledger-id", "3", "--tls-ca", str(cert))
        assert s.json("metadata", "get", "--ledger-id", "3", "--tls-ca", str(cert))["version"] == 0
        _one_line(s("metadata", "get", "--ledger-id", "3", "--timeout", "2", check=None), 8, "RPC_")   # plaintext
    finally:
        s.stop()
    out = bkdisk("metadata", "serve", "--store", f"sqlite:{tmp_path}/x.db", "--tls-cert", str(cert), check=None)
    assert out.returncode == 16 and "go together" in out.stderr


def test_serve_over_zookeeper_imports_and_exports_the_golden_folder(tmp_path):
    from zookeeper_fixture import started
    zk = started(tmp_path / "zk")
    try:
        s = Served(tmp_path, store=f"zk://{zk.hosts}/ledgers")
        try:
            folder = GOLDEN / "cluster-3" / "metadata"
            assert s.json("metadata", "import", str(folder))["imported"] == 6
            s("metadata", "export", str(tmp_path / "out"))
            for f in sorted(folder.glob("*.bin")):
                assert filecmp.cmp(f, tmp_path / "out" / f.name, shallow=False), f
        finally:
            s.stop()
    finally:
        zk.stop()


def test_load_all_reads_every_ledger_of_every_scope(tmp_path):
    """What fsck --metadata and the audit get: every ledger, keyed by its full id, parsed."""
    from bkdisk.formats.ids import LedgerId
    from bkdisk.formats.metadata import parse_metadata
    from bkdisk.metaservice.client import MetadataClient, service_target
    from bkdisk.metaservice.server import serve
    from bkdisk.metaservice.sqlite_store import SqliteStore
    folder = GOLDEN / "cluster-3" / "metadata"
    files = sorted(folder.glob("*.bin"))
    store = SqliteStore(tmp_path / "m.db")
    want = {}
    for i in range(1500):
        f = files[i % len(files)]
        scope = 0 if i % 3 else 1 + i % 5
        store.create(scope, i, f.read_bytes())
        want[LedgerId(scope, i)] = parse_metadata(f.read_bytes())
    server, port = serve(store)
    try:
        c = MetadataClient(service_target(f"grpc://127.0.0.1:{port}"))
        assert c.load_all() == want
        assert c.load_all(scope=2) == {k: v for k, v in want.items() if k.scope == 2}
        store.create(0, 99_999, b"BookieMetadataFormatVersion\t3\n\x05\x08\x01")   # bytes written around the service
        with pytest.raises(MetadataError) as info:
            c.load_all()
        assert info.value.code == "LEDGER_METADATA_ERROR"
        c.close()
    finally:
        server.stop(0)
        store.close()
    for bad in ("grpc://host", "grpc://h:0", "http://h:1/x", "h:port"):
        with pytest.raises(BkdiskError, match="grpc://HOST:PORT"):
            service_target(bad)


def test_the_store_url_is_parsed_by_the_store_alone(tmp_path):
    # `bkdisk metadata serve --store` says what metaservice.store_url.open_store says: an unknown scheme is
    # NotAStoreUrl (the command's usage error), a SQLite file in a missing folder a one-line StoreError.
    from bkdisk.metaservice.store import NotAStoreUrl, StoreError
    from bkdisk.metaservice.store_url import open_store
    with pytest.raises(NotAStoreUrl, match="expected sqlite:PATH or zk://HOST:PORT/ledgers") as bad:
        open_store("mysql:x")
    assert bad.value.url == "mysql:x"
    out = bkdisk("metadata", "serve", "--store", "mysql:x", check=None)
    assert out.returncode == 16
    assert out.stderr.strip().splitlines()[-1] == ("Error: Invalid value for --store: 'mysql:x': expected sqlite:PATH "
                                                   "or zk://HOST:PORT/ledgers")
    with pytest.raises(StoreError, match="no such directory") as info:
        open_store(f"sqlite:{tmp_path}/no/such/m.db")
    assert not isinstance(info.value, NotAStoreUrl) and "\n" not in str(info.value)
    assert not (tmp_path / "no").exists()


def test_list_then_delete_what_list_printed_deletes_that_ledger(served):
    """The ids `list` prints are the ids every other command reads: decimal, as BookKeeper's shell."""
    src = str(GOLDEN / "cluster-3" / "metadata" / "10.bin")
    big = [str(1 << 63), str((1 << 64) - 1)]         # scoped ledger ids use all 64 bits
    served("metadata", "create", "--from", src, "--ledger-id", "20")
    served("metadata", "create", "--from", src, "--ledger-id", "0x20")
    for lid in big:
        served("metadata", "create", "--from", src, "--ledger-id", lid, "--ledger-scope-id", "7")
    rows = [line.split("\t") for line in served("metadata", "list").stdout.splitlines()[1:]]
    assert [r[:2] for r in rows] == [["0", "20"], ["0", "32"], ["7", big[0]], ["7", big[1]]]
    assert rows[3][2] == "0000000000000007ffffffffffffffff"
    printed = rows[1][1]
    served("metadata", "delete", "--ledger-id", printed)
    assert [(x["ledger_scope_id"], x["ledger_id"]) for x in served.json("metadata", "list")] == [
        (0, 20), (7, 1 << 63), (7, (1 << 64) - 1)]
    scope, lid, qname = rows[3]
    assert served("metadata", "get", "--ledger-id", lid, "--ledger-scope-id", scope).stdout.startswith(
        f"ledger {lid} (scope 7) version 0")
    served("metadata", "delete", "--ledger-qualified-name", qname)
    assert served.json("metadata", "watch", "--after-sequence", "5", "--count", "1")["ledger_id"] == (1 << 64) - 1
    assert served("metadata", "watch", "--after-sequence", "5", "--count", "1").stdout.split("\t")[1:4] == [
        "DELETED", "7", big[1]]


def test_each_answer_of_the_service_has_its_own_exit_code(tmp_path):
    s = Served(tmp_path, "--token", "s3cret")
    T = ("--token", "s3cret")              # every call needs it, reads too
    src = str(GOLDEN / "cluster-3" / "metadata" / "10.bin")
    try:
        s("metadata", "create", "--from", src, "--ledger-id", "1", "--token", "s3cret")
        _one_line(s("metadata", "get", "--ledger-id", "2", *T, check=None), 2, "LEDGER_NOT_FOUND")
        _one_line(s("bookies", "info", "bk-1.rack-a", *T, check=None), 2, "BOOKIE_NOT_FOUND")
        _one_line(s("metadata", "create", "--from", src, "--ledger-id", "1", "--token", "s3cret", check=None), 3,
                  "LEDGER_EXISTS")
        _one_line(s("metadata", "delete", "--ledger-id", "1", "--expected-version", "4", "--token", "s3cret",
                    check=None), 5, "BAD_VERSION")
        _one_line(s("metadata", "delete", "--ledger-id", "1", check=None), 6, "PERMISSION_DENIED", "--token")
        # an id the command line takes (0..2^64-1) that scope 0 does not hold: the service refuses it
        _one_line(s("metadata", "get", "--ledger-id", str(1 << 63), *T, check=None), 7, "BAD_REQUEST")
        _one_line(s("bookies", "info", "bad id", *T, check=None), 7, "BAD_REQUEST")
        assert s.json("metadata", "get", "--ledger-id", "1", *T)["version"] == 0    # none of them changed it
    finally:
        s.stop()
    _one_line(bkdisk("metadata", "get", "--ledger-id", "1", "--server", s.addr, "--timeout", "1", check=None), 8,
              f"cannot reach the metadata service at {s.addr}")


CLIENT_COMMANDS = [("metadata", "get", "--ledger-id", "1"), ("metadata", "list"),
                   ("metadata", "create", "--from", str(GOLDEN / "cluster-3" / "metadata" / "10.bin")),
                   ("metadata", "delete", "--ledger-id", "1"), ("metadata", "watch"),
                   ("metadata", "watch", "--ledger-id", "1"),
                   ("metadata", "import", str(GOLDEN / "cluster-3" / "metadata")), ("metadata", "export", "{out}"),
                   ("bookies", "list"), ("bookies", "info", "bk-1"), ("bookies", "resolve", "bk-1"),
                   ("bookies", "register", "bk-1", "--host", "10.0.0.1", "--port", "3181")]


@pytest.mark.parametrize("args", CLIENT_COMMANDS, ids=[" ".join(a[:2]) + (" one" if "--ledger-id" in a and
                                                                          a[1] == "watch" else "")
                                                      for a in CLIENT_COMMANDS])
def test_a_dead_address_is_one_line_and_exit_8_within_the_timeout(args, tmp_path):
    out_dir = tmp_path / "export"
    args = tuple(a.replace("{out}", str(out_dir)) for a in args)
    # (a command that hangs fails here: bkdisk() bounds each run)
    out = bkdisk(*args, "--server", "127.0.0.1:1", "--timeout", "1", check=None)
    _one_line(out, 8, "127.0.0.1:1" if args[1] != "import" else "RPC_")   # (import names the file)
    assert out.stdout == ""                  # no header or partial output before the failure
    assert not out_dir.exists()              # export makes its folder once the service answered


def test_a_ledger_with_two_files_is_imported_once_or_refused_before_anything_is_created(served, tmp_path):
    """A scope-0 ledger named by its 32 digits beside its usual name: the usual one is imported, once
    (both were sent, the second failing LEDGER_EXISTS half way). Two other names of one ledger (leading
    zeros) and none usual: which holds the ledger is not told; refused, nothing created."""
    golden = GOLDEN / "cluster-3" / "metadata"
    both = tmp_path / "both"
    both.mkdir()
    shutil.copy(golden / "10.bin", both / "90.bin")
    shutil.copy(golden / "11.bin", both / ("0" * 30 + "90.bin"))
    shutil.copy(golden / "10.bin", both / "91.bin")
    assert served.json("metadata", "import", str(both))["imported"] == 2
    assert served.json("metadata", "get", "--ledger-id", "0x90")["metadata"] == \
        served.json("metadata", "get", "--ledger-id", "0x91")["metadata"]   # (90.bin's: 10.bin's bytes)
    twins = tmp_path / "twins"
    twins.mkdir()
    shutil.copy(golden / "10.bin", twins / "0a0.bin")
    shutil.copy(golden / "11.bin", twins / "00a0.bin")
    shutil.copy(golden / "10.bin", twins / "a1.bin")
    out = served("metadata", "import", str(twins), check=8)
    assert "ledger 160 has two files" in out.stderr and "nothing imported" in out.stderr, out.stderr
    long = tmp_path / "long"   # (names of 17 to 31 digits are of the same ledger too)
    long.mkdir()
    shutil.copy(golden / "10.bin", long / ("0" * 17 + "a0.bin"))
    shutil.copy(golden / "11.bin", long / ("0" * 30 + "a0.bin"))
    out = served("metadata", "import", str(long), check=8)
    assert "ledger 160 has two files" in out.stderr, out.stderr
    assert [x["ledger_id"] for x in served.json("metadata", "list")] == [0x90, 0x91]


def test_a_tls_file_that_holds_no_pem_is_named_before_any_connection(tmp_path):
    """A CA file that is not PEM made every connection fail, said as a service out of reach."""
    not_pem = tmp_path / "ca.crt"
    not_pem.write_bytes(b"\x30\x82\x01\x0a not a PEM file")
    for args in (("metadata", "list"), ("bookies", "list")):
        out = bkdisk(*args, "--server", "127.0.0.1:1", "--tls-ca", str(not_pem), "--timeout", "1", check=8)
        assert out.stderr.strip() == (f"bkdisk: {not_pem}: expected the CA certificate (--tls-ca) in PEM "
                                      "('-----BEGIN ...'), found none"), out.stderr
