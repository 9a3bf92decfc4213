"""A real ZooKeeper server for tests: the Debian package's jars, started on 127.0.0.1 with its own data
dir and a free port, admin server off. A missing or broken ZooKeeper fails the test (never a skip).

Secured as a BookKeeper cluster with zkEnableSecurity runs it: ``security="sasl"`` (SASL DIGEST-MD5
with a JAAS ``Server`` section, the SASL authentication provider, and every session required to
authenticate) or ``security="digest"`` (nothing required of a session; clients ``addauth digest``)."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

JAVA_DIRS = (Path("/usr/share/java"), Path("/usr/share/zookeeper"))
JARS = ("zookeeper.jar", "zookeeper-jute.jar", "slf4j-api.jar", "slf4j-simple.jar",
        "netty-handler.jar", "netty-common.jar", "netty-buffer.jar", "netty-transport.jar",
        "netty-codec.jar", "netty-resolver.jar", "netty-transport-native-unix-common.jar",
        "netty-transport-native-epoll.jar", "metrics-core.jar", "snappy-java.jar",
        "commons-io.jar", "commons-cli.jar")
READY_SECONDS = 60
SASL_PROVIDER = "org.apache.zookeeper.server.auth.SASLAuthenticationProvider"
DIGEST_MODULE = "org.apache.zookeeper.server.auth.DigestLoginModule"
# The identity the bookies (and the service) use, and another the server knows that is not theirs.
USER, PASSWORD = "bookie", "bk-s3cret-pw"
OTHER_USER, OTHER_PASSWORD = "intruder", "other-pw"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _classpath() -> str:
    found = []
    for name in JARS:
        hit = next((d / name for d in JAVA_DIRS if (d / name).is_file()), None)
        if hit is None and name == "zookeeper.jar":
            raise RuntimeError(f"ZooKeeper is not installed: no {name} in "
                               f"{', '.join(map(str, JAVA_DIRS))} (apt-get install zookeeper)")
        if hit is not None:
            found.append(str(hit))
    return ":".join(found)


class ZooKeeperServer:
    """One standalone ZooKeeper (ZooKeeperServerMain). ``stop``/``start`` keep the data dir, so a
    restart brings back every persistent znode and every session that has not timed out."""

    def __init__(self, root: Path, heap: str = "256m", security: str | None = None):
        if security not in (None, "digest", "sasl"):
            raise ValueError(f"security {security!r}: expected None, 'digest' or 'sasl'")
        self.root = Path(root)
        self.heap = heap
        self.security = security
        self.data = self.root / "data"
        self.data.mkdir(parents=True, exist_ok=True)
        self.port = _free_port()
        self.cfg = self.root / "zoo.cfg"
        self.cfg.write_text("\n".join([
            "tickTime=500", "initLimit=10", "syncLimit=5", f"dataDir={self.data}",
            f"clientPort={self.port}", "clientPortAddress=127.0.0.1", "admin.enableServer=false",
            "4lw.commands.whitelist=ruok,srvr,stat,cons,dump", "maxSessionTimeout=60000",
            "minSessionTimeout=1000"]
            + ([f"authProvider.1={SASL_PROVIDER}"] if security == "sasl" else []) + [""]))
        self.jvm_security: list[str] = []
        if security == "sasl":
            jaas = self.root / "zookeeper-jaas.conf"
            jaas.write_text(f'Server {{\n  {DIGEST_MODULE} required\n  user_{USER}="{PASSWORD}"\n'
                            f'  user_{OTHER_USER}="{OTHER_PASSWORD}";\n}};\n')
            # ZooKeeper 3.8 reads "every session must authenticate by SASL" as a system property only.
            self.jvm_security = [f"-Djava.security.auth.login.config={jaas}",
                                 "-Dzookeeper.sessionRequireClientSASLAuth=true"]
        self.java = shutil.which("java")
        if self.java is None:
            raise RuntimeError("java is not installed: ZooKeeper cannot start")
        self.classpath = _classpath()
        self.proc: subprocess.Popen | None = None

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    def client_options(self, user: str = USER, password: str = PASSWORD) -> dict:
        """KazooClient keyword arguments of a client authenticated as ``user`` the way a bookie of
        this cluster is ({} on an open ZooKeeper)."""
        if self.security == "sasl":
            return {"sasl_options": {"mechanism": "DIGEST-MD5", "username": user, "password": password}}
        if self.security == "digest":
            return {"auth_data": [("digest", f"{user}:{password}")]}
        return {}

    def bookie_jaas(self, user: str = USER, password: str = PASSWORD) -> Path:
        """A bookie's JAAS file: its Client section, DigestLoginModule with ``user``'s credentials."""
        path = self.root / f"bookie-jaas-{user}.conf"
        path.write_text("// the file a bookie's JVM is given with -Djava.security.auth.login.config\n"
                        f'Client {{\n  {DIGEST_MODULE} required\n  username="{user}"\n'
                        f'  password="{password}";\n}};\n')
        return path

    def start(self) -> None:
        log = open(self.root / "zookeeper.log", "ab")
        self.proc = subprocess.Popen(
            [self.java, f"-Xmx{self.heap}", "-Dzookeeper.admin.enableServer=false", *self.jvm_security,
             "-cp", self.classpath, "org.apache.zookeeper.server.ZooKeeperServerMain", str(self.cfg)],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited with {self.proc.returncode}; see "
                                   f"{self.root / 'zookeeper.log'}")
            if self.four_letter("ruok") == "imok" and "Mode:" in self.four_letter("srvr"):
                return
            time.sleep(0.1)
        self._kill()
        raise RuntimeError(f"ZooKeeper did not answer on {self.hosts} within {READY_SECONDS}s")

    def four_letter(self, word: str) -> str:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
                s.sendall(word.encode())
                chunks = []
                while True:
                    got = s.recv(4096)
                    if not got:
                        break
                    chunks.append(got)
            return b"".join(chunks).decode(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc is None:
            return
        try:
            foreign = foreign_znodes(self.hosts, **self.client_options()) if self.proc.poll() is None else []
        finally:
            self._kill()            # even when the layout check cannot read (an ACL, a refused login)
        if foreign:
            raise AssertionError(f"znodes outside BookKeeper's layout in ZooKeeper {self.hosts}: "
                                 f"{foreign[:10]}{' ...' if len(foreign) > 10 else ''}")

    def _kill(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()


# Under a ledgers root (a znode holding LAYOUT) BookKeeper keeps these; ledger znodes and the
# hierarchy above them are checked with the service's own layout rules.
BOOKKEEPER_CHILDREN = {"LAYOUT", "INSTANCEID", "available", "cookies", "idgen", "idgen-long",
                       "underreplication"}


def foreign_znodes(hosts: str, **client_options) -> list[str]:
    """Every znode that is neither ZooKeeper's own (/zookeeper), nor above a ledgers root, nor of
    BookKeeper's layout below one (its special znodes, ledgers and the id hierarchy);
    ``client_options``: the KazooClient's credentials on a secured ZooKeeper."""
    from kazoo.client import KazooClient

    from bkdisk.metaservice import zk_layout as L
    zk = KazooClient(hosts=hosts, timeout=10, **client_options)
    zk.start(15)
    try:
        every, roots = [], {}
        stack = ["/"]
        while stack:
            path = stack.pop()
            children = zk.get_children(path)
            if "LAYOUT" in children:
                roots[path] = L.parse_layout(zk.get(f"{path}/LAYOUT")[0], path)
            for name in children:
                child = f"{path.rstrip('/')}/{name}"
                every.append(child)
                stack.append(child)
    finally:
        zk.stop()
        zk.close()

    def allowed(path: str) -> bool:
        if path == "/zookeeper" or path.startswith("/zookeeper/"):
            return True
        if any(r == path or r.startswith(path + "/") for r in roots):
            return True                       # above (or at) a ledgers root
        for r, kind in roots.items():
            if path.startswith(r + "/"):
                first = path[len(r) + 1:].split("/")[0]
                return first in BOOKKEEPER_CHILDREN or L.is_hierarchy(r, kind, path)
        return False
    return [p for p in every if not allowed(p)]


def started(root: Path, security: str | None = None) -> ZooKeeperServer:
    server = ZooKeeperServer(root, security=security)
    server.start()
    return server
