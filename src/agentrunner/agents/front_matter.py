"""An agent file's front matter: cut from its body, read as YAML (PyYAML's C loader where it is
built), with the line each dotted key is written on and the keys written twice, for errors
that name their line."""

from __future__ import annotations

from typing import Any

import yaml

from agentrunner.errors import AgentFileErrors, AgentRunnerError, ErrorCode

__all__ = ["parse_front_matter", "split_front_matter"]

_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def split_front_matter(text: str, file: str) -> tuple[str | None, str, int]:
    """Return (frontmatter YAML or None, body, first line of the body)."""
    text = text.removeprefix("\ufeff")
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip() != "---":
        return None, text, 1
    for i in range(1, len(lines)):
        if lines[i].rstrip() in ("---", "..."):
            return "".join(lines[1:i]), "".join(lines[i + 1 :]), i + 2
    raise AgentFileErrors(
        [
            AgentRunnerError(
                ErrorCode.INVALID_SPECIFICATION,
                "frontmatter opened with '---' is never closed",
                hint="End the frontmatter with a line holding only '---'.",
                file=file,
                line=1,
            )
        ]
    )


def parse_front_matter(
    front: str, file: str
) -> tuple[dict[str, Any], dict[str, int], list[AgentRunnerError]]:
    """Parse frontmatter; return the data, a map of dotted key → file line, and the keys
    written twice (the data holds the last of each, as YAML reads it)."""
    offset = 2  # the frontmatter's first line is line 2 of the file
    loader = _Loader(front)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else {}
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + offset if mark is not None else None
        raise AgentFileErrors(
            [
                AgentRunnerError(
                    ErrorCode.INVALID_SPECIFICATION,
                    f"invalid YAML in frontmatter: {exc.problem or exc.context}",
                    hint="Check indentation and quoting on that line.",
                    file=file,
                    line=line,
                )
            ]
        ) from exc
    except yaml.YAMLError as exc:
        raise AgentFileErrors(
            [AgentRunnerError(ErrorCode.INVALID_SPECIFICATION, f"invalid YAML: {exc}", file=file)]
        ) from exc
    finally:
        loader.dispose()
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise AgentFileErrors(
            [
                AgentRunnerError(
                    ErrorCode.INVALID_SPECIFICATION,
                    "frontmatter must be a mapping of keys to values",
                    file=file,
                    line=offset,
                )
            ]
        )
    lines: dict[str, int] = {}
    duplicates: list[AgentRunnerError] = []
    _collect_lines(node, "", offset, lines, duplicates, file)
    return data, lines, duplicates


def _collect_lines(
    node: yaml.Node | None,
    prefix: str,
    offset: int,
    lines: dict[str, int],
    duplicates: list[AgentRunnerError],
    file: str,
) -> None:
    if not isinstance(node, yaml.MappingNode):
        return
    for key_node, value_node in node.value:
        key = f"{prefix}{key_node.value}"
        line = key_node.start_mark.line + offset
        if key in lines:
            duplicates.append(
                AgentRunnerError(
                    ErrorCode.INVALID_SPECIFICATION,
                    f"duplicate key '{key}' (first on line {lines[key]})",
                    file=file,
                    line=line,
                )
            )
            continue
        lines[key] = line
        _collect_lines(value_node, f"{key}.", offset, lines, duplicates, file)
