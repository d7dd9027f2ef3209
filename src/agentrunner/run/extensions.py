"""Extensions (seed 002's hooks), loaded for every entry point by the composition root.

An extension is a Python module with a ``register(extensions)`` function (or that function
itself, named ``module:function``). It is found two ways: the project's ``[extensions] modules =
[...]`` in ``agentrunner.toml`` (looked up on ``sys.path``, then in the project directory), and the
``agentrunner.extensions`` entry-point group of installed distributions.

The project directory is not put on ``sys.path``: only the top-level names the list gives are
looked up there (``project_code`` says which files that reads), so a file an agent may write in the
project is never what an import finds, and those files are the runtime's own
(``capabilities.scope``). ``compose`` loads them
when it builds a runner, so the CLI, the server, the worker, stdio and MCP all get them. Through
the ``Extensions`` it is given, a module registers:

- context providers: a section of every agent's system prompt (``prompt.ContextProviders``);
- message handlers: a tap on every event of every run (``callbacks.MessageHandlers``);
- tables: created by the store's migrations, on SQLite and PostgreSQL (``store.sql``);
- config sections: a top-level table of ``agentrunner.toml`` with defaults (``config``);
- tool policies, input guards and output guards: what may stop a call, a message or an answer
  (``guards``).

A name registered twice, a reserved config key, a module that cannot be imported or whose
``register`` fails: ``invalid_specification``, naming the module.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import inspect
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from importlib.abc import MetaPathFinder
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import Any

from agentrunner.config import (
    CONFIG_FILE,
    RESERVED_KEYS,
    Config,
    ConfigExtensionRegistry,
    default_extensions,
)
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.run.callbacks import MessageHandler, MessageHandlers
from agentrunner.run.guards import BUILT_IN, Guards, TextGuard, ToolPolicy
from agentrunner.run.prompt import ContextProvider, ContextProviders
from agentrunner.store.sql import ExtensionTable

__all__ = ["ENTRY_POINT_GROUP", "Extensions", "load_extensions", "project_code"]

ENTRY_POINT_GROUP = "agentrunner.extensions"
Register = Callable[["Extensions"], object]


class Extensions:
    """What extension modules registered. Each registration names its owner (the module being
    loaded) so that a clash says which two modules clash."""

    def __init__(self, config: Config | None = None) -> None:
        self.config = config  # the project's, for a module that reads its own section
        self.context_providers = ContextProviders()
        self.message_handlers = MessageHandlers()
        self.tables: list[ExtensionTable] = []
        self.config_sections = ConfigExtensionRegistry()
        self.guards = Guards()  # tool policies, input and output guards
        self.loaded: list[str] = []  # who registered, in order
        self._owners: dict[tuple[str, str], str] = {}
        self._current = "code"

    def context_provider(self, name: str, provider: ContextProvider) -> None:
        """``provider(ctx)`` (a ``PromptContext``) returns text, or None for no section; its
        text becomes the section ``## name`` of every system prompt. It may be async."""
        self._claim("context provider", name)
        self.context_providers.register(name, provider)

    def message_handler(self, name: str, handler: MessageHandler) -> None:
        """``handler(event)`` (a ``RunEvent``) is called with every event of every run."""
        self._claim("message handler", name)
        self.message_handlers.register(name, handler)

    def tool_policy(self, name: str, policy: ToolPolicy) -> None:
        """``policy(check)`` (a ``guards.ToolCheck``: the call, the agent, the run's trust and
        spend) returns None or ``check.allow()`` (the call runs), ``check.deny(reason)`` (it
        does not; the model is told ``denied by policy NAME: reason`` and the run goes on) or
        ``check.ask(reason)`` (a person decides first). A plain function: it is asked on every
        call of every run, so it must be quick."""
        if name in BUILT_IN:
            raise self._error(
                f"tool policy '{name}' is a built-in policy's name ([guards] {name})",
                "Name the policy something of its own.",
            )
        self._claim("tool policy", name)
        self.guards.policies.append((name, policy))

    def input_guard(self, name: str, guard: TextGuard) -> None:
        """``guard(said)`` (a ``guards.GuardedText``: the message, the agent, the run and its
        thread) returns None to let a run's message through, or the reason it blocks it: the
        run then fails with ``guard_blocked`` and nothing is sent to a model. It may be async."""
        self._claim("input guard", name)
        self.guards.inputs.append((name, guard))

    def output_guard(self, name: str, guard: TextGuard) -> None:
        """As ``input_guard``, for a run's answer before it is delivered: one blocked is not
        delivered (nor kept in the thread) and the run fails with ``guard_blocked``; what it
        cost is recorded. With an output guard, answers are not streamed."""
        self._claim("output guard", name)
        self.guards.outputs.append((name, guard))

    def table(
        self, name: str, create: str | Mapping[str, str], *, indexes: Sequence[str] = ()
    ) -> None:
        """A table of the extension's own, created when the store opens if it does not exist
        (``store.sql.ExtensionTable`` says how ``create`` is written)."""
        self._claim("table", name)
        self.tables.append(ExtensionTable(name, create, tuple(indexes), self._current))

    def config_section(
        self,
        key: str,
        defaults: Mapping[str, Any],
        validate: Callable[[Mapping[str, Any]], None] | None = None,
    ) -> Mapping[str, Any]:
        """A top-level section of ``agentrunner.toml``: the file's table merged over
        ``defaults``, then checked by ``validate``; returned, and the runner's
        ``config.extensions[key]``."""
        if key in RESERVED_KEYS:
            raise self._error(
                f"config key '{key}' is reserved by agentrunner",
                f"Reserved: {', '.join(sorted(RESERVED_KEYS))}. Choose a key of your own.",
            )
        if key in default_extensions:
            raise self._error(f"config key '{key}' is already registered in this process")
        self._claim("config section", key)
        self.config_sections.register(key, defaults, validate)
        config = self.config
        section = ConfigExtensionRegistry()
        section.register(key, defaults, validate)
        if config is None:
            return section.resolve({}, CONFIG_FILE)[key]
        return section.resolve(config.raw, config.file, config.text)[key]

    def _claim(self, kind: str, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise self._error(f"a {kind} needs a name, got {name!r}")
        owner = self._owners.get((kind, name))
        if owner is not None:
            by = "it too" if owner == self._current else f"{owner} too"
            raise self._error(
                f"{kind} '{name}' is already registered (by {by})",
                "Each name is registered once: rename one, or load the module once.",
            )
        self._owners[(kind, name)] = self._current

    def _error(self, message: str, hint: str | None = None) -> AgentRunnerError:
        return AgentRunnerError(
            ErrorCode.INVALID_SPECIFICATION, f"{self._current}: {message}", hint=hint
        )

    def run(self, owner: str, register: Register) -> None:
        """Call ``register(self)`` as ``owner``; a failure is ``invalid_specification`` naming
        it (the module's own error kept as the cause)."""
        self._current = owner
        try:
            result = register(self)
            if inspect.isawaitable(result):
                close = getattr(result, "close", None)
                if close is not None:
                    close()
                raise self._error("register() must be a plain function, not async")
        except AgentRunnerError as exc:
            if not exc.message.startswith(f"{owner}:"):
                exc.message = f"{owner}: {exc.message}"
            raise
        except Exception as exc:
            raise self._error(
                f"register() failed: {type(exc).__name__}: {exc}",
                "Run with --debug for the traceback.",
            ) from exc
        finally:
            self._current = "code"
        self.loaded.append(owner)

    def apply(self, config: Config) -> Config:
        """``config`` with the registered sections resolved from its file."""
        if not len(self.config_sections):
            return config
        resolved = self.config_sections.resolve(config.raw, config.file, config.text)
        return replace(
            config,
            extensions=MappingProxyType({**config.extensions, **resolved}),
            unknown=MappingProxyType(
                {k: v for k, v in config.unknown.items() if k not in resolved}
            ),
        )


def load_extensions(config: Config, *, entry_points: bool = True) -> Extensions:
    """Import and register every extension: the installed entry points first, then the
    project's ``[extensions] modules`` (a module named both ways is loaded once)."""
    extensions = Extensions(config)
    seen: set[str] = set()
    if entry_points:
        for owner, target, load in _entry_points():
            if target in seen:  # one distribution found twice on sys.path
                continue
            seen.add(target)
            extensions.run(owner, _register_of(owner, load()))
    if config.extension_modules:
        _ProjectModules.serving(config.root, _top_level_names(config))
        for target in config.extension_modules:
            if target in seen:
                continue
            seen.add(target)
            owner = f"extension module '{target}'"
            extensions.run(owner, _register_of(owner, _import(target, owner)))
    return extensions


def project_code(config: Config) -> tuple[Path, ...]:
    """The project's files that ``[extensions] modules`` may import: for each top-level name, the
    folder of that name (a package, all of it) and the name with every suffix the import system
    loads a module from (``.py``, ``.pyc``, a compiled extension's)."""
    root = config.root
    return tuple(
        path
        for name in _top_level_names(config)
        for path in (
            root / name,
            *(root / f"{name}{suffix}" for suffix in importlib.machinery.all_suffixes()),
        )
    )


def _top_level_names(config: Config) -> set[str]:
    return {target.partition(":")[0].partition(".")[0] for target in config.extension_modules}


class _ProjectModules(MetaPathFinder):
    """Finds the listed top-level modules in a project directory, and nothing else there. It
    comes after the finders of ``sys.path``: an installed module of the same name is the one
    imported, as if the directory were last on ``sys.path``."""

    def __init__(self, root: Path) -> None:
        self.root = str(root)
        self.names: set[str] = set()

    @classmethod
    def serving(cls, root: Path, names: set[str]) -> None:
        """Serve ``names`` from ``root`` (one finder per project directory)."""
        finder = next(
            (f for f in sys.meta_path if isinstance(f, cls) and f.root == str(root)), None
        )
        if finder is None:
            finder = cls(root)
            sys.meta_path.append(finder)
        finder.names |= names

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if path is not None or fullname not in self.names:  # a submodule: its package's path
            return None
        return importlib.machinery.PathFinder.find_spec(fullname, [self.root])


def _entry_points() -> Iterator[tuple[str, str, Callable[[], Any]]]:
    from importlib.metadata import entry_points

    for point in entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(point.dist, "name", None)
        owner = f"entry point '{point.name}' ({point.value}" + (f", {dist})" if dist else ")")

        def load(point: Any = point, owner: str = owner) -> Any:
            try:
                return point.load()
            except Exception as exc:
                raise _import_error(owner, exc) from exc

        yield owner, point.value, load


def _import(target: str, owner: str) -> Any:
    module_name, _, attribute = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise _import_error(owner, exc, from_config=True) from exc
    if not attribute:
        return module
    try:
        return getattr(module, attribute)
    except AttributeError as exc:
        raise AgentRunnerError(
            ErrorCode.INVALID_SPECIFICATION,
            f"{owner}: module '{module_name}' has no '{attribute}'",
            file=CONFIG_FILE,
        ) from exc


def _register_of(owner: str, loaded: Any) -> Register:
    register = getattr(loaded, "register", None) if isinstance(loaded, ModuleType) else loaded
    if not callable(register):
        raise AgentRunnerError(
            ErrorCode.INVALID_SPECIFICATION,
            f"{owner}: no register(extensions) function to call",
            hint="Define `def register(extensions): ...` in the module, or name the function "
            "as module:function.",
        )
    return register  # type: ignore[no-any-return]


def _import_error(owner: str, exc: Exception, *, from_config: bool = False) -> AgentRunnerError:
    return AgentRunnerError(
        ErrorCode.INVALID_SPECIFICATION,
        f"{owner}: cannot be imported: {type(exc).__name__}: {exc}",
        hint="Install it, or put it in the project directory (beside agentrunner.toml); a "
        "project module it imports goes inside its package (only listed names are looked up "
        "there)."
        if from_config
        else "Reinstall the distribution that provides it, or uninstall it.",
        file=CONFIG_FILE if from_config else None,
    )
