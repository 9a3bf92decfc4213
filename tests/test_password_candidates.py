"""Password candidates: a text file read one password a line, and the master key matched against them
with the empty password first (SHA-1("ledger" + password), as the golden manifests record)."""
from __future__ import annotations

import json
import os
import threading
import time

import pytest
from conftest import GOLDEN

from bkdisk.bookie import password_candidates
from bkdisk.bookie.password_candidates import CandidatesError, match_password, read_candidates
from bkdisk.formats.digests import master_key


def _golden_ledgers() -> list[dict]:
    return json.loads((GOLDEN / "cluster-3" / "manifest.json").read_text())["ledgers"]


def test_candidates_are_lines_kept_as_written_each_once(tmp_path):
    f = tmp_path / "pw.txt"
    f.write_bytes(b"alpha\r\n\n beta \nalpha\nz\xc3\xa9ta")
    assert read_candidates(str(f)) == [b"alpha", b" beta ", "zéta".encode()]


def test_golden_master_keys_match_their_passwords_and_the_empty_one_first():
    for lg in _golden_ledgers():
        key, pw = bytes.fromhex(lg["master_key_hex"]), bytes.fromhex(lg["password_hex"])
        assert match_password(key, [b"wrong", pw]) == pw
        assert match_password(key, [b"wrong"]) == (b"" if pw == b"" else None)
    assert match_password(master_key(b""), []) == b""


@pytest.mark.parametrize("data,what", [(b"pw\x00x", "offset 2: expected a text file of passwords, one a line, "
                                                    "found a NUL byte"),
                                       (b"ok\n\xff\xfe", "offset 3: expected a text file of passwords (UTF-8), "
                                                        "found byte ff")])
def test_a_file_that_is_not_text_is_one_line_naming_the_offset(tmp_path, data, what):
    f = tmp_path / "pw.bin"
    f.write_bytes(data)
    with pytest.raises(CandidatesError) as e:
        read_candidates(str(f))
    assert str(e.value) == f"{f}: {what}"


def test_a_missing_file_is_one_line(tmp_path):
    with pytest.raises(CandidatesError, match=r"cannot read the password candidates file \(No such file"):
        read_candidates(str(tmp_path / "none"))


def test_the_api_others_call_takes_its_arguments_by_name():
    assert match_password(master_key=master_key(b"x"), candidates=[b"x"]) == b"x"


def test_a_utf8_byte_order_mark_is_not_part_of_the_first_password(tmp_path):
    f = tmp_path / "pw.txt"
    f.write_bytes(b"\xef\xbb\xbfalpha\r\nbeta\r\n")
    assert read_candidates(str(f)) == [b"alpha", b"beta"]
    f.write_bytes(b"\xef\xbb\xbfok\n\xff")
    with pytest.raises(CandidatesError, match=r": offset 6: expected a text file of passwords \(UTF-8\)"):
        read_candidates(str(f))


def test_a_utf16_file_is_named_as_such(tmp_path):
    f = tmp_path / "pw.txt"
    f.write_bytes("alpha\r\n".encode("utf-16"))
    with pytest.raises(CandidatesError) as e:
        read_candidates(str(f))
    assert str(e.value) == (f"{f}: offset 0: expected a text file of passwords (UTF-8), found a UTF-16 "
                            "byte-order mark (save the file as UTF-8)")


def test_a_named_pipe_is_read_from_its_writer(tmp_path):
    fifo = tmp_path / "pw.fifo"
    os.mkfifo(fifo)

    def write():
        with open(fifo, "wb") as w:
            w.write(b"alpha\n")
            time.sleep(0.2)     # a writer that pauses mid-way is waited for, to its end
            w.write(b"beta\n")

    writer = threading.Thread(target=write)
    writer.start()
    try:
        assert read_candidates(str(fifo)) == [b"alpha", b"beta"]
    finally:
        writer.join()


def test_a_named_pipe_nobody_writes_is_an_error_not_a_hang(tmp_path, monkeypatch):
    fifo = tmp_path / "pw.fifo"
    os.mkfifo(fifo)
    monkeypatch.setattr(password_candidates, "FIFO_WAIT_S", 0.3)
    raised: list[BaseException] = []

    def read():
        try:
            read_candidates(str(fifo))
        except BaseException as e:      # noqa: BLE001 - handed to the test's thread
            raised.append(e)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(30)     # a hang guard: the reader is left blocked if the wait is not bounded
    assert not reader.is_alive(), "reading a pipe nobody writes did not return"
    assert [str(e) for e in raised] == [f"{fifo}: offset 0: expected passwords from the pipe's writer, none came "
                                        "within 0.3 s"]
