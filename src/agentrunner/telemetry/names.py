"""The attribute names spans and metrics carry: the GenAI semantic conventions' (which
opentelemetry-semantic-conventions holds as incubating, so they are spelled out here rather
than imported from a module that may move), OpenInference's (what Phoenix shows as a span's
input and output), and ours, for what the conventions have no name for. One list, so a span
and the metric it records spell an attribute alike."""

from __future__ import annotations

__all__ = [
    "AGENT_DESCRIPTION",
    "AGENT_ID",
    "AGENT_NAME",
    "APPROVAL_BY",
    "APPROVAL_DECISION",
    "APPROVAL_ID",
    "ATTEMPT",
    "CACHE_HIT",
    "CONVERSATION",
    "COST_USD",
    "DEPTH",
    "ERROR_TYPE",
    "EVAL_CASE",
    "EVAL_ID",
    "EVAL_NAME",
    "EVAL_REPEAT",
    "EVAL_VARIANT",
    "FALLBACK",
    "FINISH_REASONS",
    "HTTP_STATUS",
    "INPUT_MESSAGES",
    "INPUT_MIME",
    "INPUT_TOKENS",
    "INPUT_VALUE",
    "JSON",
    "MODEL_REF",
    "NOTES_CHARS",
    "OPERATION",
    "OUTPUT_MESSAGES",
    "OUTPUT_MIME",
    "OUTPUT_TOKENS",
    "OUTPUT_VALUE",
    "PARENT_RUN_ID",
    "PROMPT_CHARS",
    "PROVIDER",
    "QUEUE_AGENTS",
    "QUEUE_DESTINATION",
    "QUEUE_REPEATED",
    "QUEUE_RUN_IDS",
    "QUEUE_WAIT",
    "REQUEST_MAX_TOKENS",
    "REQUEST_MODEL",
    "RESPONSE_MODEL",
    "RETRY_REASON",
    "RUN_ID",
    "SCHEDULE",
    "SCHEDULE_MISSED",
    "SCHEDULE_OUTCOME",
    "SCHEDULE_REASON",
    "SCHEDULE_TICK",
    "STEP",
    "STOP_REASON",
    "SYSTEM_INSTRUCTIONS",
    "TEXT",
    "THREAD_ID",
    "TOKEN_TYPE",
    "TOOL_ARGUMENTS",
    "TOOL_CALL_ID",
    "TOOL_NAME",
    "TOOL_RESULT",
    "TOOL_TYPE",
    "WORKER_ID",
]

# The GenAI conventions'.
OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
AGENT_ID = "gen_ai.agent.id"
AGENT_NAME = "gen_ai.agent.name"
AGENT_DESCRIPTION = "gen_ai.agent.description"
CONVERSATION = "gen_ai.conversation.id"
REQUEST_MODEL = "gen_ai.request.model"
REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
RESPONSE_MODEL = "gen_ai.response.model"
FINISH_REASONS = "gen_ai.response.finish_reasons"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
TOKEN_TYPE = "gen_ai.token.type"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
ERROR_TYPE = "error.type"
HTTP_STATUS = "http.response.status_code"
# OpenInference's, what Phoenix shows as a span's input and output.
INPUT_VALUE = "input.value"
INPUT_MIME = "input.mime_type"
OUTPUT_VALUE = "output.value"
OUTPUT_MIME = "output.mime_type"
TEXT, JSON = "text/plain", "application/json"
# Ours.
RUN_ID = "agentrunner.run.id"
THREAD_ID = "agentrunner.thread.id"
PARENT_RUN_ID = "agentrunner.parent_run.id"
DEPTH = "agentrunner.depth"
STOP_REASON = "agentrunner.stop_reason"
COST_USD = "agentrunner.cost_usd"
MODEL_REF = "agentrunner.model"
ATTEMPT = "agentrunner.attempt"
FALLBACK = "agentrunner.fallback"
RETRY_REASON = "agentrunner.retry.reason"
CACHE_HIT = "agentrunner.cache.hit"
PROMPT_CHARS = "agentrunner.prompt.system_chars"
NOTES_CHARS = "agentrunner.prompt.notes_chars"
QUEUE_DESTINATION = "agentrunner.queue.destination"
QUEUE_AGENTS = "agentrunner.queue.agents"
QUEUE_RUN_IDS = "agentrunner.queue.run_ids"
QUEUE_REPEATED = "agentrunner.queue.repeated"
QUEUE_WAIT = "agentrunner.queue.wait_s"
WORKER_ID = "agentrunner.worker.id"
SCHEDULE = "agentrunner.schedule.name"
SCHEDULE_TICK = "agentrunner.schedule.tick"  # seconds since the epoch
SCHEDULE_OUTCOME = "agentrunner.schedule.outcome"  # queued | skipped
SCHEDULE_REASON = "agentrunner.schedule.reason"
SCHEDULE_MISSED = "agentrunner.schedule.missed"  # ticks a fire stands for that nothing ran
STEP = "agentrunner.step"  # the turn's step a model request or a tool call is of: 1, 2, …
EVAL_ID = "agentrunner.eval.id"  # the eval run's
EVAL_NAME = "agentrunner.eval.name"
EVAL_CASE = "agentrunner.eval.case"
EVAL_REPEAT = "agentrunner.eval.repeat"
EVAL_VARIANT = "agentrunner.eval.variant"  # the model, agent or version it was run on
APPROVAL_ID = "agentrunner.approval.id"
APPROVAL_DECISION = "agentrunner.approval.decision"
APPROVAL_BY = "agentrunner.approval.by"
