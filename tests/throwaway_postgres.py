"""A throwaway PostgreSQL server for one test session.

When ``AGENTRUNNER_TEST_DATABASE_URL`` names no server and PostgreSQL's server binaries are
installed, ``pytest`` starts its own — under xdist each worker its own — so the README's test
command runs the PostgreSQL tests on any machine that has PostgreSQL, CI included. The cluster
lives in a temporary directory, listens on a spare loopback port, and is removed at the end.
``initdb`` refuses to run as root, so as root the cluster belongs to the ``postgres`` user.
Set ``AGENTRUNNER_TEST_POSTGRES=off`` to skip the PostgreSQL tests instead.

A server started from outside can still be restarted by the tests that need it when
``AGENTRUNNER_TEST_POSTGRES_DIR`` (the directory holding ``data/`` and ``log``) and
``AGENTRUNNER_TEST_POSTGRES_BIN`` (its ``pg_ctl``'s directory) name it (and no other session
uses it: a restart cuts every session).
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ThrowawayPostgres", "postgres_from_environment", "start_throwaway_postgres"]

DIR_VAR = "AGENTRUNNER_TEST_POSTGRES_DIR"
BIN_VAR = "AGENTRUNNER_TEST_POSTGRES_BIN"


@dataclass
class ThrowawayPostgres:
    url: str
    bin_dir: Path
    data_dir: Path
    as_user: list[str]

    def restart(self) -> None:
        """``pg_ctl restart -m fast``: every session is cut; the server is back when this
        returns (``-w``), with the options it was started with."""
        pg_ctl = str(self.bin_dir / "pg_ctl")
        data, log = str(self.data_dir / "data"), str(self.data_dir / "log")
        subprocess.run(
            [*self.as_user, pg_ctl, "-D", data, "-l", log, "-m", "fast", "-w", "restart"],
            capture_output=True,
            check=True,
            timeout=120,
        )

    def stop(self) -> None:
        pg_ctl = str(self.bin_dir / "pg_ctl")
        subprocess.run(
            [*self.as_user, pg_ctl, "-D", str(self.data_dir / "data"), "-m", "immediate", "stop"],
            capture_output=True,
            check=False,
            timeout=60,
        )
        shutil.rmtree(self.data_dir, ignore_errors=True)


def postgres_from_environment(url: str) -> ThrowawayPostgres | None:
    """The server at ``url`` as the environment describes it (for restarts only: never
    stopped), or None where it does not."""
    data_dir, bin_dir = os.environ.get(DIR_VAR), os.environ.get(BIN_VAR)
    if not data_dir or not bin_dir:
        return None
    as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    return ThrowawayPostgres(url, Path(bin_dir), Path(data_dir), as_user)


def _bin_dir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version)
    for candidate in reversed(found):
        if os.access(Path(candidate) / "initdb", os.X_OK):
            return Path(candidate)
    on_path = shutil.which("initdb")
    return Path(on_path).parent if on_path else None


def _version(path: str) -> tuple[int, ...]:
    part = Path(path).parent.name
    return tuple(int(p) for p in part.split(".") if p.isdigit())


def _spare_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_throwaway_postgres() -> ThrowawayPostgres | None:
    """Start a server and return it, or None where no server binaries are installed or it
    would not start. Under xdist every worker starts one at the same moment: the ``postgres``
    user is made by whichever gets there first, and a port another took in between is tried
    again with another."""
    bin_dir = _bin_dir()
    if bin_dir is None:
        return None
    as_user: list[str] = []
    if os.geteuid() == 0:
        if subprocess.run(["id", "postgres"], capture_output=True, check=False).returncode:
            subprocess.run(
                ["useradd", "--system", "--no-create-home", "postgres"],
                capture_output=True,
                check=False,  # made meanwhile by another worker: `id` below says
            )
        subprocess.run(["id", "postgres"], capture_output=True, check=True)
        as_user = ["runuser", "-u", "postgres", "--"]
    for _attempt in range(3):
        server = _started(bin_dir, as_user)
        if server is not None:
            return server
    return None


def _started(bin_dir: Path, as_user: list[str]) -> ThrowawayPostgres | None:
    data = Path(tempfile.mkdtemp(prefix="agentrunner-test-pg-"))
    if as_user:
        shutil.chown(data, "postgres")
    port = _spare_port()
    server = ThrowawayPostgres(
        f"postgresql://postgres@127.0.0.1:{port}/agentrunner_test", bin_dir, data, as_user
    )

    def run(*args: str) -> None:
        subprocess.run([*as_user, *args], capture_output=True, check=True, timeout=120)

    try:
        run(str(bin_dir / "initdb"), "-D", str(data / "data"), "-A", "trust", "-U", "postgres")
        options = (
            f"-p {port} -k {data} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
        )
        run(
            str(bin_dir / "pg_ctl"),
            *("-D", str(data / "data"), "-l", str(data / "log"), "-w", "-o", options, "start"),
        )
        run(
            str(bin_dir / "createdb"),
            *("-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "agentrunner_test"),
        )
    except (OSError, subprocess.SubprocessError):
        server.stop()
        return None
    return server
