"""`bkdisk metadata serve` as an operator runs it next to a production cluster: never silently open to
the network, tokens from files, the audit trail of every mutation, no token or password in any log
line or error message, the read-only token from the command line, and SIGTERM with streams open."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import grpc
import pytest
from certificates import ca, signed
from conftest import GOLDEN
from test_metadata_cli import BKDISK, Served, bkdisk

from bkdisk.metaservice.auth import READ, TOKEN_HEADER, Tokens
from bkdisk.metaservice.client import MetadataClient
from bkdisk.metaservice.create_batches import create_many
from bkdisk.metaservice.proto import metaservice_pb2 as pb
from bkdisk.metaservice.proto import metaservice_pb2_grpc as pb_grpc
from bkdisk.metaservice.resolver import DiscoveryClient, service_info

TOKEN, READ_TOKEN = "full-Zq81xT", "read-Pw93kL"
HMAC_BIN = GOLDEN / "cluster-3" / "metadata" / "1000.bin"     # password b"c3-open"
PASSWORD = b"c3-open"


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    folder = tmp_path_factory.mktemp("certs")
    authority = ca(folder)
    return authority, signed(folder, authority, "server", san="IP:127.0.0.1")


def _serve(tmp_path, *args: str) -> subprocess.CompletedProcess:
    return bkdisk("metadata", "serve", "--store", f"sqlite:{tmp_path}/m.db", *args, check=None)


def test_serve_refuses_an_address_other_hosts_reach_without_token_and_tls(tmp_path, tls):
    _authority, server = tls
    cert = ("--tls-cert", str(server.cert), "--tls-key", str(server.key))
    for args, missing in ((("--bind", "0.0.0.0:0"), "needs --token (or --token-file) and --tls-cert/--tls-key"),
                          (("--bind", "0.0.0.0:0", "--token", TOKEN), "needs --tls-cert/--tls-key"),
                          (("--bind", "[::]:0", *cert), "needs --token (or --token-file)")):
        out = _serve(tmp_path, *args)
        assert out.returncode == 16, out.stderr
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and missing in lines[0] and "--insecure" in lines[0], out.stderr
        assert TOKEN not in out.stderr
    assert not (tmp_path / "m.db").exists()       # refused before the store was opened


def test_serve_on_another_address_with_insecure_warns_and_with_token_and_tls_starts(tmp_path, tls):
    authority, server = tls
    proc, _port = _start(tmp_path, "--bind", "0.0.0.0:0", "--insecure")
    proc.terminate()
    assert proc.wait(30) == 0
    assert "WARNING: serving on 0.0.0.0 is reachable from other hosts" in proc.stderr.read()
    proc, port = _start(tmp_path, "--bind", "0.0.0.0:0", "--token-file", str(_token_file(tmp_path, TOKEN)),
                        "--tls-cert", str(server.cert), "--tls-key", str(server.key))
    try:
        c = MetadataClient(f"127.0.0.1:{port}", token=TOKEN, root_certificates=authority.cert.read_bytes())
        c.create(HMAC_BIN.read_bytes(), ledger_id=1)      # the token from the file is the one required
        assert c.read(1).version == 0
        c.close()
    finally:
        proc.terminate()
        assert proc.wait(30) == 0
        assert "WARNING" not in proc.stderr.read()
    for host in ("127.0.0.2", "localhost", "[::1]"):     # loopback: no token or TLS needed
        assert _loopback_starts(tmp_path, host)


def _start(tmp_path, *args: str) -> tuple[subprocess.Popen, int]:
    """A service process and its port, once it says it serves (killed if it does not)."""
    proc = subprocess.Popen([*BKDISK, "metadata", "serve", "--store", f"sqlite:{tmp_path}/m.db", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if not line.startswith("bkdisk metadata: serving "):
        proc.kill()
        pytest.fail(f"serve did not start: {line!r} {proc.stderr.read()}")
    return proc, int(line.rsplit(":", 1)[1])


def _loopback_starts(tmp_path, host: str) -> bool:
    proc, _port = _start(tmp_path, "--bind", f"{host}:0")
    proc.terminate()
    return proc.wait(30) == 0


def _token_file(tmp_path, token: str):
    f = tmp_path / f"token-{len(token)}-{token[:4]}"
    f.write_text(token + "\n")
    f.chmod(0o600)
    return f


def test_the_audit_trail_and_no_token_or_password_in_any_line(tmp_path):
    """Every mutation one line (caller, token kind, ledger, outcome); and of every line the service
    and its clients wrote in a run of good, refused and malformed calls, none holds a token or a
    password (raw, hex, or as BookKeeper's text format writes it)."""
    s = Served(tmp_path, "--token-file", str(_token_file(tmp_path, TOKEN)),
               "--read-token-file", str(_token_file(tmp_path, READ_TOKEN)), "-v")
    outputs: list[str] = []
    try:
        def run(*args: str, token: str | None = None, code: int | None = 0) -> str:
            out = s(*args, *(("--token", token) if token else ()), check=code)
            outputs.extend([out.stdout, out.stderr])
            return out.stdout
        src = str(HMAC_BIN)
        run("metadata", "create", "--from", src, "--ledger-id", "5", token=TOKEN)
        run("metadata", "create", "--from", src, "--ledger-id", "5", token=TOKEN, code=None)     # exists
        run("metadata", "create", "--from", src, "--ledger-id", "6", code=6)                     # no token
        run("metadata", "create", "--from", src, "--ledger-id", "6", token="guess-" + TOKEN, code=6)
        run("metadata", "create", "--from", src, "--ledger-id", "6", token=READ_TOKEN, code=6)   # read-only
        run("metadata", "delete", "--ledger-id", "77", token=TOKEN, code=2)
        got = run("metadata", "get", "--ledger-id", "5", "--json", token=READ_TOKEN)
        assert '"password_hex": null' in got
        full = run("metadata", "get", "--ledger-id", "5", "--json", token=TOKEN)
        assert PASSWORD.hex() in full                       # the full token's own answer keeps it
        outputs.remove(full)
        run("metadata", "export", str(tmp_path / "ro"), "--format", "2", token=READ_TOKEN)
        assert all(PASSWORD not in f.read_bytes() for f in (tmp_path / "ro").iterdir())
        bad = tmp_path / "bad.bin"
        bad.write_bytes(HMAC_BIN.read_bytes()[:-9])
        run("metadata", "create", "--from", str(bad), "--ledger-id", "8", token=TOKEN, code=8)
        c = MetadataClient(s.addr, token=TOKEN)
        broken = bytearray(HMAC_BIN.read_bytes())
        broken[broken.index(PASSWORD) - 1] += 3           # the password's length wrong: malformed
        stub = pb_grpc.LedgerMetadataServiceStub(c.ch.channel)
        r = stub.Create(pb.LedgerMetadataRequest(ledger_id=9, serialized_metadata=bytes(broken)),
                        metadata=c.ch.metadata, timeout=5)
        assert pb.StatusCode.Name(r.code) == "BAD_REQUEST"
        outputs.append(r.message)
        c.write(5, HMAC_BIN.read_bytes(), 0)
        c.remove(5)
        c.close()
        reg = DiscoveryClient(s.addr, token=TOKEN).register("bk-1", service_info("10.0.0.1", 3181))
        reg.close()
    finally:
        s.proc.terminate()
        assert s.proc.wait(30) == 0
    server_log = s.proc.stderr.read()
    outputs += [server_log, s.proc.stdout.read()]
    audit = [line.split(" bkdisk.metaservice.audit ", 1)[1] for line in server_log.splitlines()
             if " bkdisk.metaservice.audit " in line]
    shapes = [(a.split()[0], a.split()[2], a.split()[3], a.split()[-1]) for a in audit]
    q5, q6 = "ledger=" + "5".zfill(32), "ledger=" + "6".zfill(32)
    assert shapes[:6] == [("Create", "token=full", q5, "outcome=SUCCESS"),
                          ("Create", "token=full", q5, "outcome=LEDGER_EXISTS"),
                          ("Create", "token=no-token", q6, "outcome=PERMISSION_DENIED"),
                          ("Create", "token=wrong-token", q6, "outcome=PERMISSION_DENIED"),
                          ("Create", "token=read", q6, "outcome=PERMISSION_DENIED"),
                          ("Remove", "token=full", "ledger=" + "4d".zfill(32), "outcome=LEDGER_NOT_FOUND")]
    assert [x[0] for x in shapes[6:]] == ["Create", "Write", "Remove", "Register", "Register-ended"]
    assert all(a.split()[1].startswith("peer=ipv4:127.0.0.1:") for a in audit)
    text = "\n".join(outputs)
    for secret in (TOKEN, READ_TOKEN, "guess-", PASSWORD.decode(), PASSWORD.hex(), PASSWORD.hex().upper()):
        assert secret not in text, secret
    assert "Read " in server_log and "ReadLedgers " in server_log     # -v: the request lines were there
    assert re.search(r" Create ipv4:127\.0\.0\.1:\d+ PERMISSION_DENIED ", server_log)       # refused ones too


def test_a_batch_is_audited_a_line_an_item_each_with_the_prefix_of_a_record(tmp_path):
    s = Served(tmp_path, "--token", TOKEN)
    try:
        c = MetadataClient(s.addr, token=TOKEN)
        r = create_many(c, [(0, 5, HMAC_BIN.read_bytes()), (0, 5, HMAC_BIN.read_bytes()), (4, 6, b"junk")])
        assert [getattr(x, "code", "SUCCESS") for x in r] == ["SUCCESS", "LEDGER_EXISTS", "BAD_REQUEST"]
        c.close()
    finally:
        s.proc.terminate()
        assert s.proc.wait(30) == 0
    lines = [x for x in s.proc.stderr.read().splitlines() if "CreateMany" in x]
    prefix = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} bkdisk\.metaservice\.audit "
    for line, (i, ledger, outcome) in zip(lines, [(0, "5", "SUCCESS"), (1, "5", "LEDGER_EXISTS"),
                                                  (2, "4" + "6".zfill(16), "BAD_REQUEST")], strict=True):
        assert re.fullmatch(prefix + rf"CreateMany\[{i}\] peer=ipv4:127\.0\.0\.1:\d+ token=full "
                            rf"ledger={ledger.zfill(32)} outcome={outcome}", line), line


def test_sigterm_stops_the_service_within_5_seconds_with_streams_open(tmp_path):
    s = Served(tmp_path, "--token", TOKEN)
    c = MetadataClient(s.addr, token=TOKEN)
    for lid in range(1, 200):
        c.create(HMAC_BIN.read_bytes(), ledger_id=lid)
    stub = pb_grpc.LedgerMetadataServiceStub(c.ch.channel)
    md = c.ch.metadata
    held = threading.Event()
    streams = [stub.Watch(iter([pb.LedgerMetadataRequest(watch_all=True)]), metadata=md),
               stub.Watch(_until(held, pb.LedgerMetadataRequest(ledger_id=1)), metadata=md),
               stub.ReadLedgers(pb.ReadLedgersRequest(page_size=1), metadata=md),   # unread: blocked on flow control
               stub.Iterate(pb.GetLedgerRangesRequest(limit_per_response=1), metadata=md)]
    for x in streams[2:]:
        next(x)
    d = DiscoveryClient(s.addr, token=TOKEN)
    reg = d.register("bk-1", service_info("10.0.0.1", 3181))
    watching = d.stub.WatchBookies(pb.BookieRequest(), metadata=d.ch.metadata)
    next(watching)
    with grpc.insecure_channel(s.addr) as raw:          # and garbage a moment before (its stderr unread)
        garbage = raw.unary_unary("/bkdisk.metaservice.LedgerMetadataService/Read")
        for _ in range(300):
            with pytest.raises(grpc.RpcError):
                garbage(b"\x0f\xff", timeout=5)
    t0 = time.monotonic()
    s.proc.send_signal(signal.SIGTERM)
    try:
        code = s.proc.wait(5)
    except subprocess.TimeoutExpired:
        os.kill(s.proc.pid, signal.SIGKILL)
        pytest.fail("the service was still running 5 s after SIGTERM")
    finally:
        held.set()
        reg.close()
        for x in [*streams, watching]:
            x.cancel()
        c.close()
        d.close()
    assert code == 0 and time.monotonic() - t0 < 5
    assert "stopped serving" in s.proc.stdout.read()


def _until(event: threading.Event, *requests):
    yield from requests
    event.wait(60)


def test_thin_clients_take_the_token_from_the_environment(tmp_path, monkeypatch):
    """bookie-fsck --metadata, bkdisk space --metadata and the audit's metadata source: the token
    from BKDISK_METADATA_TOKEN; without it, one line saying the service refused."""
    s = Served(tmp_path, "--token", TOKEN)
    try:
        root = GOLDEN / "interleaved-v4-smallpage"
        s("metadata", "import", str(root / "metadata"), "--token", TOKEN)
        url = f"grpc://{s.addr}"
        commands = {"fsck": [sys.executable, "-c", "from bkdisk.fsck_cli import main; main()", str(root),
                             "--metadata", url, "--json", "--no-progress"],
                    "space": [*BKDISK, "space", str(root), "--metadata", url, "--json"]}
        for name, argv in commands.items():
            env = {k: v for k, v in os.environ.items() if k != "BKDISK_METADATA_TOKEN"}
            refused = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)
            lines = refused.stderr.strip().splitlines()
            assert refused.returncode == 8 and len(lines) == 1, (name, refused.stderr)
            assert "PERMISSION_DENIED" in lines[0]
            assert "BKDISK_METADATA_TOKEN" in lines[0]
            done = subprocess.run(argv, capture_output=True, text=True, timeout=300,
                                  env={**env, "BKDISK_METADATA_TOKEN": TOKEN})
            assert done.returncode in (0, 4), (name, done.stderr)
            assert TOKEN not in done.stdout + done.stderr + refused.stderr
        from bkdisk.audit.metadata_source import open_source
        monkeypatch.setenv("BKDISK_METADATA_TOKEN", TOKEN)
        source = open_source(url)
        assert TOKEN not in source.describe() and TOKEN not in repr(source)
        assert len(source.load()) == len({p.name.split(".")[0] for p in (root / "metadata").iterdir()})
    finally:
        s.stop()


def test_token_options_misused_are_one_line_and_never_echo_a_token(tmp_path):
    empty = tmp_path / "empty"
    empty.write_text("\n")
    shared, group_writes = tmp_path / "shared", tmp_path / "group-writes"
    for f, mode in ((shared, 0o644), (group_writes, 0o660)):   # (0644: as a umask of 022 leaves a file)
        f.write_text(TOKEN + "\n")
        f.chmod(mode)
    for args, code, words in (
            (("--token-file", str(shared)), 8, f"{shared}: expected a token file only its owner (and group) can "
                                               "read, found mode 0644"),
            (("--token-file", str(group_writes)), 8, "found mode 0660: others can read or change the token"),
            (("--token-file", str(tmp_path / "absent")), 8, "absent: cannot read the token"),
            (("--token-file", str(empty)), 8, "expected one line holding the token"),
            (("--token", TOKEN, "--token-file", str(_token_file(tmp_path, TOKEN))), 16, "not both"),
            (("--read-token", READ_TOKEN), 16, "--read-token needs --token"),
            (("--token", TOKEN, "--read-token", TOKEN), 16, "must differ"),
            (("--tls-client-ca", str(HMAC_BIN)), 16, "--tls-client-ca needs --tls-cert")):
        out = _serve(tmp_path, *args)
        assert out.returncode == code and words in out.stderr, (args, out.stderr)
        assert TOKEN not in out.stderr and READ_TOKEN not in out.stderr
        assert code == 16 or len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_a_token_grpc_cannot_carry_is_refused_before_any_call_and_never_breaks_a_comparison(tmp_path):
    """gRPC sends a call's metadata values as printable ASCII only: a token with a control character, a
    letter outside ASCII or a space at an end could never authenticate (the service started, every call
    failed in the library's words, exit 8 'retry'), and the service compared such a read token with a
    traceback per call. Refused where it is given, naming where, never quoting it."""
    odd = tmp_path / "odd"
    odd.write_text("t\u00f6k\u00e9n\n")
    for args, code, words in (
            (("--token", "A\nB"), 16, "--token: expected a token of printable ASCII characters"),
            (("--token", "FULL", "--read-token", "lecture-\u00e9"), 16, "--read-token: expected a token"),
            (("--token", " FULL"), 16, "a space at its start or end"),
            (("--token-file", str(odd)), 8, f"{odd}: expected a token of printable ASCII characters")):
        out = _serve(tmp_path, *args)
        assert out.returncode == code and words in out.stderr, (args, out.stderr)
        assert "FULL" not in out.stderr.replace("FULL,", "") and "Traceback" not in out.stderr
    for token in ("FULL\n", "x\ty", "caf\u00e9"):
        out = bkdisk("metadata", "list", "--server", "127.0.0.1:1", "--token", token, check=None)
        assert out.returncode == 16 and "--token" in out.stderr and "printable ASCII" in out.stderr, out.stderr
    env = {**os.environ, "BKDISK_METADATA_TOKEN": "x\ry"}
    out = subprocess.run([sys.executable, "-c", "from bkdisk.fsck_cli import main; main()", str(GOLDEN / "cluster-3"
                          / "bookies" / "bk-1.rack-a"), "--metadata", "grpc://127.0.0.1:1"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 8 and out.stderr.strip().splitlines() == [
        "bookie-fsck: env BKDISK_METADATA_TOKEN: expected a token of printable ASCII characters, found a control "
        "character at position 2"], out.stderr
    # A token from the environment is named as such, and checked only by a command that calls a service
    out = subprocess.run([*BKDISK, "metadata", "list", "--server", "127.0.0.1:1"], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 16 and "--token" not in out.stderr and ("env BKDISK_METADATA_TOKEN: expected a token "
                                                                      "of printable ASCII") in out.stderr, out.stderr
    (tmp_path / "nb").mkdir()
    (tmp_path / "nb" / "x").write_text("x")
    for service, words in (([], "not a bookie disk"),
                           (["--import", "grpc://127.0.0.1:1"], "env BKDISK_METADATA_TOKEN")):
        out = subprocess.run([*BKDISK, "salvage", str(tmp_path / "nb"), "--out", str(tmp_path / "o"), "-q", *service],
                             env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 8 and len(out.stderr.strip().splitlines()) == 1 and words in out.stderr, out.stderr
    tokens = Tokens(full="FULL", read="READ")
    assert tokens.kind([(TOKEN_HEADER, "t\u00f6k\u00e9n")]) is None and tokens.kind([(TOKEN_HEADER, "READ")]) == READ


def test_an_address_in_use_or_a_certificate_that_is_not_pem_is_one_line(tmp_path):
    import socket

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    garbage = tmp_path / "bad.pem"
    garbage.write_text("garbage\n")
    try:
        port = taken.getsockname()[1]
        for args, words in ((("--bind", f"127.0.0.1:{port}"), f"cannot serve on 127.0.0.1:{port}"),
                            (("--bind", "127.0.0.1:0", "--tls-cert", str(garbage), "--tls-key", str(garbage)),
                             "the certificate and key are not a PEM pair")):
            out = _serve(tmp_path, *args)
            assert out.returncode == 8 and out.stderr.strip().splitlines() == [out.stderr.strip()], out.stderr
            assert words in out.stderr and out.stderr.startswith("bkdisk: "), out.stderr
    finally:
        taken.close()


def test_the_command_line_presents_a_client_certificate_to_a_service_that_requires_one(tmp_path, tls):
    authority, server = tls
    client = signed(tmp_path, authority, "operator")
    forged = signed(tmp_path, ca(tmp_path, "other-ca"), "forged")
    proc, port = _start(tmp_path, "--bind", "127.0.0.1:0", "--token", TOKEN, "--tls-cert", str(server.cert),
                        "--tls-key", str(server.key), "--tls-client-ca", str(authority.cert))
    call = ("metadata", "list", "--server", f"127.0.0.1:{port}", "--token", TOKEN, "--tls-ca", str(authority.cert),
            "--timeout", "3", "--json")
    try:
        assert json.loads(bkdisk(*call, "--tls-cert", str(client.cert), "--tls-key", str(client.key)).stdout) == []
        for refused in ((), ("--tls-cert", str(forged.cert), "--tls-key", str(forged.key))):
            out = bkdisk(*call, *refused, check=None)      # the handshake fails: no call is made
            assert out.returncode == 8 and out.stderr.count("\n") == 1 and "cannot reach" in out.stderr, out.stderr
        for half in (("--tls-cert", str(client.cert)), ("--tls-key", str(client.key))):
            out = bkdisk(*call, *half, check=None)
            assert out.returncode == 16 and "--tls-cert and --tls-key go together" in out.stderr, out.stderr
        plain = [a for a in call if a not in ("--tls-ca", str(authority.cert))]
        out = bkdisk(*plain, "--tls-cert", str(client.cert), "--tls-key", str(client.key), check=None)
        assert out.returncode == 16 and "need --tls-ca" in out.stderr, out.stderr
    finally:
        proc.terminate()
        assert proc.wait(30) == 0
