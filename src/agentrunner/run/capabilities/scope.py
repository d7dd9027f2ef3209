"""An agent's file scope: which paths its trust lets the file tools read, write and list.

``sandboxed``: its own workspace (``<state dir>/workspaces/<agent>``); ``workspace``: the
project directory; ``full``: anywhere. Below ``full`` two rules hold however a path is spelled:

* it stays inside the scope — absolute paths, ``~``, ``..`` and symlinks leading out are refused;
* the runtime's own files (``RuntimeFiles``) are outside every scope, the agent's own workspace
  excepted: everything it reads as configuration or imports as code. An agent that could write
  them could raise its own trust (its agent file), send a provider's key to a server of its
  choosing (``agentrunner.toml``, at the root or in any folder a command may be run from), or
  run code with the person's rights (the modules ``[extensions] modules`` imports); one that
  could read them could read every thread (the database);
* so is other code that runs with the person's rights: a ``.git`` folder (its hooks run on the
  next commit), a ``__pycache__`` folder (its bytecode runs in place of the source beside it), a
  Python virtualenv (a folder holding ``pyvenv.cfg``: its ``.pth`` files run when Python
  starts), and the project files the agents' MCP servers are started with.

Paths are compared after symlinks are resolved, ignoring case and Unicode normalisation (a
case-insensitive filesystem has other spellings of the same file), and by device and inode: the
target and each folder above it up to the scope's root must not be a protected file or folder,
and a file with more than one hard link must not be a link to one.
"""

from __future__ import annotations

import contextlib
import errno
import os
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from agentrunner.config import CONFIG_FILE
from agentrunner.engine.tools import ToolDenied, ToolRetry
from agentrunner.run.extensions import project_code

if TYPE_CHECKING:
    from agentrunner.agents.spec import AgentSpec, Trust
    from agentrunner.config import Config

__all__ = ["FileScope", "RuntimeFiles"]

_Inode = tuple[int, int]


@dataclass(frozen=True, slots=True)
class RuntimeFiles:
    """The runtime's own files and folders (resolved); a folder protects everything below it."""

    paths: tuple[Path, ...]
    workspaces: Path  # where agents' own workspaces live (inside the state directory)

    @classmethod
    def of(cls, config: Config, agents: Iterable[AgentSpec] = ()) -> RuntimeFiles:
        """The agent files, ``agentrunner.toml``, the state directory (database, cache, logs,
        agents' workspaces), ``personas/``, a SQLite database wherever it is, the project files
        ``[extensions] modules`` imports (``extensions.project_code``), and the project files
        ``agents``' MCP servers are started with (a script named as the command or an
        argument). An ``agentrunner.toml`` in any folder is one too (``_Protected``)."""
        paths = [
            config.path or config.root / CONFIG_FILE,
            config.agents_dir,
            config.state_dir,
            config.root / "personas",
            *project_code(config),
            *_mcp_code(agents, config.root),
        ]
        database = _sqlite_file(config.resolved_database_url)
        if database is not None:
            paths += [database, *(Path(f"{database}{end}") for end in _SQLITE_SIDE_FILES)]
        return cls(tuple(p.resolve() for p in paths), (config.state_dir / "workspaces").resolve())


_SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal", "-locks")


def _mcp_code(agents: Iterable[AgentSpec], root: Path) -> Iterator[Path]:
    for agent in agents:
        for server in agent.mcp_servers.values():
            for part in (server.command, *server.args):
                if not part or part.startswith("-"):
                    continue
                candidate = Path(part) if Path(part).is_absolute() else root / part
                with contextlib.suppress(OSError):
                    if candidate.is_file() and candidate.resolve().is_relative_to(root.resolve()):
                        yield candidate


# Folders whose contents run with the person's rights wherever they are: a repository's hooks
# run at the next commit; bytecode runs in place of its source (an unchecked .pyc is not
# compared with the source at all).
_CODE_FOLDERS = (".git", "__pycache__")


def _runs_code(folder: Path) -> bool:
    """A folder whose contents run with the person's rights when they next use it."""
    if folder.name.casefold() in _CODE_FOLDERS:
        return True
    try:
        return (folder / "pyvenv.cfg").is_file()
    except OSError:
        return False


def _sqlite_file(url: str) -> Path | None:
    """The database file of a SQLite URL, read as ``store.drivers.open_driver`` reads it."""
    if url.startswith(("postgresql://", "postgres://")):
        return None
    for prefix in ("sqlite:///", "sqlite://"):
        if url.startswith(prefix):
            url = url[len(prefix) :]
            break
    return None if url == ":memory:" else Path(url)


class FileScope:
    """Where one run's file tools may go. ``resolve`` raises ``ToolDenied`` for a path outside."""

    def __init__(
        self,
        agent_id: str,
        trust: Trust,
        project_root: Path,
        runtime: RuntimeFiles,
        *,
        declared: Trust | None = None,
    ) -> None:
        self.agent_id, self.trust, self.runtime = agent_id, trust, runtime
        self.project_root = project_root
        narrowed = declared is not None and declared != trust
        self.who = f"agent '{agent_id}' ({trust} trust" + (
            f", its caller's; its own is {declared})" if narrowed else ")"
        )

    @cached_property
    def own(self) -> Path:
        """The agent's own workspace: its whole scope when sandboxed."""
        return (self.runtime.workspaces / self.agent_id).resolve()

    @cached_property
    def root(self) -> Path | None:
        """The folder every path must stay in; None for ``full`` trust."""
        if self.trust == "full":
            return None
        return self.project_root.resolve() if self.trust == "workspace" else self.own

    def resolve(self, path: str) -> Path:
        """The file ``path`` names, if this scope holds it."""
        if "\0" in path:
            raise ToolRetry(f"{path!r} is not a valid path")
        if self.root is None:
            return _resolved(path, self.project_root, home=True)
        if self.own.parent != self.runtime.workspaces:  # an id like '..' names no workspace
            raise ToolDenied(f"agent '{self.agent_id}' has no workspace of its own")
        if self.root == self.own:
            self.own.mkdir(parents=True, exist_ok=True)
        if Path(path).is_absolute() or path.startswith("~"):  # '~' would be a home directory
            raise ToolDenied(
                f"'{path}' is an absolute path; {self.who} may only use paths inside its scope"
            )
        resolved = _resolved(path, self.root)  # symlinks followed: a link leading out is caught
        if not resolved.is_relative_to(self.root):
            raise ToolDenied(f"'{path}' leads outside the scope of {self.who}")
        if _Protected(self).holds(resolved) or _is_config(Path(path)):  # a link's own name too
            raise ToolDenied(
                f"'{path}' is one of the runtime's own files (agent files, an agentrunner.toml, "
                "the state directory, personas/, the database, extension modules) or code run "
                "with the person's rights (.git, __pycache__, a virtualenv, an MCP server's "
                f"files), outside the scope of {self.who}"
            )
        return resolved

    def listing(self, folder: Path) -> list[str]:
        """The names in ``folder`` (one ``resolve`` gave) this scope holds, folders with '/'."""
        protected = None if self.root is None else _Protected(self)
        names = []
        for entry in sorted(folder.iterdir()):
            if protected is not None and not self._shown(entry, protected):
                continue  # what the agent may not open, it is not shown either
            names.append(entry.name + ("/" if entry.is_dir() else ""))
            if len(names) == 500:
                break
        return names

    def _shown(self, entry: Path, protected: _Protected) -> bool:
        assert self.root is not None
        try:
            resolved = _real(entry)
        except (RuntimeError, OSError):  # a symlink loop: nothing to open
            return False
        return resolved.is_relative_to(self.root) and not protected.holds(resolved)


class _Protected:
    """One call's view of the runtime's files: their inodes are read when first needed, since
    files come and go between calls."""

    def __init__(self, scope: FileScope) -> None:
        self.scope = scope
        self.folded = [_fold(p) for p in scope.runtime.paths]
        self.own = _fold(scope.own)
        self._linked: set[_Inode] | None = None

    def holds(self, path: Path) -> bool:
        """Whether ``path`` (resolved) is a runtime file, under any name."""
        folded, root = _fold(path), self.scope.root
        assert root is not None  # nothing is out of a full scope
        if _is_config(path):  # a command run from its folder, or below, reads it first
            return True
        if _within(folded, self.own):
            top = self.scope.own  # the agent's own, though inside the state directory
        elif any(_within(folded, p) for p in self.folded):
            return True
        else:
            top = root
        for at in (path, *path.parents):  # a protected file or folder under another name
            if at == top or not at.is_relative_to(top):
                break
            if _inode(at) in self.inodes or _runs_code(at):
                return True
        return self._hard_link(path)

    @cached_property
    def inodes(self) -> set[_Inode]:
        """The runtime's files and folders themselves (their contents: ``_hard_link``)."""
        return {inode for inode in map(_inode, self.scope.runtime.paths) if inode is not None}

    def _hard_link(self, path: Path) -> bool:
        """A file with several names may be a link to a runtime file from inside the scope; only
        then are the protected folders walked (once per call)."""
        try:
            stat = path.stat()
        except OSError:
            return False
        if stat.st_nlink < 2 or not path.is_file():
            return False
        if self._linked is None:
            self._linked = set(self._runtime_files())
        return (stat.st_dev, stat.st_ino) in self._linked

    def _runtime_files(self) -> Iterator[_Inode]:
        for top in self.scope.runtime.paths:
            if top.is_file():
                inode = _inode(top)
                if inode is not None:
                    yield inode
                continue
            for folder, dirs, files in os.walk(top):
                if Path(folder) == self.scope.runtime.workspaces:
                    dirs[:] = [d for d in dirs if Path(folder, d) != self.scope.own]
                for name in files:  # a symlink here is a name of its own, not its target's
                    inode = _inode(Path(folder, name), follow=False)
                    if inode is not None:
                        yield inode


def _resolved(path: str, base: Path, *, home: bool = False) -> Path:
    """``path`` made absolute from ``base`` (``~`` a home directory if ``home``), symlinks
    followed; an unknown home directory or a symlink loop is an error the model can act on."""
    try:
        raw = Path(path).expanduser() if home else Path(path)
        return _real(raw if raw.is_absolute() else base / raw)
    except (RuntimeError, OSError) as exc:
        raise ToolRetry(f"cannot resolve '{path}': {exc}") from exc


def _is_config(path: Path) -> bool:
    """An ``agentrunner.toml``, in whatever folder: the nearest one above the working directory
    is the one a command reads."""
    return _fold(Path(path.name)) == CONFIG_FILE


def _real(path: Path) -> Path:
    """``path`` with its symlinks followed, what does not exist yet kept as written. A symlink
    loop raises on every Python: ``RuntimeError`` from ``resolve`` up to 3.12, ``OSError``
    (``ELOOP``) from the ``stat`` 3.12's ``resolve`` made itself and 3.13's leaves out."""
    resolved = path.resolve()
    try:
        resolved.stat()
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise
    return resolved


def _fold(path: Path) -> str:
    return unicodedata.normalize("NFC", str(path)).casefold()


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _inode(path: Path, *, follow: bool = True) -> _Inode | None:
    try:
        stat = path.stat() if follow else path.lstat()
    except OSError:
        return None
    return stat.st_dev, stat.st_ino
