"""Re-run protoc to rebuild metaservice_pb2.py, its .pyi type stub and metaservice_pb2_grpc.py from metaservice.proto
(optional arg: output dir)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PROTO_DIR = Path(__file__).resolve().parent
REPO_ROOT = PROTO_DIR.parents[1]
PROTO_NAME = "metaservice.proto"
GENERATED = ("metaservice_pb2.py", "metaservice_pb2.pyi", "metaservice_pb2_grpc.py")


def regenerate(out_dir: Path | None = None) -> list[Path]:
    """Run ``python -m grpc_tools.protoc`` (messages and gRPC stubs) and return the generated files.

    The proto is compiled from the repo root so the generated stub imports its messages as
    ``metaservice.proto.metaservice_pb2``, the package path they are installed under.
    """
    out = Path(out_dir) if out_dir is not None else REPO_ROOT
    out.mkdir(parents=True, exist_ok=True)
    rel = PROTO_DIR.relative_to(REPO_ROOT) / PROTO_NAME
    cmd = [sys.executable, "-m", "grpc_tools.protoc", "-I", ".", f"--python_out={out}",
           f"--pyi_out={out}", f"--grpc_python_out={out}", str(rel)]
    subprocess.run(cmd, cwd=REPO_ROOT, check=True)
    return [out / PROTO_DIR.relative_to(REPO_ROOT) / name for name in GENERATED]


if __name__ == "__main__":
    for p in regenerate(Path(sys.argv[1]) if len(sys.argv) > 1 else None):
        print(p)
