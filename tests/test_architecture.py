"""The layers are a contract: pyproject.toml's import-linter contracts hold, an import that runs up
a layer breaks them, docs/architecture.md draws exactly them, and no module outgrows a reader.

Run as a script (``python tests/test_architecture.py``) to redraw the document's block from the
contracts after changing them."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "agentrunner"
DOC = ROOT / "docs" / "architecture.md"
BEGIN = "<!-- contracts: drawn from pyproject.toml by tests/test_architecture.py -->"
END = "<!-- contracts: end -->"
SKIP = "<!-- docs-test: skip: the contracts drawn, checked by tests/test_architecture.py -->"
MOST_LINES = 600
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _contracts() -> list[dict[str, Any]]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        return list(tomllib.load(f)["tool"]["importlinter"]["contracts"])


def drawing() -> str:
    """The contracts as the document shows them: the package's layers a line each, top to bottom;
    the layers inside a package on one line, ``→`` pointing down; ``|`` between siblings that
    may not import each other."""
    lines = [SKIP, "```"]
    for contract in _contracts():
        short = [
            m.replace("agentrunner.", "")
            for m in contract.get("layers", contract.get("modules", []))
        ]
        if contract["type"] != "layers":
            lines += [f"{contract['name']} ({contract['type']}):", "    " + "  ".join(short), ""]
        elif "containers" not in contract:
            lines += [f"{contract['name']}:", *(f"    {layer}" for layer in short), ""]
        else:
            [inside] = contract["containers"]
            lines += [f"{contract['name']} ({inside.removeprefix('agentrunner.')}/):"]
            lines += ["    " + "  →  ".join(short), ""]
    lines[-1] = "```"
    return "\n".join(lines)


def _drawn() -> str:
    text = DOC.read_text()
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return text[start:end].strip()


def _lint_imports(
    tmp_path: Path, pythonpath: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run(
        [str(LINT_IMPORTS), str(ROOT / "pyproject.toml"), "--no-cache"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_document_draws_the_contracts() -> None:
    assert _drawn() == drawing(), (
        "docs/architecture.md's drawing is not pyproject.toml's contracts: "
        "run `python tests/test_architecture.py` to redraw it"
    )


def test_every_module_is_in_a_layer() -> None:
    """A new top-level module or package is placed in the layers, not left outside them."""
    [layers] = [c for c in _contracts() if c["id"] == "layers"]
    placed = {
        name.strip().removeprefix("agentrunner.").split(".")[0]
        for layer in layers["layers"]
        for name in layer.split("|")
    }
    found = {p.stem for p in PACKAGE.glob("*.py")} | {
        p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()
    }
    assert found - placed == {"__init__", "__main__"}


def test_the_contracts_hold(tmp_path: Path) -> None:
    done = _lint_imports(tmp_path, PACKAGE.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


@pytest.mark.parametrize(
    ("module", "line", "contract", "chain"),
    [
        # up a layer: the plain rules reaching for the runner
        (
            "core/ids.py",
            "import agentrunner.run.runner",
            "The layers, top to bottom",
            "agentrunner.core.ids -> agentrunner.run.runner",
        ),
        # up a layer inside one: a part of a run reaching for the runner that sequences it
        (
            "run/spend.py",
            "from agentrunner.run import runner",
            "A run: the runner sequences",
            "agentrunner.run.spend -> agentrunner.run.runner",
        ),
        # across siblings: one interface importing another
        (
            "interfaces/stdio.py",
            "import agentrunner.interfaces.mcp_server",
            "The CLI launches the other interfaces",
            "agentrunner.interfaces.stdio -> agentrunner.interfaces.mcp_server",
        ),
        # across independent modules: one wire format borrowing from another
        (
            "engine/wire_anthropic.py",
            "import agentrunner.engine.wire_openai",
            "Each provider's wire format stands alone",
            "agentrunner.engine.wire_anthropic -> agentrunner.engine.wire_openai",
        ),
    ],
)
def test_an_import_against_the_layers_breaks_them(
    tmp_path: Path, module: str, line: str, contract: str, chain: str
) -> None:
    copy = tmp_path / "src"
    shutil.copytree(PACKAGE, copy / "agentrunner", ignore=shutil.ignore_patterns("__pycache__"))
    target = copy / "agentrunner" / module
    target.write_text(target.read_text() + f"\n{line}  # against the layers\n")
    done = _lint_imports(tmp_path, copy)
    assert done.returncode == 1, done.stdout + done.stderr
    broken = done.stdout.split("Broken contracts", 1)[1]
    assert contract in broken
    assert chain in broken


def test_no_module_is_over_600_lines() -> None:
    long = {
        str(p.relative_to(PACKAGE)): n
        for p in sorted(PACKAGE.rglob("*.py"))
        if (n := len(p.read_text().splitlines())) > MOST_LINES
    }
    assert long == {}, f"split these by what they own (at most {MOST_LINES} lines each)"


if __name__ == "__main__":
    text = DOC.read_text()
    new = re.sub(
        re.escape(BEGIN) + r".*?" + re.escape(END),
        lambda _: f"{BEGIN}\n{drawing()}\n{END}",
        text,
        flags=re.S,
    )
    DOC.write_text(new)
    print("redrawn" if new != text else "already drawn")
