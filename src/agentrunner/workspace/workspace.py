"""A workspace: a runner with its channels and its run queue, and the workers that serve them —
what ``post``, ``dm``, ``worker``, the server and company mode hold. ``agentrunner.runtime.compose``
opens one for a project."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentrunner.workspace.channels import ChannelService
from agentrunner.workspace.queueing import RunQueue
from agentrunner.workspace.schedules import Scheduler
from agentrunner.workspace.worker import Worker

if TYPE_CHECKING:
    from agentrunner.run.runner import AgentRunner

__all__ = ["Workspace"]


class Workspace:
    """A runner with its channels: what ``post``, ``dm``, ``worker`` and the server use."""

    def __init__(self, runner: AgentRunner) -> None:
        config = runner.app.config
        self.runner = runner
        self.app = runner.app
        self.channels = ChannelService(
            runner, chain_depth=config.chain_depth, max_queue=config.max_queue
        )
        self.runs = RunQueue(runner, max_queue=config.max_queue)
        self.schedules = Scheduler(runner, self.channels)

    def worker(self, *, concurrency: int | None = None, schedules: bool = False) -> Worker:
        """A worker; with ``schedules``, one that fires the project's schedules too (a
        ``worker``'s, a server's: processes that serve until stopped)."""
        config = self.app.config
        return Worker(
            self.runner,
            self.channels,
            concurrency=concurrency or config.worker_concurrency,
            lease_s=config.lease_s,
            scheduler=self.schedules if schedules else None,
        )

    async def close(self) -> None:
        await self.runner.close()
