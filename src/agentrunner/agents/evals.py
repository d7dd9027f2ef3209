"""An eval file (``evals/NAME.yaml``, docs/evals.md): the agent it measures, the pass rate below
which it fails, and its cases, each a message (with the agent's input) and the checks its answer
must pass. Read once, whole: every problem is reported with the file and the line it is on, and
none is run until the file is valid."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from agentrunner.core.paths import display_path
from agentrunner.errors import AgentFileErrors, AgentRunnerError, ErrorCode

__all__ = [
    "CHECKS",
    "DEFAULT_JUDGE_BUDGET_USD",
    "CaseSpec",
    "Check",
    "EvalSpec",
    "JudgeSpec",
    "eval_files",
    "find_eval",
    "load_eval",
]

EVALS_DIR = "evals"  # under the project's root
_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# What a case may expect, and what each takes (docs/evals.md).
CHECKS: dict[str, str] = {
    "equals": "the answer, whole (spaces around it aside)",
    "contains": "a text the answer holds, or a list of them",
    "regex": "a regular expression the answer matches (re.search)",
    "schema": "a JSON schema the answer, read as JSON, is valid against",
    "tool_called": "a tool's name, or {name, arguments}: arguments it was called with",
    "tool_not_called": "a tool's name, or a list of them",
    "max_cost_usd": "the most the case's run may cost, in dollars",
    "max_seconds": "the most the case's run may take, in seconds",
    "judge": "a rubric a model grades the answer against, or {rubric, model}",
}
_TOP = ("agent", "threshold", "input", "cases", "description", "judge")
_JUDGE = ("model", "budget_usd")
# What an eval's judge may spend in all, unless its file says: a grade is a short request, so
# this is hundreds of them on a small model, and a file that loops on a dear one stops here.
DEFAULT_JUDGE_BUDGET_USD = 1.0
_CASE = ("name", "message", "input", "attach", "expect")


@dataclass(frozen=True, slots=True)
class Check:
    kind: str  # a key of CHECKS
    value: Any


@dataclass(frozen=True, slots=True)
class JudgeSpec:
    """The file's ``judge``: the model a ``judge`` check asks unless it names its own, and what
    the eval's judging may spend in all (its own budget, not its agent's)."""

    model: str | None = None
    budget_usd: float = DEFAULT_JUDGE_BUDGET_USD
    line: int | None = None  # where ``judge.model`` is written


@dataclass(frozen=True, slots=True)
class CaseSpec:
    name: str
    message: str
    input: Mapping[str, Any]
    checks: tuple[Check, ...]
    line: int | None = None
    attach: tuple[Path, ...] = ()  # files sent with the message (docs/attachments.md)


@dataclass(frozen=True, slots=True)
class EvalSpec:
    name: str
    path: Path
    agent: str
    threshold: float
    cases: tuple[CaseSpec, ...]
    description: str = ""
    input: Mapping[str, Any] = field(default_factory=dict)
    judge: JudgeSpec = field(default_factory=JudgeSpec)
    # every agent it measures, ``agent`` first (``agent: [a, b]`` compares them)
    agents: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.agents:
            object.__setattr__(self, "agents", (self.agent,))

    def judge_models(self) -> dict[str, int | None]:
        """The models its ``judge`` checks ask, each once, in the order they first do, with
        the line each is first named on."""
        named: dict[str, int | None] = {}
        for case in self.cases:
            for check in case.checks:
                if check.kind == "judge":
                    own = check.value["model"]
                    model, line = (own, check.value["line"]) if own else (self.judge.model, None)
                    if model and model not in named:
                        named[model] = line or self.judge.line
        return named


def eval_files(root: Path) -> list[Path]:
    """The project's eval files: ``evals/*.yaml`` (or ``.yml``) under its root, by name."""
    folder = root / EVALS_DIR
    return sorted([*folder.glob("*.yaml"), *folder.glob("*.yml")]) if folder.is_dir() else []


def find_eval(given: str, root: Path) -> Path:
    """``given`` as a path, else the eval file of that name (or file name) in ``evals/``;
    ``not_found`` naming the project's evals otherwise."""
    path = Path(given)
    if path.exists():
        return path
    folder = root / EVALS_DIR
    candidates = (root / given, folder / given, folder / f"{given}.yaml", folder / f"{given}.yml")
    for candidate in candidates:
        if candidate.exists():
            return candidate
    found = [p.stem for p in eval_files(root)]
    raise AgentRunnerError(
        ErrorCode.NOT_FOUND,
        f"no eval file '{given}'",
        hint=f"Evals here: {', '.join(found)}." if found else "Write one in evals/NAME.yaml.",
    )


def load_eval(path: Path, *, agents: Sequence[str] = ()) -> EvalSpec:
    """The eval in ``path``; ``AgentFileErrors`` naming every problem with its line. With
    ``agents`` (the project's), an unknown agent is one of them."""
    file = display_path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise AgentRunnerError(
            ErrorCode.RUNNER_IO, f"cannot read {file}: {exc.strerror}", file=file
        ) from None
    reader = _Reader(file, text)
    spec = reader.read(path.stem, path, agents)
    if reader.problems:
        raise AgentFileErrors(reader.problems)
    assert spec is not None
    return spec


class _Reader:
    def __init__(self, file: str, text: str) -> None:
        self.file = file
        self.text = text
        self.problems: list[AgentRunnerError] = []
        self.lines: dict[str, int] = {}
        self.folder = Path()

    def problem(self, where: str, message: str, hint: str | None = None) -> None:
        self.problems.append(
            AgentRunnerError(
                ErrorCode.INVALID_SPECIFICATION,
                message,
                hint=hint,
                file=self.file,
                line=self.lines.get(where, self.lines.get(where.rsplit(".", 1)[0])),
            )
        )

    def read(self, name: str, path: Path, agents: Sequence[str]) -> EvalSpec | None:
        try:
            node = yaml.compose(self.text, Loader=_Loader)
            data = yaml.load(self.text, Loader=_Loader)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            self.problems.append(
                AgentRunnerError(
                    ErrorCode.INVALID_SPECIFICATION,
                    f"not valid YAML: {getattr(exc, 'problem', exc)}",
                    hint="Check indentation and quoting on that line.",
                    file=self.file,
                    line=mark.line + 1 if mark is not None else None,
                )
            )
            return None
        _collect(node, "", self.lines)
        if not isinstance(data, dict):
            self.problem("", "an eval file is a mapping: agent, threshold, cases")
            return None
        self.unknown(data, _TOP, "")
        measured = self.measured(data.get("agent"), agents)
        judge = self.judge(data.get("judge"))
        threshold = data.get("threshold", 1.0)
        if isinstance(threshold, bool) or not isinstance(threshold, int | float):
            self.problem("threshold", "'threshold' must be a pass rate from 0 to 1, e.g. 0.9")
        elif not 0 <= threshold <= 1:
            self.problem("threshold", f"'threshold' must be from 0 to 1, got {threshold}")
        base = data.get("input") or {}
        if not isinstance(base, dict):
            self.problem("input", "'input' must be a mapping of the agent's input values")
            base = {}
        cases = data.get("cases")
        if not isinstance(cases, list) or not cases:
            self.problem("cases", "'cases' must be a list of at least one case")
            cases = []
        self.folder = path.parent  # where a case's files are, unless their paths are absolute
        read = [self.case(n, c, base) for n, c in enumerate(cases)]
        seen: set[str] = set()
        for n, case in enumerate(read):
            if case is not None and case.name in seen:
                self.problem(
                    f"cases.{n}", f"two cases are named '{case.name}'", "Give each its own name."
                )
            seen.add(case.name if case is not None else "")
        unjudged = [
            (n, case.name)
            for n, case in enumerate(read)
            if case is not None
            for check in case.checks
            if check.kind == "judge" and not (check.value["model"] or judge.model)
        ]
        for n, named in unjudged:
            self.problem(
                f"cases.{n}.expect.judge",
                f"case '{named}': 'judge' has no model to ask",
                "Name one for the file (judge: {model: provider:model}) or for the "
                "check (judge: {rubric: ..., model: ...}).",
            )
        if self.problems:
            return None
        return EvalSpec(
            name,
            path,
            measured[0],
            float(threshold),
            tuple(c for c in read if c is not None),
            str(data.get("description") or ""),
            dict(base),
            judge,
            tuple(measured),
        )

    def measured(self, given: object, known: Sequence[str]) -> list[str]:
        """``agent``: one agent's id, or a list of them to compare."""
        named = given if isinstance(given, list) else [given]
        if not named or not all(isinstance(a, str) and a for a in named):
            self.problem("agent", "'agent' must name the agent the eval measures, or a list")
            return [""]
        for agent in map(str, named):
            if known and agent not in known:
                near = difflib.get_close_matches(agent, known, n=1)
                meant = f" (did you mean '{near[0]}'?)" if near else ""
                self.problem(
                    "agent", f"no agent '{agent}'{meant}", "See `agentrunner agents list`."
                )
        if len(set(named)) < len(named):
            self.problem("agent", "'agent' names an agent twice")
        return [str(a) for a in named]

    def judge(self, given: object) -> JudgeSpec:
        if given is None:
            return JudgeSpec()
        if not isinstance(given, dict):
            self.problem("judge", "'judge' must be a mapping: model, budget_usd")
            return JudgeSpec()
        self.unknown(given, _JUDGE, "judge.")
        model, budget = given.get("model"), given.get("budget_usd", DEFAULT_JUDGE_BUDGET_USD)
        if model is not None and not (isinstance(model, str) and model):
            self.problem("judge.model", f"'judge.model' must name a model, got {model!r}")
            model = None
        if not _number(budget) or not budget:
            self.problem(
                "judge.budget_usd",
                f"'judge.budget_usd' must be dollars above 0, got {budget!r}",
                "What the eval's judging may spend in all, e.g. 0.5.",
            )
            budget = DEFAULT_JUDGE_BUDGET_USD
        return JudgeSpec(model, float(budget), self.lines.get("judge.model"))

    def case(self, n: int, data: object, base: Mapping[str, Any]) -> CaseSpec | None:
        where = f"cases.{n}"
        if not isinstance(data, dict):
            self.problem(where, f"case {n + 1} must be a mapping: name, message, expect")
            return None
        self.unknown(data, _CASE, f"{where}.")
        name, message = data.get("name"), data.get("message")
        if not isinstance(name, str) or not name.strip():
            self.problem(where, f"case {n + 1} needs a 'name' (text), got {name!r}")
            return None
        if not isinstance(message, str) or not message.strip():
            self.problem(
                f"{where}.message",
                f"case '{name}' needs a 'message' (text) to send, got {message!r}",
            )
            return None
        own = data.get("input") or {}
        if not isinstance(own, dict):
            self.problem(f"{where}.input", f"case '{name}': 'input' must be a mapping")
            own = {}
        attach = self.files(f"{where}.attach", name, data.get("attach"))
        expect = data.get("expect") or {}
        if not isinstance(expect, dict) or not expect:
            self.problem(
                f"{where}.expect",
                f"case '{name}' needs 'expect': a mapping of at least one check",
                f"Checks: {', '.join(CHECKS)}.",
            )
            return None
        self.unknown(expect, tuple(CHECKS), f"{where}.expect.")
        checks = [self.check(f"{where}.expect.{k}", name, k, v) for k, v in expect.items()]
        return CaseSpec(
            name,
            message,
            {**base, **own},
            tuple(c for c in checks if c is not None),
            self.lines.get(where),
            attach,
        )

    def files(self, where: str, case: str, given: object) -> tuple[Path, ...]:
        """``attach``: a file's path, or a list of them, from the eval file's folder."""
        if given is None:
            return ()
        named = given if isinstance(given, list) else [given]
        if not named or not all(isinstance(f, str) and f for f in named):
            self.problem(where, f"case '{case}': 'attach' must be a file's path, or a list")
            return ()
        paths = tuple(self.folder / str(f) for f in named)
        for path in paths:
            if not path.is_file():
                self.problem(
                    where,
                    f"case '{case}': no file {display_path(path)} to attach",
                    "Paths are from the eval file's folder.",
                )
        return paths

    def check(self, where: str, case: str, kind: str, value: object) -> Check | None:
        if kind not in CHECKS:
            return None  # said by unknown()
        ok = {
            "equals": isinstance(value, str),
            "contains": isinstance(value, str)
            or (isinstance(value, list) and all(isinstance(v, str) for v in value) and value),
            "regex": isinstance(value, str),
            "schema": isinstance(value, dict),
            "tool_called": isinstance(value, str)
            or (isinstance(value, dict) and isinstance(value.get("name"), str)),
            "tool_not_called": isinstance(value, str)
            or (isinstance(value, list) and all(isinstance(v, str) for v in value) and value),
            "max_cost_usd": _number(value),
            "max_seconds": _number(value),
            "judge": (isinstance(value, str) and value.strip() != "")
            or (isinstance(value, dict) and isinstance(value.get("rubric"), str)),
        }[kind]
        if kind == "judge" and isinstance(value, dict) and "rubric" not in value:
            self.unknown(value, ("rubric", "model"), f"{where}.")
            self.problem(where, f"case '{case}': 'judge' needs a 'rubric': what the answer must do")
            return None
        if not ok:
            got = "nothing" if value is None else repr(value)
            self.problem(where, f"case '{case}': '{kind}' must be {CHECKS[kind]}, got {got}")
            return None
        if kind == "judge" and isinstance(value, dict):
            self.unknown(value, ("rubric", "model"), f"{where}.")
        if kind == "tool_called" and isinstance(value, dict):
            self.unknown(value, ("name", "arguments"), f"{where}.")
            if not isinstance(value.get("arguments") or {}, dict):
                self.problem(where, f"case '{case}': 'tool_called.arguments' must be a mapping")
                return None
        if kind == "judge":
            return self.rubric(where, case, value)  # type: ignore[arg-type]  # checked: ok
        if kind == "schema" and isinstance(value, dict):
            from jsonschema import SchemaError, validators  # only evals that use it pay

            try:
                validators.validator_for(value).check_schema(value)
            except SchemaError as exc:
                self.problem(where, f"case '{case}': 'schema' is no JSON schema: {exc.message}")
                return None
        if kind == "regex":
            try:
                re.compile(str(value))
            except re.error as exc:
                self.problem(where, f"case '{case}': 'regex' is not a regular expression: {exc}")
                return None
        if kind in ("contains", "tool_not_called") and isinstance(value, str):
            value = [value]
        return Check(kind, value)

    def rubric(self, where: str, case: str, value: str | dict[str, Any]) -> Check | None:
        """A ``judge`` check, as ``{"rubric": TEXT, "model": M or None, "line": L}``."""
        line = self.lines.get(where)
        if isinstance(value, str):
            return Check("judge", {"rubric": value.strip(), "model": None, "line": line})
        model = value.get("model")
        if not str(value["rubric"]).strip() or not (model is None or isinstance(model, str)):
            self.problem(where, f"case '{case}': 'judge' must be {CHECKS['judge']}")
            return None
        line = self.lines.get(f"{where}.model", line)
        checked = {"rubric": value["rubric"].strip(), "model": model or None, "line": line}
        return Check("judge", checked)

    def unknown(self, data: Mapping[str, Any], known: Sequence[str], prefix: str) -> None:
        for key in data:
            if key not in known:
                near = difflib.get_close_matches(str(key), known, n=1)
                meant = f" (did you mean '{near[0]}'?)" if near else ""
                self.problem(
                    f"{prefix}{key}",
                    f"unknown key '{prefix}{key}'{meant}",
                    f"Known: {', '.join(known)}.",
                )


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= 0


def _collect(node: yaml.Node | None, prefix: str, lines: dict[str, int]) -> None:
    """Each key's and list item's line (1-based), by dotted path (``cases.0.expect.regex``)."""
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = f"{prefix}{key_node.value}"
            lines.setdefault(key, key_node.start_mark.line + 1)
            _collect(value_node, f"{key}.", lines)
    elif isinstance(node, yaml.SequenceNode):
        for n, item in enumerate(node.value):
            key = f"{prefix}{n}"
            lines.setdefault(key, item.start_mark.line + 1)
            _collect(item, f"{key}.", lines)
