"""Re-run protoc to rebuild metaservice_pb2.py, its .pyi type stub and metaservice_pb2_grpc.py from metaservice.proto
(optional arg: output dir)."""
from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PROTO_DIR = Path(__file__).resolve().parent
PACKAGE = "bkdisk.metaservice.proto"   # the name the generated modules are installed under
PROTO_NAME = "metaservice.proto"
GENERATED = ("metaservice_pb2.py", "metaservice_pb2.pyi", "metaservice_pb2_grpc.py")


def regenerate(out_dir: Path | None = None) -> list[Path]:
    """Run ``python -m grpc_tools.protoc`` (messages, their stub and the gRPC stubs) and return the
    generated files, written into ``out_dir`` (default: beside the proto).

    protoc names a generated import after the proto's path below its include root, so the proto is
    compiled from a copy placed at ``bkdisk/metaservice/proto/``: the gRPC stub then imports its
    messages as ``bkdisk.metaservice.proto.metaservice_pb2``.
    """
    out = Path(out_dir) if out_dir is not None else PROTO_DIR
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bkdisk-protoc-") as tmp:
        src, gen = Path(tmp, "src"), Path(tmp, "gen")
        staged = src.joinpath(*PACKAGE.split("."))
        staged.mkdir(parents=True)
        gen.mkdir()
        shutil.copyfile(PROTO_DIR / PROTO_NAME, staged / PROTO_NAME)
        cmd = [sys.executable, "-m", "grpc_tools.protoc", "-I", str(src), f"--python_out={gen}",
               f"--pyi_out={gen}", f"--grpc_python_out={gen}", str(staged / PROTO_NAME)]
        subprocess.run(cmd, check=True)
        for name in GENERATED:
            shutil.copyfile(gen.joinpath(*PACKAGE.split("."), name), out / name)
    return [out / name for name in GENERATED]


if __name__ == "__main__":
    for p in regenerate(Path(sys.argv[1]) if len(sys.argv) > 1 else None):
        print(p)
