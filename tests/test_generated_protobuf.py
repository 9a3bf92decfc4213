"""The checked-in protobuf modules and their type stubs are exactly what protoc makes of the .proto files."""
from __future__ import annotations

from pathlib import Path

import pytest

from bkdisk.formats.proto.regenerate import PROTO_DIR, regenerate

FORMAT_PROTOS = sorted(p.name for p in PROTO_DIR.glob("*.proto"))


def test_every_format_proto_has_a_module_and_a_type_stub():
    assert FORMAT_PROTOS == ["bookkeeper_formats.proto", "dbledger_storage.proto"]
    for name in FORMAT_PROTOS:
        stem = name.removesuffix(".proto")
        assert (PROTO_DIR / f"{stem}_pb2.py").is_file() and (PROTO_DIR / f"{stem}_pb2.pyi").is_file(), stem


@pytest.mark.parametrize("proto_name", FORMAT_PROTOS)
def test_format_module_and_stub_match_a_fresh_protoc_run(tmp_path: Path, proto_name: str):
    fresh = regenerate(tmp_path, proto_name)
    for generated in (fresh, fresh.with_suffix(".pyi")):
        assert generated.read_bytes() == (PROTO_DIR / generated.name).read_bytes(), generated.name
