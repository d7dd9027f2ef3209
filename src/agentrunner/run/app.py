"""The application: what a project's runner, its workspace and every interface share — its
configuration, its agents, its store and its engine — owned in one place. ``AgentRunner``
builds it from what the composition root (``compose``) opened, and closes it with itself.

Code that needs one of them asks the application (``runner.app``, ``workspace.app``), not the
runner: the runner runs agents; it is not where the store is kept.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentrunner.agents.registry import AgentRegistry
    from agentrunner.config import Config
    from agentrunner.engine.engine import Engine
    from agentrunner.engine.messages import Attachment
    from agentrunner.store.store import Store

__all__ = ["App", "AppParts"]


@dataclass(frozen=True, slots=True)
class App:
    config: Config
    agents: AgentRegistry
    store: Store
    engine: Engine

    async def close(self) -> None:
        """Close the engine's connections, then the store."""
        await self.engine.aclose()
        await self.store.close()


class AppParts:
    """The application's parts, for a class built over one (``app``) whose users ask it for
    them (``runner.store``: the public API of ``AgentRunner`` and ``TaskRunner``)."""

    app: App

    @property
    def config(self) -> Config:
        return self.app.config

    @property
    def agents(self) -> AgentRegistry:
        return self.app.agents

    @property
    def store(self) -> Store:
        return self.app.store

    @property
    def engine(self) -> Engine:
        return self.app.engine

    async def attach(
        self,
        source: bytes | str | os.PathLike[str],
        name: str | None = None,
        *,
        detail: str = "auto",
    ) -> Attachment:
        """A file to send with a message (``run_agent(..., attachments=[...])``): ``source`` a
        path, or the file's bytes with its ``name``. Checked as every interface checks one
        (docs/attachments.md): its type read from its bytes, decoded or opened, within
        ``[attachments]``' limits, else ``attachment_refused`` naming it and the reason. Read
        and decoded off the event loop (a large image takes a while). It is kept (once, by its
        digest) with the first message that carries it."""
        from agentrunner.engine import attachment_checks  # Pillow and pypdf: when a file comes

        limits = self.config.attachments
        if isinstance(source, bytes | bytearray):
            return await asyncio.to_thread(
                attachment_checks.read_attachment, bytes(source), name or "", limits, detail=detail
            )
        return await asyncio.to_thread(attachment_checks.read_file, source, limits, detail=detail)

    def check_attachments(self, attachments: Sequence[Attachment]) -> tuple[Attachment, ...]:
        """A message's files within a message's bounds (``[attachments]`` max_files and
        max_message_mb), else ``attachment_refused``."""
        if not attachments:
            return ()
        from agentrunner.engine.attachment_checks import check_message

        check_message(attachments, self.config.attachments)
        return tuple(attachments)
