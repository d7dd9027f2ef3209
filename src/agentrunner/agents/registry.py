"""``AgentRegistry``: the agents of a directory, looked up by id, with their org chart."""

from __future__ import annotations

import difflib
import os
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from agentrunner.agents.loader import load_agent_file, parse_agent_text
from agentrunner.agents.spec import PERSONA_PRESETS, AgentSpec
from agentrunner.core.paths import display_path
from agentrunner.errors import AgentFileErrors, AgentRunnerError, ErrorCode

if TYPE_CHECKING:
    from agentrunner.config.approval import Approval

__all__ = ["AgentRegistry"]

_SUFFIXES = (".md", ".markdown")


_Stamp = tuple[int, int, int]  # a file's mtime (ns), size and inode


@dataclass(frozen=True, slots=True)
class _Seen:
    """What the agents directory looked like when it was read."""

    folder: int  # the directory's mtime (ns): files added, removed or renamed over
    files: dict[str, tuple[Path, _Stamp]] = field(default_factory=dict)  # by agent id


class AgentRegistry:
    """Agents by id (the file name without ``.md``), plus ``reports_to`` as an org chart.

    ``problems`` holds what a non-strict load skipped (and ``partial`` what could be read of
    those files); a strict load raises them instead.

    A loaded registry follows its directory: a server or a worker holds one for hours, and what
    it runs must be the files as they are now (a lowered ``trust`` included). Looking an agent
    up checks the directory and that agent's file (two ``stat`` calls) and, when either
    changed, reads the directory again — leniently: a file broken since is refused on its own
    (``get`` raises its problems) while the others go on serving.
    """

    def __init__(
        self,
        agents: Mapping[str, AgentSpec],
        *,
        directory: Path | None = None,
        problems: list[AgentRunnerError] | None = None,
    ) -> None:
        self._agents = dict(agents)
        self.directory = directory
        self.problems = problems or []
        # What could be read of the files left out for their problems (a non-strict load).
        self.partial: dict[str, AgentSpec] = {}
        self._reports: dict[str, list[str]] = {}
        for spec in self._agents.values():
            if spec.reports_to in self._agents:
                self._reports.setdefault(spec.reports_to, []).append(spec.id)
        self._seen: _Seen | None = None  # set by load(): a registry built in code is fixed
        self._default_model: str | None = None
        self._personas: Collection[str] = PERSONA_PRESETS
        self._approval: Approval | None = None
        self._agent_models: dict[str, str] = {}

    @classmethod
    def load(
        cls,
        directory: Path,
        *,
        default_model: str | None = None,
        strict: bool = True,
        personas: Collection[str] = PERSONA_PRESETS,
        approval: Approval | None = None,
        agent_models: Mapping[str, str] | None = None,
    ) -> AgentRegistry:
        """Load every agent file in ``directory``; ``approval``: the project's ``[approval]``,
        merged into each agent's rules (``AgentSpec.approval``); ``agent_models``: the
        project's ``[agents.NAME] model``, an agent's model when its file names none (over
        ``default_model``; the file's own wins).

        Raises ``AgentFileErrors`` (strict) listing every bad file, duplicate id, missing
        ``reports_to`` target and ``reports_to`` cycle; with ``strict=False`` the bad agents are
        left out and the problems kept on ``.problems``.
        """
        if not directory.is_dir():
            raise AgentRunnerError(
                ErrorCode.RUNNER_IO,
                f"agents directory '{display_path(directory)}' does not exist",
                hint="Run `agentrunner init` to create a project, or set agents_dir in "
                "agentrunner.toml.",
            )
        problems: list[AgentRunnerError] = []
        agents: dict[str, AgentSpec] = {}
        partial: dict[str, AgentSpec] = {}
        seen: dict[str, Path] = {}
        # Looked at before the files are read: a change while they are read shows next time.
        looked = _Seen(_stamp(directory)[0])
        for path in sorted(p for p in directory.iterdir() if p.suffix in _SUFFIXES):
            looked.files[path.stem] = (path, _stamp(path))
            shown = display_path(path)
            folded = path.stem.casefold()
            if folded in seen:
                problems.append(
                    AgentRunnerError(
                        ErrorCode.INVALID_SPECIFICATION,
                        f"duplicate agent id '{path.stem}': "
                        f"{display_path(seen[folded])} defines it too",
                        hint="Agent ids are file names and must be unique (ignoring case).",
                        file=shown,
                        line=1,
                    )
                )
                continue
            seen[folded] = path
            try:
                own = (agent_models or {}).get(path.stem)
                agents[path.stem] = _with_model(
                    load_agent_file(
                        path,
                        default_model=own or default_model,
                        display=shown,
                        personas=personas,
                        approval=approval,
                    ),
                    own,
                )
            except AgentFileErrors as exc:
                problems.extend(exc.problems)
                if isinstance(exc.partial, AgentSpec):
                    partial[path.stem] = exc.partial
        problems.extend(_org_problems({**agents, **partial}))
        problems.sort(key=lambda p: (p.file or "", p.line or 0))
        if strict:
            AgentFileErrors.raise_if_any(problems)
        bad = {p.file for p in problems}
        good = (
            {k: v for k, v in agents.items() if display_path(v.path) not in bad} if bad else agents
        )
        loaded = cls(good, directory=directory, problems=problems)
        loaded.partial = {
            **partial,
            **{k: v for k, v in agents.items() if k not in good},
        }
        loaded._seen, loaded._default_model, loaded._personas = looked, default_model, personas
        loaded._approval, loaded._agent_models = approval, dict(agent_models or {})
        return loaded

    def _refresh(self, agent_id: str | None = None) -> None:
        """Read the directory again if it, or ``agent_id``'s file, changed since it was read."""
        seen = self._seen
        if seen is None or self.directory is None:
            return
        changed = _stamp(self.directory)[0] != seen.folder
        if not changed and agent_id is not None and agent_id in seen.files:
            path, stamp = seen.files[agent_id]
            changed = _stamp(path) != stamp
        if changed:
            fresh = AgentRegistry.load(
                self.directory,
                default_model=self._default_model,
                strict=False,
                personas=self._personas,
                approval=self._approval,
                agent_models=self._agent_models,
            )
            self._agents, self._reports = fresh._agents, fresh._reports
            self.problems, self.partial, self._seen = fresh.problems, fresh.partial, fresh._seen

    # -- lookup ---------------------------------------------------------------------------

    def get(self, agent_id: str) -> AgentSpec:
        """The agent with this id, as its file is now; the file's problems if it is broken
        (``AgentFileErrors``); ``agent_not_found`` (with close ids as a hint) otherwise."""
        self._refresh(agent_id)
        try:
            return self._agents[agent_id]
        except KeyError:
            if self._seen is not None and agent_id in self._seen.files:
                file = display_path(self._seen.files[agent_id][0])
                AgentFileErrors.raise_if_any(p for p in self.problems if p.file == file)
            close = difflib.get_close_matches(agent_id, list(self._agents), n=3, cutoff=0.5)
            hint = (
                f"Did you mean {', '.join(repr(c) for c in close)}?"
                if close
                else "Run `agentrunner agents list` to see the agents."
            )
            raise AgentRunnerError(
                ErrorCode.AGENT_NOT_FOUND,
                f"Agent '{agent_id}' not found in registry",
                hint=hint,
            ) from None

    def runnable(self, agent_id: str, version: AgentSpec | None = None) -> AgentSpec:
        """The agent with this id, as ``get`` finds it (or as ``version`` says, another version
        of its file: ``version``), if it may run: ``agent_disabled`` (naming its file and line)
        when its file, or that version, says ``enabled: false``."""
        spec = self.get(agent_id)
        if version is not None and version.id != agent_id:
            raise AgentRunnerError(
                ErrorCode.VALIDATION,
                f"a version of agent '{version.id}' cannot run as '{agent_id}'",
                hint="Run a version of an agent's file as that agent.",
            )
        for found in (spec, version):
            if found is not None and not found.enabled:
                file = display_path(found.path) if found.path else None
                raise AgentRunnerError(
                    ErrorCode.AGENT_DISABLED,
                    f"agent '{agent_id}' is disabled (enabled: false)"
                    + (" in that version" if found is version else ""),
                    hint=f"Set `enabled: true` in {file or 'its agent file'} to run it.",
                    file=file,
                    line=found.line_of("enabled"),
                )
        return version or spec

    def version(self, agent_id: str, text: str, label: str) -> AgentSpec:
        """``text`` read as another version of ``agent_id``'s file (the file at a git
        revision: ``label``), with the defaults this registry reads its files with;
        ``AgentFileErrors`` naming ``label`` for its problems."""
        path, own = self.get(agent_id).path, self._agent_models.get(agent_id)
        spec = parse_agent_text(
            text,
            agent_id=agent_id,
            file=label,
            path=path,
            default_model=own or self._default_model,
            personas=self._personas,
            approval=self._approval,
        )
        return _with_model(spec, own)

    def __contains__(self, agent_id: object) -> bool:
        self._refresh()
        return agent_id in self._agents

    def __iter__(self) -> Iterator[AgentSpec]:
        self._refresh()
        return iter(list(self._agents.values()))

    def __len__(self) -> int:
        self._refresh()
        return len(self._agents)

    def ids(self) -> list[str]:
        self._refresh()
        return list(self._agents)

    def others(self, agent_id: str) -> list[AgentSpec]:
        """The enabled agents but ``agent_id``, as last read: for a run, which read its own
        agent (and so the folder) a moment before."""
        return [a for a in self._agents.values() if a.id != agent_id and a.enabled]

    # -- org chart ------------------------------------------------------------------------

    def direct_reports(self, agent_id: str) -> list[AgentSpec]:
        """The agents whose ``reports_to`` names ``agent_id``, disabled ones included."""
        return [self._agents[i] for i in self._reports.get(agent_id, [])]

    def chain_of_command(self, agent_id: str) -> list[AgentSpec]:
        """The agent, its manager, its manager's manager … up to the top."""
        chain = [self.get(agent_id)]
        while (boss := chain[-1].reports_to) is not None and boss in self._agents:
            chain.append(self._agents[boss])
        return chain

    def roots(self) -> list[AgentSpec]:
        """Agents that report to nobody (the tops of the org chart)."""
        return [a for a in self._agents.values() if a.reports_to is None]


def _with_model(spec: AgentSpec, own: str | None) -> AgentSpec:
    """``spec`` on the project's ``[agents.NAME] model`` when its file names none."""
    return spec if own is None or spec.model is not None else replace(spec, model=own)


def _stamp(path: Path) -> _Stamp:
    try:
        st = os.stat(path)
    except OSError:  # gone: a stamp no file has
        return (-1, -1, -1)
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def _org_problems(agents: Mapping[str, AgentSpec]) -> list[AgentRunnerError]:
    problems: list[AgentRunnerError] = []
    for spec in agents.values():
        if spec.reports_to is not None and spec.reports_to not in agents:
            close = difflib.get_close_matches(spec.reports_to, list(agents), n=1, cutoff=0.5)
            problems.append(
                AgentRunnerError(
                    ErrorCode.INVALID_SPECIFICATION,
                    f"reports_to names agent '{spec.reports_to}', which does not exist"
                    + (f" (did you mean '{close[0]}'?)" if close else ""),
                    file=display_path(spec.path),
                    line=spec.line_of("reports_to"),
                )
            )
    reported: set[str] = set()
    for spec in agents.values():
        path: list[str] = []
        current: AgentSpec | None = spec
        while current is not None and current.id not in path:
            path.append(current.id)
            current = agents.get(current.reports_to) if current.reports_to else None
        if current is None:
            continue
        cycle = path[path.index(current.id) :]
        key = min(cycle)
        if key in reported or spec.id != cycle[0]:
            continue
        reported.add(key)
        problems.append(
            AgentRunnerError(
                ErrorCode.INVALID_SPECIFICATION,
                f"reports_to makes a cycle: {' → '.join([*cycle, cycle[0]])}",
                hint="An org chart is a tree: remove reports_to from one agent of the cycle.",
                file=display_path(spec.path),
                line=spec.line_of("reports_to"),
            )
        )
    return problems
