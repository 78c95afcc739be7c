"""A throw-away Redis server for the peers: found on PATH (installed with apt-get when
missing and running as root), started on a free loopback port with no persistence, and
stopped at the end. Standard library only (it speaks just enough RESP to ping)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

INSTALL_HINT = ("redis-server is not on PATH: install it (Debian/Ubuntu: "
                "`sudo apt-get install -y redis-server`; macOS: `brew install redis`) "
                "or pass --redis-server PATH")


def find_redis_server(explicit: str | None = None) -> str:
    """The redis-server binary: ``explicit``, else PATH, else installed with apt-get when
    this process is root; otherwise exit saying how to install it."""
    if explicit:
        if not Path(explicit).is_file():
            raise SystemExit(f"--redis-server {explicit}: no such file")
        return explicit
    found = shutil.which("redis-server")
    if found:
        return found
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise SystemExit(INSTALL_HINT)
    print("redis-server is missing: installing it with apt-get", flush=True)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    install = ["apt-get", "install", "-y", "-qq", "redis-server"]
    if subprocess.run(install, env=env, check=False).returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], env=env, check=False)
        subprocess.run(install, env=env, check=False)
    found = shutil.which("redis-server") or (
        "/usr/bin/redis-server" if Path("/usr/bin/redis-server").is_file() else None)
    if not found:
        raise SystemExit("apt-get could not install redis-server. " + INSTALL_HINT)
    return found


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def ping(port: int, timeout: float = 0.5) -> bool:
    """Whether a Redis server answers PING on 127.0.0.1:``port``."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            sock.sendall(b"*1\r\n$4\r\nPING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def server_version(binary: str) -> str:
    """``redis-server --version``'s version field (e.g. ``7.0.15``)."""
    out = subprocess.run([binary, "--version"], capture_output=True, text=True,
                         check=False).stdout
    for field in out.split():
        if field.startswith("v="):
            return field[2:]
    return out.strip()


class RedisServer:
    """A context manager: a redis-server on a free loopback port, no RDB snapshots and no
    append-only file, its working directory and log in a temporary folder."""

    def __init__(self, binary: str) -> None:
        self.binary = binary
        self.port = 0
        self.version = server_version(binary)
        self._proc: subprocess.Popen[bytes] | None = None
        self._dir: Path | None = None

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:PORT`` (no database number)."""
        return f"redis://127.0.0.1:{self.port}"

    def start(self, timeout: float = 10.0) -> None:
        """Start the server and wait until it answers PING."""
        self._dir = Path(tempfile.mkdtemp(prefix="peer-bench-redis-"))
        for _ in range(3):  # a port can be taken between choosing and binding it
            self.port = free_port()
            log = (self._dir / "redis.log").open("a")
            self._proc = subprocess.Popen(
                [self.binary, "--port", str(self.port), "--bind", "127.0.0.1",
                 "--save", "", "--appendonly", "no", "--dir", str(self._dir),
                 "--daemonize", "no", "--protected-mode", "yes"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True)
            log.close()
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and self._proc.poll() is None:
                if ping(self.port):
                    return
                time.sleep(0.05)
            self._terminate()
        tail = (self._dir / "redis.log").read_text(errors="replace")[-2000:]
        self.stop()
        raise RuntimeError(f"redis-server did not start; log tail:\n{tail}")

    def stop(self) -> None:
        """Stop the server and remove its folder."""
        self._terminate()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def _terminate(self) -> None:
        """SIGTERM the server (nothing to save), SIGKILL it if it lingers."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def __enter__(self) -> RedisServer:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
