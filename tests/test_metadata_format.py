"""Ledger metadata formats 1, 2 and 3: golden byte-exact round trips, manifest agreement, fuzzing."""
from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import GOLDEN
from google.protobuf import text_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bkdisk.formats.errors import FormatError
from bkdisk.formats.ledger_metadata import INT32, INT64, LedgerMetadata
from bkdisk.formats.metadata import DIGEST_TYPES, HEADER_PREFIX, parse_metadata, serialize_metadata
from bkdisk.formats.proto import LedgerMetadataFormat, java_escape_bytes, java_text_format
from bkdisk.formats.proto.regenerate import regenerate

MISSING = GOLDEN / "<golden folder missing>"


def _golden_metadata_files() -> list[Path]:
    files = sorted(GOLDEN.glob("*/metadata/*")) + sorted(GOLDEN.glob("metadata-vectors/*.bin"))
    return files or [MISSING]


GOLDEN_FILES = _golden_metadata_files()


def _ids(paths: list[Path]) -> list[str]:
    return [str(p.relative_to(GOLDEN)) if p != MISSING else "missing" for p in paths]


def _manifest_entries() -> list[tuple[Path, dict, dict]]:
    out = []
    for manifest in sorted(GOLDEN.glob("*/manifest.json")):
        doc = json.loads(manifest.read_text())
        for entry in doc.get("metadata_files", []):
            out.append((manifest.parent, entry, doc))
    return out or [(MISSING, {}, {})]


MANIFEST_ENTRIES = _manifest_entries()


def test_golden_folder_is_present_with_every_metadata_kind():
    assert GOLDEN.is_dir(), f"golden corpus folder missing: {GOLDEN}"
    names = [p.name for p in GOLDEN_FILES]
    assert sum(n.endswith(".bin") for n in names) >= 20
    assert sum(n.endswith(".v1.txt") for n in names) >= 15
    assert sum(n.endswith(".txt") and not n.endswith(".v1.txt") for n in names) >= 20
    assert len(list(GOLDEN.glob("cluster-3/metadata/*"))) == 12


@pytest.mark.parametrize("path", GOLDEN_FILES, ids=_ids(GOLDEN_FILES))
def test_golden_metadata_reserializes_byte_for_byte(path: Path):
    assert path.is_file(), f"golden file missing: {path}"
    data = path.read_bytes()
    md = parse_metadata(data, str(path))
    assert serialize_metadata(md) == data
    assert parse_metadata(serialize_metadata(md)) == md


@pytest.mark.parametrize("path", GOLDEN_FILES, ids=_ids(GOLDEN_FILES))
def test_golden_metadata_format_version_matches_file_kind(path: Path):
    assert path.is_file(), f"golden file missing: {path}"
    md = parse_metadata(path.read_bytes())
    expected = int(path.read_bytes().split(b"\n", 1)[0].split(b"\t")[1])
    assert md.format_version == expected
    if path.parent.name == "metadata":
        want = 1 if path.name.endswith(".v1.txt") else 2 if path.suffix == ".txt" else 3
        assert md.format_version == want


def _java_ensembles(md: LedgerMetadata) -> str:
    return "{" + ", ".join(f"{first}=[{', '.join(members)}]" for first, members in md.ensembles) + "}"


@pytest.mark.parametrize("corpus,entry,doc", MANIFEST_ENTRIES,
                         ids=[f"{c.name}/{e.get('file')}" for c, e, _ in MANIFEST_ENTRIES])
def test_golden_metadata_agrees_with_manifest(corpus: Path, entry: dict, doc: dict):
    assert corpus.is_dir(), f"golden corpus missing: {corpus}"
    md = parse_metadata((corpus / entry["file"]).read_bytes())
    assert md.format_version == entry["metadata_format_version"]
    assert md.state == entry["state"]
    assert md.effective_last_entry_id == entry["last_entry_id"]
    assert md.effective_length == entry["length"]
    # the golden writer left non-closed ledgers at -1/0, so the stored values agree too
    assert md.last_entry_id == entry["last_entry_id"]
    assert md.length == entry["length"]
    if "ensembles" in entry:
        assert _java_ensembles(md) == entry["ensembles"]
    else:
        assert len(md.ensembles) == 1 and md.ensembles[0][0] == 0
        assert "[" + ", ".join(md.ensembles[0][1]) + "]" == entry["ensemble"]
        assert md.ensembles[0][1][0] == doc["bookie_id"]
    fields = dict(re.findall(r"(\w+)=([^,{}\[\]]+)", entry["to_string"].split("ensembles=")[0]))
    assert md.ensemble_size == int(fields["ensembleSize"])
    assert md.write_quorum == int(fields["writeQuorumSize"])
    ledger = next(x for x in doc["ledgers"] if x["ledger_id"] == entry["ledger_id"])
    if md.format_version == 1:
        # format 1 has no ack quorum (reads as the write quorum), digest, password or ctime
        assert (md.ack_quorum, md.has_ack_quorum) == (md.write_quorum, False)
        assert (md.digest_type, md.password, md.ctime, md.custom_metadata, md.ctoken) == (None, None, None, (), None)
        return
    assert md.ack_quorum == int(fields["ackQuorumSize"])
    assert md.digest_type == ledger["digest_type"]
    assert fields["digestType"] == ledger["digest_type_client_api"]  # Java prints the client API name
    assert md.password is not None and md.password.hex() == ledger["password_hex"]
    assert md.custom_metadata == (("application", b"bkref-golden"),)
    lid = int(entry["ledger_id"])
    if md.format_version == 3:
        assert md.ctime == 1700000000000 + lid % 1000
        assert md.ctoken == 0
    else:
        assert md.ctoken is None
        assert md.ctime in (None, 1700000000000 + lid % 1000)


def test_cluster_metadata_agrees_with_cluster_ledger_table():
    doc = json.loads((GOLDEN / "cluster-3" / "manifest.json").read_text())
    assert len(doc["ledgers"]) == 6
    for ledger in doc["ledgers"]:
        assert len(ledger["metadata_files"]) == 2
        for rel in ledger["metadata_files"]:
            md = parse_metadata((GOLDEN / "cluster-3" / rel).read_bytes())
            assert md.ensemble_size == ledger["ensemble_size"]
            assert md.write_quorum == ledger["write_quorum_size"]
            assert md.ack_quorum == ledger["ack_quorum_size"]
            assert [{"first_entry_id": f, "bookies": list(m)} for f, m in md.ensembles] == ledger["ensembles"]
            assert md.state == ledger["state"]
            assert md.last_entry_id == ledger["metadata_last_entry_id"]
            assert md.length == ledger["metadata_length"]
            assert md.digest_type == ledger["digest_type"]
            assert md.password.hex() == ledger["password_hex"]
            if md.state == "CLOSED":
                assert md.last_entry_id == ledger["last_entry_id"]
                assert md.ensemble_at(md.last_entry_id) == tuple(ledger["ensembles"][-1]["bookies"])


def _vector(name: str) -> bytes:
    path = GOLDEN / "metadata-vectors" / name
    assert path.is_file(), f"metadata vector missing: {path}"
    return path.read_bytes()


def test_v1_vector_decodes_in_recovery_from_minus_102_line():
    data = _vector("v1-bk4.0.bin")
    assert data.endswith(b"\n-102\tCLOSED")
    md = parse_metadata(data)
    assert md == LedgerMetadata(
        format_version=1, write_quorum=2, ensemble_size=3, ack_quorum=2, length=0, last_entry_id=-1,
        state="IN_RECOVERY",
        ensembles=((0, ("192.0.2.1:1234", "192.0.2.2:1234", "192.0.2.3:1234")),),
        has_last_entry_id=False, has_ack_quorum=False)
    assert md.effective_last_entry_id == -1 and md.effective_length == 0


def test_v2_vectors_decode_with_and_without_ctime():
    base = parse_metadata(_vector("v2-bk4.2.bin"))
    with_ctime = parse_metadata(_vector("v2-ctime-bk4.4.bin"))
    assert base.ctime is None
    assert with_ctime.ctime == 1544002383075
    assert replace(with_ctime, ctime=None) == base
    assert base == LedgerMetadata(
        format_version=2, write_quorum=2, ensemble_size=3, ack_quorum=2, length=0, last_entry_id=-1,
        state="IN_RECOVERY",
        ensembles=((0, ("192.0.2.1:1234", "192.0.2.2:1234", "192.0.2.3:1234")),),
        digest_type="CRC32", password=b"passwd")


def test_v3_vector_decodes_every_field_including_ctoken():
    md = parse_metadata(_vector("v3-bk4.9.bin"))
    assert md == LedgerMetadata(
        format_version=3, write_quorum=2, ensemble_size=3, ack_quorum=1, length=0, last_entry_id=-1,
        state="OPEN",
        ensembles=((0, ("192.0.2.1:3181", "192.0.2.2:3181", "192.0.2.3:3181")),),
        digest_type="CRC32C", password=b"foobar", ctime=-1, ctoken=0)


def _read_varint(data: bytes) -> tuple[int, int]:
    value = shift = 0
    for i, b in enumerate(data):
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, i + 1
    raise AssertionError("unterminated varint")


V3_GOLDEN = [p for p in GOLDEN_FILES if p.is_file() and p.read_bytes().startswith(HEADER_PREFIX + b"3\n")]
V2_GOLDEN = [p for p in GOLDEN_FILES if p.is_file() and p.read_bytes().startswith(HEADER_PREFIX + b"2\n")]


def test_protobuf_serialization_reproduces_every_golden_v3_body():
    assert len(V3_GOLDEN) >= 20
    for path in V3_GOLDEN:
        body = path.read_bytes()[len(HEADER_PREFIX) + 2:]
        size, n = _read_varint(body)
        assert size == len(body) - n
        msg = LedgerMetadataFormat()
        msg.ParseFromString(body[n:])
        assert msg.SerializeToString() == body[n:]


def test_java_text_printer_reproduces_every_golden_v2_body():
    assert len(V2_GOLDEN) >= 20
    for path in V2_GOLDEN:
        body = path.read_bytes().split(b"\n", 1)[1]
        msg = LedgerMetadataFormat()
        text_format.Parse(body.decode("utf-8"), msg)
        assert java_text_format(msg).encode("utf-8") == body


def test_java_escapes_use_letters_octal_and_escape_single_quote():
    assert java_escape_bytes(b"\x07\x08\x0c\n\r\t\x0b\\'\"") == "\\a\\b\\f\\n\\r\\t\\v\\\\\\'\\\""
    assert java_escape_bytes(b"\x00\x1f\x7f\x80\xff") == "\\000\\037\\177\\200\\377"
    assert java_escape_bytes("é".encode()) == "\\303\\251"
    plain = bytes(b for b in range(0x20, 0x7F) if b not in b"\\'\"")
    assert java_escape_bytes(plain) == plain.decode("ascii")


def test_v2_password_with_control_and_high_bytes_round_trips():
    md = parse_metadata(_vector("v2-bk4.2.bin"))
    odd = replace(md, password=bytes(range(256)), custom_metadata=(("k\u00e9y\t", b"\x00\xff'"),))
    data = serialize_metadata(odd)
    assert b'password: "\\000\\001\\002\\003\\004\\005\\006\\a\\b\\t\\n\\v\\f\\r\\016' in data
    assert b'key: "k\\303\\251y\\t"' in data
    assert parse_metadata(data) == odd


# --- the proto declaration -------------------------------------------------------------------

FIELD_TABLE = {
    1: ("quorumSize", "int32", "required"), 2: ("ensembleSize", "int32", "required"),
    3: ("length", "int64", "required"), 4: ("lastEntryId", "int64", "optional"),
    5: ("state", "enum", "required"), 6: ("segment", "message", "repeated"),
    7: ("digestType", "enum", "optional"), 8: ("password", "bytes", "optional"),
    9: ("ackQuorumSize", "int32", "optional"), 10: ("ctime", "int64", "optional"),
    11: ("customMetadata", "message", "repeated"), 12: ("cToken", "int64", "optional"),
}
_TYPE_NAMES = {3: "int64", 5: "int32", 9: "string", 11: "message", 12: "bytes", 14: "enum"}


def _label(f) -> str:
    return "repeated" if f.is_repeated else "required" if f.is_required else "optional"


def test_proto_declares_bookkeeper_field_numbers_types_and_labels():
    d = LedgerMetadataFormat.DESCRIPTOR
    assert d.full_name == "bkdisk.formats.LedgerMetadataFormat"
    assert {f.number: (f.name, _TYPE_NAMES[f.type], _label(f)) for f in d.fields} == FIELD_TABLE
    seg = d.nested_types_by_name["Segment"]
    assert {f.number: (f.name, _TYPE_NAMES[f.type], _label(f)) for f in seg.fields} == {
        1: ("ensembleMember", "string", "repeated"), 2: ("firstEntryId", "int64", "required")}
    entry = d.nested_types_by_name["cMetadataMapEntry"]
    assert {f.number: (f.name, _TYPE_NAMES[f.type], _label(f)) for f in entry.fields} == {
        1: ("key", "string", "optional"), 2: ("value", "bytes", "optional")}
    assert {v.name: v.number for v in d.enum_types_by_name["State"].values} == {
        "OPEN": 1, "IN_RECOVERY": 2, "CLOSED": 3}
    assert {v.name: v.number for v in d.enum_types_by_name["DigestType"].values} == {
        "CRC32": 1, "HMAC": 2, "CRC32C": 3, "DUMMY": 4}
    assert d.fields_by_name["state"].default_value == 1


def test_generated_pb2_matches_a_fresh_protoc_run(tmp_path: Path):
    checked_in = Path(__file__).resolve().parents[1] / "formats" / "proto" / "bookkeeper_formats_pb2.py"
    fresh = regenerate(tmp_path)
    assert fresh.read_bytes() == checked_in.read_bytes()


# --- precise rejections ----------------------------------------------------------------------

V1_GOOD = b"BookieMetadataFormatVersion\t1\n2\n3\n0\n0\ta:1\tb:1\tc:1\n7\tCLOSED"


@pytest.mark.parametrize("data,offset", [
    (b"", 0),
    (b"BookieMetadataFormatVersion", 27),
    (b"BookieMetadataFormatVersion 3\n", 27),
    (b"bookieMetadataFormatVersion\t3\n", 0),
    (b"BookieMetadataFormatVersion\t4\n", 28),
    (b"BookieMetadataFormatVersion\t03\n", 28),
    (b"BookieMetadataFormatVersion\t0\n", 28),
    (b"BookieMetadataFormatVersion\t12345678901\n", 28),
    (b"BookieMetadataFormatVersion\t3", 28),
])
def test_bad_header_raises_format_error_at_offset(data: bytes, offset: int):
    with pytest.raises(FormatError) as exc:
        parse_metadata(data, "hdr")
    assert exc.value.offset == offset and exc.value.path == "hdr"


@pytest.mark.parametrize("data", [
    V1_GOOD + b"\n",                                   # LF after the closing line
    V1_GOOD.replace(b"\n3\n", b"\r\n3\n"),             # CR line ending
    V1_GOOD.replace(b"\n2\n", b"\n+2\n"),              # non-canonical number
    V1_GOOD.replace(b"\n2\n", b"\n02\n"),
    V1_GOOD.replace(b"\n2\n", b"\n2147483648\n"),      # write quorum beyond int32
    V1_GOOD.replace(b"\ta:1\tb:1\tc:1", b""),          # ensemble line without bookies
    V1_GOOD.replace(b"\tb:1", b"\t"),                  # empty bookie id
    V1_GOOD.replace(b"\tCLOSED", b"\tclosed"),
    V1_GOOD.replace(b"7\tCLOSED", b"0\ta:1"),          # ensemble line missing its LF
    V1_GOOD.replace(b"\n7\tCLOSED", b"\n7\tCLOSED\n8\tCLOSED"),
    b"BookieMetadataFormatVersion\t1\n2\n3\n",         # no length line
    b"BookieMetadataFormatVersion\t1\n2\n3\n\xff\n",   # not UTF-8
])
def test_malformed_v1_raises_format_error(data: bytes):
    with pytest.raises(FormatError):
        parse_metadata(data)


def test_v1_without_closing_line_is_open():
    md = parse_metadata(V1_GOOD[: V1_GOOD.rindex(b"\n") + 1])
    assert (md.state, md.last_entry_id, md.has_last_entry_id) == ("OPEN", -1, False)


def _v3(body: bytes) -> bytes:
    return HEADER_PREFIX + b"3\n" + bytes([len(body)]) + body


V3_MINIMAL = b"\x08\x01\x10\x01\x18\x00\x28\x01"


@pytest.mark.parametrize("data", [
    _v3(V3_MINIMAL) + b"\x00",                                         # trailing byte
    HEADER_PREFIX + b"3\n" + bytes([len(V3_MINIMAL) + 1]) + V3_MINIMAL,  # short message
    HEADER_PREFIX + b"3\n\x88\x00" + V3_MINIMAL,                       # non-minimal varint
    HEADER_PREFIX + b"3\n\xff\xff\xff\xff\x0f",                        # length >= 2^31
    HEADER_PREFIX + b"3\n\x80\x80\x80\x80\x80\x01",                    # 6-byte varint
    HEADER_PREFIX + b"3\n\x80",                                        # truncated varint
    _v3(V3_MINIMAL[:-2]),                                              # state (required) missing
    _v3(V3_MINIMAL[:-1] + b"\x07"),                                    # unknown state value
    _v3(V3_MINIMAL + b"\x32\x02\x0a\x00"),                             # segment without firstEntryId
    _v3(V3_MINIMAL + b"\x32\x06\x0a\x02\xff\xfe\x10\x00"),             # member not UTF-8
    _v3(V3_MINIMAL + b"\x5a\x04\x0a\x02\xc3\x28"),                     # custom key not UTF-8
    _v3(V3_MINIMAL + b"\x0a"),                                         # truncated field
])
def test_malformed_v3_raises_format_error(data: bytes):
    with pytest.raises(FormatError):
        parse_metadata(data, "v3")


def test_minimal_v3_message_round_trips_without_optional_fields():
    md = parse_metadata(_v3(V3_MINIMAL))
    assert md == LedgerMetadata(format_version=3, write_quorum=1, ensemble_size=1, ack_quorum=1, length=0,
                                last_entry_id=0, state="OPEN", ensembles=(), has_last_entry_id=False,
                                has_ack_quorum=False)
    assert serialize_metadata(md) == _v3(V3_MINIMAL)


@pytest.mark.parametrize("text", [
    b"quorumSize: 1\nensembleSize: 1\nlength: 0\n",                       # state missing
    b"quorumSize: 1\nensembleSize: 1\nlength: 0\nstate: SHUT\n",
    b"quorumSize: 1\nensembleSize: 1\nlength: 0\nstate: OPEN\nnoSuchField: 1\n",
    b"quorumSize: 1\nquorumSize: 2\nensembleSize: 1\nlength: 0\nstate: OPEN\n",
    b"quorumSize: 1\nensembleSize: 1\nlength: 0\nstate: OPEN\nsegment {\n",
    b"quorumSize: 1\nensembleSize: 1\nlength: 0\nstate: OPEN\nsegment {\n}\n",  # firstEntryId missing
    b"quorumSize: 1\nensembleSize: 1\nlength: 0\nstate: OPEN\npassword: \"\\377\n",
    b"quorumSize: 1\nensembleSize: 1\nlength: 0\nstate: OPEN\nsegment {\n  ensembleMember: \"\\377\"\n"
    b"  firstEntryId: 0\n}\n",                                              # member not UTF-8
    b"quorumSize: 99999999999\nensembleSize: 1\nlength: 0\nstate: OPEN\n",
    b"quorumSize: 1\nensembleSize: 1\nlength: 0\nstate: OPEN\n\xff",
    b"quorumSize: 1\nensembleSize: 1\nlength: 0\nstate: OPEN\npassword: \"\\e\"\n",  # bad escape
])
def test_malformed_v2_raises_format_error(text: bytes):
    with pytest.raises(FormatError):
        parse_metadata(HEADER_PREFIX + b"2\n" + text, "v2")


def test_v2_error_offset_points_at_failing_line():
    text = b"quorumSize: 1\nensembleSize: x\n"
    with pytest.raises(FormatError) as exc:
        parse_metadata(HEADER_PREFIX + b"2\n" + text)
    assert exc.value.offset == len(HEADER_PREFIX) + 2 + len(b"quorumSize: 1\n")


# --- serialization refuses what a format cannot carry ----------------------------------------

def _v2_sample() -> LedgerMetadata:
    return parse_metadata(_vector("v2-bk4.2.bin"))


@pytest.mark.parametrize("change", [
    dict(format_version=1),                                   # digest and password in format 1
    dict(format_version=4),
    dict(state="FENCED"),
    dict(digest_type="MAC"),
    dict(write_quorum=1 << 31),
    dict(length=1 << 63),
    dict(has_ack_quorum=False, ack_quorum=1),
    dict(has_last_entry_id=False),                             # last_entry_id -1 cannot be absent
    dict(ensembles=((0, ("a\ud800",)),)),
    dict(password="text"),
])
def test_serialize_rejects_metadata_its_format_cannot_carry(change: dict):
    with pytest.raises(FormatError):
        serialize_metadata(replace(_v2_sample(), **change))


@pytest.mark.parametrize("change", [
    dict(state="CLOSED", last_entry_id=-102, has_last_entry_id=True),
    dict(state="OPEN", last_entry_id=5),
    dict(ensembles=((0, ("CLOSED", "b")),)),
    dict(ensembles=((0, ()),)),
    dict(ensembles=((0, ("a\tb",)),)),
    dict(has_ack_quorum=True),
    dict(ctime=1),
])
def test_serialize_v1_rejects_what_legacy_text_cannot_express(change: dict):
    md = parse_metadata(_vector("v1-bk4.0.bin"))
    with pytest.raises(FormatError):
        serialize_metadata(replace(md, **change))


def test_effective_values_follow_bookkeeper_only_when_closed():
    md = replace(_v2_sample(), length=55, last_entry_id=9)
    assert (md.effective_length, md.effective_last_entry_id) == (0, -1)
    closed = replace(md, state="CLOSED")
    assert (closed.effective_length, closed.effective_last_entry_id) == (55, 9)


def test_to_json_is_plain_json_with_hex_bytes():
    md = parse_metadata((GOLDEN / "cluster-3" / "metadata" / "100000000.bin").read_bytes())
    doc = json.loads(json.dumps(md.to_json()))
    assert doc["ensembles"][1] == {"first_entry_id": 20, "bookies": ["bk-1.rack-a", "bk-3.rack-b"]}
    assert doc["password_hex"] == b"c3-ens-change".hex()
    assert doc["custom_metadata"] == [{"key": "application", "value_hex": b"bkref-golden".hex()}]
    assert (doc["state"], doc["format_version"], doc["ctoken"]) == ("CLOSED", 3, 0)


# --- hypothesis: build -> parse identity -----------------------------------------------------

int32s = st.integers(*INT32)
int64s = st.integers(*INT64)
v1_bookies = st.text(st.characters(exclude_characters="\t\n\r", exclude_categories=("Cs",)), min_size=1,
                     max_size=12)


@st.composite
def v1_metadata(draw) -> LedgerMetadata:
    wq = draw(int32s)
    state = draw(st.sampled_from(("OPEN", "IN_RECOVERY", "CLOSED")))
    last = draw(int64s.filter(lambda x: x != -102)) if state == "CLOSED" else -1
    ensembles = draw(st.lists(
        st.tuples(int64s, st.lists(v1_bookies, min_size=1, max_size=4).map(tuple)
                  .filter(lambda m: m[0] != "CLOSED")), max_size=4).map(tuple))
    return LedgerMetadata(format_version=1, write_quorum=wq, ensemble_size=draw(int32s), ack_quorum=wq,
                          length=draw(int64s), last_entry_id=last, state=state, ensembles=ensembles,
                          has_last_entry_id=state == "CLOSED", has_ack_quorum=False)


@st.composite
def pb_metadata(draw, version: int) -> LedgerMetadata:
    wq = draw(int32s)
    has_ack = draw(st.booleans())
    has_last = draw(st.booleans())
    return LedgerMetadata(
        format_version=version, write_quorum=wq, ensemble_size=draw(int32s),
        ack_quorum=draw(int32s) if has_ack else wq, length=draw(int64s),
        last_entry_id=draw(int64s) if has_last else 0,
        state=draw(st.sampled_from(("OPEN", "IN_RECOVERY", "CLOSED"))),
        ensembles=draw(st.lists(st.tuples(int64s, st.lists(st.text(max_size=10), max_size=4).map(tuple)),
                                max_size=4).map(tuple)),
        digest_type=draw(st.none() | st.sampled_from(DIGEST_TYPES)),
        password=draw(st.none() | st.binary(max_size=24)),
        ctime=draw(st.none() | int64s),
        custom_metadata=draw(st.lists(st.tuples(st.text(max_size=10), st.binary(max_size=12)),
                                      max_size=3).map(tuple)),
        ctoken=draw(st.none() | int64s),
        has_last_entry_id=has_last, has_ack_quorum=has_ack)


@settings(max_examples=150)
@given(v1_metadata())
def test_v1_build_parse_identity(md: LedgerMetadata):
    data = serialize_metadata(md)
    assert data.startswith(HEADER_PREFIX + b"1\n")
    assert data.endswith(b"\tCLOSED") == (md.state != "OPEN")
    assert parse_metadata(data) == md


@settings(max_examples=150)
@given(pb_metadata(2))
def test_v2_build_parse_identity(md: LedgerMetadata):
    data = serialize_metadata(md)
    assert data.startswith(HEADER_PREFIX + b"2\n")
    assert data.isascii()                 # every non-ASCII byte is escaped as octal
    assert parse_metadata(data) == md


@settings(max_examples=150)
@given(pb_metadata(3))
def test_v3_build_parse_identity(md: LedgerMetadata):
    data = serialize_metadata(md)
    assert parse_metadata(data) == md
    size, n = _read_varint(data[len(HEADER_PREFIX) + 2:])
    assert len(data) == len(HEADER_PREFIX) + 2 + n + size


# --- hypothesis: hostile bytes only ever raise FormatError -----------------------------------

def _parse_or_format_error(data: bytes) -> None:
    try:
        md = parse_metadata(data, "fuzz")
    except FormatError as exc:
        assert exc.path == "fuzz"
        assert exc.offset is None or 0 <= exc.offset <= len(data)
        return
    assert isinstance(md, LedgerMetadata)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300))
def test_arbitrary_bytes_raise_only_format_error(data: bytes):
    _parse_or_format_error(data)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([b"1", b"2", b"3"]), st.binary(max_size=300))
def test_arbitrary_body_after_valid_header_raises_only_format_error(version: bytes, body: bytes):
    _parse_or_format_error(HEADER_PREFIX + version + b"\n" + body)


@pytest.mark.parametrize("path", GOLDEN_FILES, ids=_ids(GOLDEN_FILES))
def test_every_truncation_of_golden_metadata_raises_only_format_error(path: Path):
    assert path.is_file(), f"golden file missing: {path}"
    data = path.read_bytes()
    for n in range(len(data)):
        _parse_or_format_error(data[:n])


GOLDEN_BYTES = [p.read_bytes() for p in GOLDEN_FILES if p.is_file()]


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_golden_metadata_raises_only_format_error(data):
    assert GOLDEN_BYTES, "no golden metadata files"
    original = data.draw(st.sampled_from(GOLDEN_BYTES))
    mutated = bytearray(original)
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(mutated) - 1))
        mutated[pos] = data.draw(st.integers(0, 255))
    _parse_or_format_error(bytes(mutated))


# --- the spec's field tables match the declaration -------------------------------------------

SPEC = Path(__file__).resolve().parents[1] / "specs" / "ledger-metadata.md"


def _spec_field_tables(path: Path) -> list[dict[int, tuple[str, str, str]]]:
    tables: list[dict[int, tuple[str, str, str]]] = []
    current: dict[int, tuple[str, str, str]] | None = None
    for line in path.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else None
        if cells and cells[:4] == ["#", "Name", "Type", "Label"]:
            current = {}
            tables.append(current)
        elif cells and current is not None and cells[0].isdigit():
            current[int(cells[0])] = (cells[1], cells[2], cells[3])
        elif not cells:
            current = None
    return tables


def _declared(desc) -> dict[int, tuple[str, str, str]]:
    out = {}
    for f in desc.fields:
        kind = _TYPE_NAMES[f.type]
        if kind == "enum":
            kind = f"enum {f.enum_type.name}"
        elif kind == "message":
            kind = f"message {f.message_type.name}"
        out[f.number] = (f.name, kind, _label(f))
    return out


def test_spec_field_tables_match_the_proto_declaration():
    tables = _spec_field_tables(SPEC)
    d = LedgerMetadataFormat.DESCRIPTOR
    assert tables == [_declared(d), _declared(d.nested_types_by_name["Segment"]),
                      _declared(d.nested_types_by_name["cMetadataMapEntry"])]


def test_a_ledger_changes_format_as_bookkeeper_writes_each():
    """BookKeeper's own vectors, each in every format that can carry it: a ledger not closed keeps no last
    entry id in format 1 (-1) and sets -1 in formats 2 and 3, as BookKeeper's vectors of those formats do
    (format 1's IN_RECOVERY ledger could not be served in format 2 or 3); each parses back to itself,
    and its own format gives its own bytes."""
    from bkdisk.formats.metadata import in_format
    carried = ("state", "write_quorum", "ensemble_size", "length", "ensembles", "last_entry_id")
    for path in sorted((GOLDEN / "metadata-vectors").glob("*.bin")):
        md = parse_metadata(path.read_bytes())
        for version in ((1, 2, 3) if md.format_version == 1 else (2, 3)):
            out = in_format(md, version)
            back = parse_metadata(serialize_metadata(out))
            assert [getattr(back, k) for k in carried] == [getattr(md, k) for k in carried], (path.name, version)
            assert back.has_last_entry_id == (version != 1 or md.is_closed)
            if version == md.format_version:
                assert serialize_metadata(out) == path.read_bytes()
