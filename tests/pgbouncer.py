"""PgBouncer in front of the tests' PostgreSQL, in transaction pooling mode (issue 47): started
by the tests as PostgreSQL is, where Debian's ``pgbouncer`` is installed (CI installs it and
sets ``AGENTRUNNER_REQUIRE_PGBOUNCER=1``, so the tests may not skip there). As root it runs as
the ``postgres`` user, as the server does."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

__all__ = ["Bouncer", "start_pgbouncer"]


@dataclass
class Bouncer:
    url: str  # the pooler's URL for the database it was started for
    process: subprocess.Popen[bytes]
    directory: Path

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        shutil.rmtree(self.directory, ignore_errors=True)


def start_pgbouncer(database_url: str) -> Bouncer | None:
    """PgBouncer on a spare loopback port, pooling by transaction for ``database_url``'s
    server; None where it is not installed."""
    binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    if not os.path.exists(binary):
        return None
    parts = urlsplit(database_url)
    directory = Path(tempfile.mkdtemp(prefix="agentrunner-test-pgbouncer-"))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    user, password = parts.username or "postgres", parts.password or ""
    (directory / "users.txt").write_text(f'"{user}" "{password}"\n')
    (directory / "pgbouncer.ini").write_text(
        "[databases]\n"
        f"* = host={parts.hostname} port={parts.port or 5432}\n"
        "[pgbouncer]\n"
        "listen_addr = 127.0.0.1\n"
        f"listen_port = {port}\n"
        "auth_type = trust\n"
        f"auth_file = {directory}/users.txt\n"
        "pool_mode = transaction\n"
        "max_client_conn = 1000\n"
        "default_pool_size = 20\n"
        "unix_socket_dir =\n"
        "ignore_startup_parameters = extra_float_digits,options\n"
        f"logfile = {directory}/pgbouncer.log\n"
    )
    as_user: list[str] = []
    if os.geteuid() == 0:  # PgBouncer will not run as root
        os.chmod(directory, 0o777)
        for file in directory.iterdir():
            os.chmod(file, 0o666)
        as_user = ["runuser", "-u", "postgres", "--"]
    process = subprocess.Popen(
        [*as_user, binary, str(directory / "pgbouncer.ini")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 15
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                log = directory / "pgbouncer.log"
                said = log.read_text() if log.exists() else ""
                raise RuntimeError(f"pgbouncer did not start: {said[-2000:]}") from None
            time.sleep(0.05)
    netloc = parts.netloc.rsplit("@", 1)
    host = f"127.0.0.1:{port}"
    url = urlunsplit(
        (parts.scheme, f"{netloc[0]}@{host}" if len(netloc) == 2 else host, parts.path, "", "")
    )
    return Bouncer(url, process, directory)
