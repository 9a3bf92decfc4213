"""A Spark standalone cluster for tests: a master and workers started from the pyspark package's
``spark-class`` (the pip package has no start scripts), each on its own loopback address, so that
executors on different workers have different hosts as Spark names them.

Every process is started in a session of its own and stopped (the whole group) by ``stop``, which
the fixture runs also when a test fails. Memory is kept small: 2 cores on the machine are shared.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

MASTER_HOST = "127.0.0.1"
DAEMON_MEMORY = "-Xmx160m"          # master and worker daemons: bookkeeping only
WORKER_MEMORY = "600m"              # what a worker offers its executors (one executor each)


def spark_class() -> str:
    import pyspark
    path = Path(pyspark.__file__).parent / "bin" / "spark-class"
    if not path.is_file():
        raise RuntimeError(f"{path}: the pyspark package's spark-class is missing")
    return str(path)


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@dataclass
class Daemon:
    name: str
    host: str
    proc: subprocess.Popen
    log: Path

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the daemon and every process under it (its executors, their Python daemons, which
        put themselves in groups of their own, and what those forked)."""
        for pid in [self.proc.pid] + descendants(self.proc.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()


@dataclass
class StandaloneCluster:
    workdir: Path
    master_url: str = ""
    master: Daemon | None = None
    workers: list[Daemon] = field(default_factory=list)

    def _env(self, host: str) -> dict[str, str]:
        env = dict(os.environ)
        env.update(SPARK_LOCAL_IP=host, SPARK_LOCAL_HOSTNAME=host,
                   SPARK_DAEMON_MEMORY=DAEMON_MEMORY.removeprefix("-Xmx"), SPARK_LOG_DIR=str(self.workdir / "logs"),
                   SPARK_NO_DAEMONIZE="1", PYSPARK_PYTHON=sys.executable)
        env.pop("PYSPARK_GATEWAY_PORT", None)
        return env

    def _start(self, name: str, host: str, args: list[str]) -> Daemon:
        log = self.workdir / f"{name}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen([spark_class(), *args], env=self._env(host), stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        return Daemon(name, host, proc, log)

    def start_master(self) -> None:
        port, ui = free_port(MASTER_HOST), free_port(MASTER_HOST)
        self.master = self._start("master", MASTER_HOST, [
            "org.apache.spark.deploy.master.Master", "--host", MASTER_HOST, "--port", str(port),
            "--webui-port", str(ui)])
        self.master_url = f"spark://{MASTER_HOST}:{port}"
        _wait_for(lambda: _listening(MASTER_HOST, port), self.master, 120)

    def start_worker(self, host: str, cores: int = 1) -> Daemon:
        n = len(self.workers)
        wd = self.workdir / f"worker-{n}"
        wd.mkdir(parents=True, exist_ok=True)
        port, ui = free_port(host), free_port(host)
        w = self._start(f"worker-{n}", host, [
            "org.apache.spark.deploy.worker.Worker", "--host", host, "--port", str(port), "--webui-port", str(ui),
            "--cores", str(cores), "--memory", WORKER_MEMORY, "--work-dir", str(wd), self.master_url])
        self.workers.append(w)
        _wait_for(lambda: _registered(w), w, 120)
        return w

    def stop(self) -> None:
        for d in self.workers + ([self.master] if self.master else []):
            d.kill()

    def logs(self) -> str:
        out = []
        for d in ([self.master] if self.master else []) + self.workers:
            text = d.log.read_text(errors="replace") if d.log.exists() else ""
            out.append(f"--- {d.name} ({d.host}) ---\n{text[-3000:]}")
        return "\n".join(out)


def _proc_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command name) of every process (from /proc)."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        out[int(d)] = (int(stat[stat.rindex(")") + 2:].split()[1]), comm)
    return out


def descendants(pid: int) -> list[int]:
    """Every process below ``pid``, parents before children."""
    table = _proc_table()
    children: dict[int, list[int]] = {}
    for p, (pp, _c) in table.items():
        children.setdefault(pp, []).append(p)
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def python_depth(pid: int) -> int:
    """The longest chain of Python processes below ``pid`` (a PySpark daemon, the worker it forked
    for a task, and the scan child that worker forked: 3)."""
    table = _proc_table()
    best = 0
    for p in descendants(pid):
        depth, q = 0, p
        while q in table and table[q][1].startswith("python") and q != pid:
            depth, q = depth + 1, table[q][0]
        best = max(best, depth)
    return best


def _listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def _registered(w: Daemon) -> bool:
    return w.log.exists() and "Successfully registered with master" in w.log.read_text(errors="replace")


def _wait_for(ready, daemon: Daemon, timeout: float) -> None:
    end = time.monotonic() + timeout
    while not ready():
        if not daemon.alive():
            raise RuntimeError(f"{daemon.name} exited ({daemon.proc.returncode}):\n"
                               f"{daemon.log.read_text(errors='replace')[-3000:]}")
        if time.monotonic() > end:
            raise RuntimeError(f"{daemon.name} not ready after {timeout:.0f} s:\n"
                               f"{daemon.log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.2)


def start_cluster(workdir: Path, worker_hosts: list[str]) -> StandaloneCluster:
    """A master on 127.0.0.1 and one single-core worker per host; stopped again if any fails to start."""
    if shutil.which("java") is None:
        raise RuntimeError("java is not on PATH: the standalone cluster needs Java 17")
    c = StandaloneCluster(workdir)
    try:
        c.start_master()
        for h in worker_hosts:
            c.start_worker(h)
    except BaseException:
        c.stop()
        raise
    return c


# Executors: one core, small heaps; the driver joins on 127.0.0.1.
CLUSTER_CONF = {"spark.executor.memory": "512m", "spark.executor.cores": "1", "spark.cores.max": "8",
                "spark.driver.host": MASTER_HOST, "spark.driver.bindAddress": MASTER_HOST,
                "spark.driver.memory": "512m", "spark.python.worker.reuse": "true",
                "spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "false"}
