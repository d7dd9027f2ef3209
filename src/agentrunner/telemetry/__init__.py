"""Telemetry: spans of runs, model requests and tool calls, and the metrics they measure, in
OpenTelemetry's GenAI semantic conventions:

    enqueue {channel or agent}    runs queued: a channel post, a run on a thread (queueing)
      wait {channel}              `post`/`dm` waiting for the replies (the CLI)
      claim {agent}               a worker's claim, in whichever process: the run's queue wait
      invoke_agent {agent}        a run (the runner); a queued one under what queued it
        thread_lock               the wait for its thread
        resolve_agent             its agent, as its file is now
        build_prompt              its system prompt and notes
        chat {model}              one per model request attempt, fallbacks as siblings
        execute_tool {tool}       one per tool call; a delegated run, a post, nest under it
        post_run {effect}         a thread's title, after the run
    execute_task {agent}          a task: its cache_lookup, and its run (invoke_agent) on a miss

A queued run keeps the W3C trace context it was queued in (``traceparent``, ``tracestate``),
and the worker that claims it continues it, so a post and the runs that answer it, in any
process, are one trace.

    tracing    what the runtime calls (``Tracing``), and telemetry off (``NO_TRACING``):
               nothing of OpenTelemetry imported, every call returns at once
    otel       telemetry on: the spans, with OpenTelemetry's API (``OtelTracing``)
    spans      one span of ours: current while its block runs, failed, measured
    content    what a span carries of a conversation (``capture_content``)
    metrics    the instruments, and what each measurement means
    names      the attribute names spans and metrics carry
    setup      the SDK and its OTLP exporters, set up once per process; the last spans and
               metrics sent as a process ends

Only ``tracing``, ``names`` and ``setup`` may be imported with telemetry off; this package
imports ``tracing`` alone.
"""

from agentrunner.telemetry.tracing import NO_TRACING, NoTracing, QueueDepths, Span, Tracing

__all__ = ["NO_TRACING", "NoTracing", "QueueDepths", "Span", "Tracing"]
