"""``[workers]``, ``[server]``, ``[cache]`` and ``[channels.NAME]``: how the project is served."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from agentrunner.config.source import Table
from agentrunner.config.values import amount, count, positive

__all__ = ["DEFAULT_MAX_QUEUE", "Cache", "ChannelConfig", "Channels", "Server", "Workers"]

DEFAULT_MAX_QUEUE = 1000
# A host name, an IPv4 address, or an IPv6 address in brackets (as a Host header writes it).
_HOST_NAME = re.compile(r"[a-z0-9]([a-z0-9.-]*[a-z0-9])?|\[[0-9a-f:.]+\]")


@dataclass(frozen=True, slots=True)
class Workers:
    """``[workers]``: a worker's lease on a claimed message (seconds), how many runs it has in
    flight, and how many messages may wait for one."""

    NAME: ClassVar[str] = "workers"
    KEYS: ClassVar[tuple[str, ...]] = ("lease_s", "concurrency", "max_queue")

    lease_s: float
    concurrency: int
    max_queue: int

    @classmethod
    def read(cls, table: Table) -> Workers:
        lease_s = amount(table, "lease_s", "seconds", "Leave it out for the default, 30 s.")
        return cls(
            lease_s or 30.0,
            count(table, "concurrency", 4),
            positive(table, "max_queue", DEFAULT_MAX_QUEUE),
        )


@dataclass(frozen=True, slots=True)
class Server:
    """``[server] allowed_hosts``: names a server without a token answers as ``Host``
    (lower-cased; any port)."""

    NAME: ClassVar[str] = "server"
    KEYS: ClassVar[tuple[str, ...]] = ("allowed_hosts",)

    allowed_hosts: tuple[str, ...]

    @classmethod
    def read(cls, table: Table) -> Server:
        value = table.get("allowed_hosts", [])
        if not isinstance(value, list) or not all(isinstance(h, str) for h in value):
            raise table.error("allowed_hosts", "server.allowed_hosts must be a list of host names")
        for host in value:
            if not _HOST_NAME.fullmatch(host.lower()):
                raise table.error(
                    "allowed_hosts",
                    f"server.allowed_hosts: {host!r} is not a host name",
                    'Write names alone, e.g. "agents.internal" or "[fd00::1]": any port is '
                    "accepted.",
                )
        return cls(tuple(h.lower() for h in value))


@dataclass(frozen=True, slots=True)
class Cache:
    """``[cache]``: where tasks' results are kept (``"file"``, under the state directory, or
    ``"store"``, in the database), for how long and in how much room (``None``: no limit)."""

    NAME: ClassVar[str] = "cache"
    KEYS: ClassVar[tuple[str, ...]] = ("backend", "ttl_s", "max_mb")

    backend: str
    ttl_s: float | None
    max_bytes: int | None

    @classmethod
    def read(cls, table: Table) -> Cache:
        ttl_s = amount(table, "ttl_s", "seconds")
        max_mb = amount(table, "max_mb", "megabytes")
        backend = table.get("backend", "file")
        if backend not in ("file", "store"):
            raise table.error(
                "backend",
                f'cache.backend must be "file" or "store", got {backend!r}',
                '"file" keeps results under the state directory; "store" in the database.',
            )
        return cls(backend, ttl_s, None if max_mb is None else int(max_mb * 1024 * 1024))


@dataclass(frozen=True, slots=True)
class ChannelConfig:
    """A channel declared in ``[channels.NAME]``: created (and its members added) on open."""

    KEYS: ClassVar[tuple[str, ...]] = ("private", "members")

    name: str
    private: bool = False
    members: tuple[str, ...] = ()

    @classmethod
    def read(cls, table: Table) -> ChannelConfig:
        table.check_entry_keys(cls.KEYS)
        members = table.get("members", [])
        if not isinstance(members, list) or not all(isinstance(m, str) for m in members):
            raise table.error("members", f"{table.name('members')} must be a list of names")
        return cls(table.path[-1], bool(table.get("private", False)), tuple(members))


@dataclass(frozen=True, slots=True)
class Channels:
    """``[channels]``: a ``ChannelConfig`` by channel name."""

    NAME: ClassVar[str] = "channels"
    KEYS: ClassVar[tuple[str, ...]] = ()  # a table of named tables, each checking its own

    by_name: Mapping[str, ChannelConfig]

    @classmethod
    def read(cls, table: Table) -> Channels:
        not_a_table = "[channels.{name}] must be a table with members = [...]"
        return cls(table.each(not_a_table, ChannelConfig.read))
