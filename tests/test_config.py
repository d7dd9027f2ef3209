"""agentrunner.toml: discovery, sections, environment overrides, secrets, extensions."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentrunner.config import (
    DEFAULT_HISTORY_TOKENS,
    WHOLE_WINDOW,
    ConfigExtensionRegistry,
    ProviderConfig,
    find_config_file,
    load_config,
)
from agentrunner.errors import AgentRunnerError, ErrorCode

FULL = """\
[project]
agents_dir = "team"

[defaults]
model = "openai:gpt-4.1-mini"
persona = "direct"

[database]
url = "sqlite:///state.db"

[budgets]
per_run_usd = 0.5
global_daily_usd = 20
allow_unpriced = true

[providers.local]
kind = "openai"
base_url = "http://127.0.0.1:11434/v1"
api_key_env = "LOCAL_KEY"
headers = { "x-team" = "research" }

[aliases]
fast = "openai:gpt-4.1-mini"

[prices."local:llama3"]
input_per_mtok = 0.1
output_per_mtok = 0.2

[slack]
enabled = true

[company]
root = "chief"

[journal]
model = "openai:gpt-4.1-nano"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "agentrunner.toml"
    path.write_text(text)
    return path


def test_found_by_walking_up(tmp_path: Path) -> None:
    write(tmp_path, FULL)
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert find_config_file(deep) == tmp_path / "agentrunner.toml"
    config = load_config(deep, env={})
    assert config.root == tmp_path.resolve()
    assert config.agents_dir == (tmp_path / "team").resolve()


def test_all_sections(tmp_path: Path) -> None:
    write(tmp_path, FULL)
    config = load_config(tmp_path, env={})
    assert config.default_model == "openai:gpt-4.1-mini"
    assert config.default_persona == "direct"
    assert config.database_url == "sqlite:///state.db"
    assert config.budgets.per_run_usd == 0.5
    assert config.budgets.global_daily_usd == 20.0
    assert config.budgets.per_agent_daily_usd is None
    assert config.budgets.allow_unpriced is True
    local = config.providers["local"]
    assert (local.kind, local.base_url, local.api_key_env) == (
        "openai",
        "http://127.0.0.1:11434/v1",
        "LOCAL_KEY",
    )
    assert dict(local.headers) == {"x-team": "research"}
    assert config.aliases["fast"] == "openai:gpt-4.1-mini"
    assert config.prices["local:llama3"].output_per_mtok == 0.2
    assert (config.company_root, config.journal_model) == ("chief", "openai:gpt-4.1-nano")
    assert dict(config.unknown) == {"slack": {"enabled": True}}


def test_company_defaults_and_bad_values(tmp_path: Path) -> None:
    write(tmp_path, "")
    config = load_config(tmp_path, env={})
    assert (config.company_root, config.journal_model) == ("ceo", None)
    write(tmp_path, "[company]\nroot = 3\n")
    with pytest.raises(AgentRunnerError, match=r"company\.root must be a non-empty string"):
        load_config(tmp_path, env={})
    write(tmp_path, "[journal]\nmodle = 'x'\n")
    with pytest.raises(AgentRunnerError, match=r"did you mean 'journal\.model'"):
        load_config(tmp_path, env={})


def test_outside_a_project_is_an_error_naming_init(tmp_path: Path) -> None:
    with pytest.raises(AgentRunnerError) as caught:
        load_config(tmp_path, env={})
    assert caught.value.code == "runner_io"
    assert "not in an agentrunner project" in caught.value.message
    assert str(tmp_path) in caught.value.message
    assert caught.value.hint is not None and "agentrunner init" in caught.value.hint


def test_no_file_gives_defaults_when_not_required(tmp_path: Path) -> None:
    config = load_config(tmp_path, env={}, required=False)
    assert config.path is None
    assert config.agents_dir == (tmp_path / "agents").resolve()
    assert config.resolved_database_url.startswith("sqlite:///")
    assert config.resolved_database_url.endswith(".agentrunner/agentrunner.db")


def test_environment_overrides(tmp_path: Path) -> None:
    write(tmp_path, FULL)
    env = {
        "AGENTRUNNER_DATABASE_URL": "postgresql://u:p@db/x",
        "AGENTRUNNER_AGENTS_DIR": "other",
        "AGENTRUNNER_DEFAULT_MODEL": "test",
    }
    config = load_config(tmp_path, env=env)
    assert config.database_url == "postgresql://u:p@db/x"
    assert config.agents_dir == (tmp_path / "other").resolve()
    assert config.default_model == "test"


def test_explicit_config_path(tmp_path: Path) -> None:
    other = tmp_path / "elsewhere"
    other.mkdir()
    write(other, '[defaults]\nmodel = "test"\n')
    config = load_config(tmp_path, env={"AGENTRUNNER_CONFIG": str(other / "agentrunner.toml")})
    assert config.default_model == "test" and config.root == other.resolve()


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('[providers.openai]\napi_key = "sk-123"\n', "secrets never go in agentrunner.toml"),
        ('[database]\nurl = "postgresql://me:hunter2@db/x"\n', "holds a password"),
        ('[defaults]\nmodle = "x"\n', "did you mean 'defaults.model'"),
        ('[providers.x]\nkind = "cohere"\n', "kind must be one of"),
        ('[providers.x]\nkind = "openai-respnses"\n', "(did you mean 'openai-responses'?)"),
        ('[providers.x]\napi = "respnses"\n', "got 'respnses' (did you mean 'responses'?)"),
        ("[budgets]\nper_run_usd = -1\n", "non-negative number"),
        ('defaults = "x"\n', "[defaults] must be a table"),
        ('[prices."m"]\ninput = 1\n', "unknown key 'prices.m.input'"),
        ("[cache]\nttl_s = 0\n", "cache.ttl_s must be a positive number of seconds"),
        ('[cache]\nmax_mb = "lots"\n', "cache.max_mb must be a positive number of megabytes"),
        ("[workers]\nmax_queue = 0\n", "workers.max_queue must be at least 1"),
        ('[workers]\nlease_s = "soon"\n', "workers.lease_s must be a positive number of seconds"),
        ("[workers]\nlease_s = 0\n", "workers.lease_s must be a positive number of seconds"),
        ('[budgets]\nper_run_usd = "lots"\n', "non-negative number of dollars"),
        ('[budgets]\nallow_unpriced = "yes"\n', "budgets.allow_unpriced must be true or false"),
        ("[budgets]\nallow_unpriced = 1\n", "budgets.allow_unpriced must be true or false"),
        ("[budgets]\nallow_unpricd = true\n", "did you mean 'budgets.allow_unpriced'"),
        ('[workers]\nmax_queue = "many"\n', "workers.max_queue must be a whole number"),
        ('[server]\nallowed_hosts = "a.b"\n', "must be a list of host names"),
        ('[server]\nallowed_hosts = ["http://a.b"]\n', "'http://a.b' is not a host name"),
        ('[server]\nallowed_hosts = ["a.b:8080"]\n', "'a.b:8080' is not a host name"),
        ('[server]\nallow_hosts = ["a.b"]\n', "did you mean 'server.allowed_hosts'"),
        ("[budgts]\nper_run_usd = 1\n", "unknown section '[budgts]' (did you mean '[budgets]'?)"),
        ('[persna]\npreset = "x"\n', "unknown section '[persna]' (did you mean '[persona]'?)"),
        ('[compnay]\nroot = "boss"\n', "unknown section '[compnay]' (did you mean '[company]'?)"),
        ("[persona]\npreset = 3\n", "the persona must be a name, got 3"),
        ('[persona]\nprest = "friendly"\n', "did you mean 'persona.preset'"),
        ('[persona]\noverrides = ["cto"]\n', "must map agent ids to persona names"),
        ("[persona.overrides]\ncto = 1\n", "must map agent ids to persona names"),
        ('[extensions]\nmodules = "my_ext"\n', "must be a list of Python module names"),
        ('[extensions]\nmodules = ["my-ext"]\n', "must be a list of Python module names"),
        ('[extensions]\nmodule = ["my_ext"]\n', "did you mean 'extensions.modules'"),
        ('[telemetry]\nenabled = "yes"\n', "telemetry.enabled must be true or false"),
        ("[telemetry]\ncapture_content = 1\n", "telemetry.capture_content must be true or"),
        ('[telemetry]\nendpoint = "localhost:4318"\n', "must be an http:// or https:// URL"),
        ("[telemetry]\nendpoint = 4318\n", "must be an http:// or https:// URL"),
        ('[telemetry]\nendpoint = "https://me:hunter2@otel.example"\n', "holds a password"),
        ('[telemetry]\nendpiont = "http://x"\n', "did you mean 'telemetry.endpoint'"),
        ('[telemetry]\nservice_name = ""\n', "telemetry.service_name must be a non-empty"),
        ('[providers.x]\nprompt_cache = "no"\n', "providers.x.prompt_cache must be true or false"),
        ("[providers.x]\nprompt_cache = 0\n", "providers.x.prompt_cache must be true or false"),
        ("[providers.x]\nprompt_cahce = false\n", "did you mean 'prompt_cache'"),
        ('[models."openai:gpt-4o"]\ncontext_window = "8k"\n', "a whole number of tokens"),
        ('[models."openai:gpt-4o"]\ncontext_window = 8\n', "at least 1024, got 8"),
        ('[models."openai:gpt-4o"]\ncontext_window = 8000.5\n', "got 8000.5"),
        ('[models."openai:gpt-4o"]\ncontext = 8000\n', "unknown key 'models.openai:gpt-4o.cont"),
        ('[models."gpt-4o"]\ncontext_window = 8000\n', "must name a model as provider:model"),
        ('[models]\n"openai:gpt-4o" = 8000\n', "must be a table, e.g. context_window = 8000"),
        ('[compaction]\nenabled = "no"\n', "compaction.enabled must be true or false"),
        ("[compaction]\nmodel = 3\n", "compaction.model must be a non-empty string"),
        ('[compaction]\nmodle = "x:y"\n', "did you mean 'compaction.model'"),
        ('[compacton]\nmodel = "x:y"\n', "did you mean '[compaction]'?"),
        ("[compaction]\nhistory_tokens = 16\n", "compaction.history_tokens must be a whole num"),
        ('[compaction]\nhistory_tokens = "16k"\n', "at least 1024, or \"window\", got '16k'"),
        ("[compaction]\nhistory_tokens = 16000.5\n", "history_tokens must be a whole number"),
        ("[compaction]\nhistory_tokens = true\n", "history_tokens must be a whole number"),
        ("[compaction]\nhistory_token = 16000\n", "did you mean 'compaction.history_tokens'"),
        ('[telemetry]\nmetrics = "off"\n', "telemetry.metrics must be true or false"),
        ('[providers.x]\napi = "completions"\n', "providers.x.api must be one of chat, responses"),
        ('[providers.x]\nkind = "anthropic"\napi = "chat"\n', "chooses between OpenAI's APIs"),
        (
            '[providers.az]\nbase_url = "https://a.openai.azure.com"\napi_version = "2024-10-21"\n'
            'api = "responses"\n',
            "Azure OpenAI (api_version) is spoken to in Chat Completions only",
        ),
        ('[models."anthropic:claude-x"]\napi = "chat"\n', "its provider's kind is 'anthropic'"),
        ('[models."openai:gpt-4o"]\napi = "both"\n', 'models."openai:gpt-4o".api must be one'),
        ('[security]\nsecret_env = "VAULT"\n', "security.secret_env must be a list of environ"),
        ("[security]\nsecret_env = [3]\n", "security.secret_env: 3 is not an environment var"),
        ('[security]\nsecret_env = [""]\n', "'' is not an environment variable name"),
        ('[security]\nsecret_envs = ["VAULT"]\n', "did you mean 'security.secret_env'"),
        ('[securty]\nsecret_env = ["VAULT"]\n', "did you mean '[security]'?"),
    ],
)
def test_bad_config(tmp_path: Path, text: str, fragment: str) -> None:
    write(tmp_path, text)
    with pytest.raises(AgentRunnerError) as info:
        load_config(tmp_path, env={})
    err = info.value
    assert err.code is ErrorCode.INVALID_SPECIFICATION
    assert fragment in err.message
    assert err.file and err.file.endswith("agentrunner.toml")
    assert "sk-123" not in err.message and "hunter2" not in err.message


def test_prompt_cache_hints_are_the_providers_default_unless_set(tmp_path: Path) -> None:
    write(
        tmp_path,
        "[providers.a]\nprompt_cache = false\n[providers.b]\nprompt_cache = true\n"
        "[providers.c]\nkind = 'anthropic'\n",
    )
    providers = load_config(tmp_path, env={}).providers
    assert [providers[n].prompt_cache for n in "abc"] == [False, True, None]


def test_openai_api_by_provider_and_by_model(tmp_path: Path) -> None:
    """OpenAI's built-in provider speaks the Responses API; its table may say `api` alone (the
    rest stays the built-in's) and a model's table may choose for that model; a table with a
    base_url of its own is a provider of its own, Chat Completions unless it says otherwise."""
    write(
        tmp_path,
        '[providers.openai]\napi = "chat"\n'
        '[models."openai:gpt-5"]\napi = "responses"\n'
        '[providers.local]\nbase_url = "http://127.0.0.1:8000/v1"\napi = "responses"\n'
        '[providers.groq]\nbase_url = "http://proxy.internal/groq"\n',
    )
    config = load_config(tmp_path, env={})
    assert config.providers["openai"] == ProviderConfig(
        "openai", "openai", "https://api.openai.com/v1", "OPENAI_API_KEY"
    )
    assert dict(config.model_kinds) == {"openai:gpt-5": "openai-responses"}
    local, groq = config.providers["local"], config.providers["groq"]
    assert (local.kind, local.api_key_env) == ("openai-responses", None)
    assert (groq.kind, groq.base_url, groq.api_key_env) == (
        "openai",
        "http://proxy.internal/groq",
        None,
    )
    write(tmp_path, "")
    assert dict(load_config(tmp_path, env={}).model_kinds) == {}


def test_context_windows_and_compaction(tmp_path: Path) -> None:
    """[models."provider:model"] context_window (for the registry to use over what it knows),
    and [compaction]: on with the agent's own model unless the file says otherwise."""
    write(tmp_path, "")
    plain = load_config(tmp_path, env={})
    assert dict(plain.context_windows) == {}
    assert (plain.compaction, plain.compaction_model) == (True, None)
    write(
        tmp_path,
        '[models."openai:gpt-4o"]\ncontext_window = 8000\n'
        '[models."local:llama3"]\ncontext_window = 4096\n'
        '[compaction]\nenabled = false\nmodel = "openai:gpt-4.1-nano"\n',
    )
    config = load_config(tmp_path, env={})
    assert dict(config.context_windows) == {"openai:gpt-4o": 8000, "local:llama3": 4096}
    assert (config.compaction, config.compaction_model) == (False, "openai:gpt-4.1-nano")


@pytest.mark.parametrize(
    ("written", "tokens"),
    [
        ("", DEFAULT_HISTORY_TOKENS),
        ("history_tokens = 4000\n", 4000),
        ('history_tokens = "window"\n', WHOLE_WINDOW),
    ],
)
def test_compaction_history_tokens(tmp_path: Path, written: str, tokens: int) -> None:
    """[compaction] history_tokens: the most history a request carries, 32,000 tokens unless
    the file says otherwise; "window": what the model's window has room for."""
    write(tmp_path, f"[compaction]\n{written}")
    assert load_config(tmp_path, env={}).history_tokens == tokens
    assert DEFAULT_HISTORY_TOKENS == 32_000 and WHOLE_WINDOW > 10**12


def test_a_bad_history_tokens_names_its_line(tmp_path: Path) -> None:
    write(tmp_path, '[compaction]\nmodel = "openai:gpt-4.1-nano"\nhistory_tokens = 0\n')
    with pytest.raises(AgentRunnerError) as info:
        load_config(tmp_path, env={})
    assert info.value.line == 3 and "got 0" in info.value.message
    assert info.value.hint and "default 32000" in info.value.hint


def test_persona_and_extensions_sections(tmp_path: Path) -> None:
    write(
        tmp_path,
        '[persona]\npreset = "academic"\n[persona.overrides]\ncto = "concise"\n'
        '[extensions]\nmodules = ["acme.audit", "acme.slack:setup"]\n',
    )
    config = load_config(tmp_path, env={})
    assert config.default_persona == "academic"
    assert dict(config.persona_overrides) == {"cto": "concise"}
    assert config.extension_modules == ("acme.audit", "acme.slack:setup")
    write(tmp_path, "")
    bare = load_config(tmp_path, env={})
    assert (bare.default_persona, dict(bare.persona_overrides), bare.extension_modules) == (
        "professional",
        {},
        (),
    )


def test_queue_bound_and_allowed_hosts(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, "[project]\n").parent, env={})
    assert (config.max_queue, config.allowed_hosts) == (1000, ())
    write(
        tmp_path, '[workers]\nmax_queue = 5\n[server]\nallowed_hosts = ["Box.Local", "[FD00::1]"]\n'
    )
    config = load_config(tmp_path, env={})
    assert (config.max_queue, config.allowed_hosts) == (5, ("box.local", "[fd00::1]"))


def test_cache_limits(tmp_path: Path) -> None:
    write(tmp_path, "[cache]\nttl_s = 3600\nmax_mb = 1.5\n")
    config = load_config(tmp_path, env={})
    assert (config.cache_ttl_s, config.cache_max_bytes) == (3600.0, 1572864)
    write(tmp_path, "[cache]\n")
    config = load_config(tmp_path, env={})
    assert (config.cache_ttl_s, config.cache_max_bytes) == (None, None)


def test_telemetry_is_off_until_asked_and_the_file_sets_it(tmp_path: Path) -> None:
    bare = load_config(write(tmp_path, "[project]\n").parent, env={}).telemetry
    assert (bare.enabled, bare.capture_content, bare.service_name) == (False, False, "agentrunner")
    assert bare.traces_url == "http://localhost:4318/v1/traces"  # OTLP/HTTP's own default
    assert bare.metrics_url == "http://localhost:4318/v1/metrics"
    assert (bare.metrics, bare.metric_interval_ms) == (True, 60_000)  # the SDK's defaults
    write(
        tmp_path,
        "[telemetry]\nenabled = true\ncapture_content = true\n"
        'service_name = "agents-prod"\nendpoint = "http://localhost:6006/"\n',
    )
    set_ = load_config(tmp_path, env={}).telemetry
    assert (set_.enabled, set_.capture_content, set_.service_name) == (True, True, "agents-prod")
    assert set_.traces_url == "http://localhost:6006/v1/traces"
    assert set_.metrics_url == "http://localhost:6006/v1/metrics"
    write(tmp_path, "[telemetry]\nenabled = true\nmetrics = false\n")  # a receiver of traces only
    assert load_config(tmp_path, env={}).telemetry.metrics is False


def test_telemetry_reads_the_standard_variables_over_the_file(tmp_path: Path) -> None:
    write(tmp_path, '[telemetry]\nenabled = true\nservice_name = "file"\n')
    env = {
        "OTEL_SERVICE_NAME": "from-env",
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true",
    }
    telemetry = load_config(tmp_path, env=env).telemetry
    assert (telemetry.enabled, telemetry.capture_content) == (True, True)
    assert telemetry.service_name == "from-env"
    assert telemetry.traces_url == "http://collector:4318/v1/traces"
    # the traces' own endpoint is used as it is, as the SDK uses it
    env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = (
        "https://cloud.langfuse.com/api/public/otel/v1/traces"
    )
    assert load_config(tmp_path, env=env).telemetry.traces_url == (
        "https://cloud.langfuse.com/api/public/otel/v1/traces"
    )
    assert load_config(tmp_path, env=env).telemetry.metrics_url == (
        "http://collector:4318/v1/metrics"
    )
    # metrics: their own endpoint, as it is; how often they are sent; or none
    env["OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"] = "http://mimir:4318/otlp/v1/metrics"
    env["OTEL_METRIC_EXPORT_INTERVAL"] = "15000"
    telemetry = load_config(tmp_path, env=env).telemetry
    assert telemetry.metrics_url == "http://mimir:4318/otlp/v1/metrics"
    assert (telemetry.metrics, telemetry.metric_interval_ms) == (True, 15_000)
    assert load_config(tmp_path, env={"OTEL_METRICS_EXPORTER": "none"}).telemetry.metrics is False
    write(tmp_path, "[telemetry]\nenabled = true\nmetrics = false\n")
    assert load_config(tmp_path, env={"OTEL_METRICS_EXPORTER": "otlp"}).telemetry.metrics is True
    write(tmp_path, '[telemetry]\nenabled = true\nservice_name = "file"\n')
    for off in ({"AGENTRUNNER_TELEMETRY": "false"}, {"OTEL_SDK_DISABLED": "true"}):
        assert load_config(tmp_path, env=off).telemetry.enabled is False
    write(tmp_path, "[project]\n")
    assert load_config(tmp_path, env={"AGENTRUNNER_TELEMETRY": "1"}).telemetry.enabled is True
    assert load_config(tmp_path, env={"AGENTRUNNER_TELEMETRY": ""}).telemetry.enabled is False


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({"AGENTRUNNER_TELEMETRY": "maybe"}, "AGENTRUNNER_TELEMETRY must be true or false"),
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc"),
        (
            {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"},
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/json",
        ),
        (
            {"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "grpc"},
            "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL=grpc: agentrunner sends metrics as OTLP over",
        ),
        ({"OTEL_METRICS_EXPORTER": "prometheus"}, "OTEL_METRICS_EXPORTER=prometheus"),
        ({"OTEL_METRIC_EXPORT_INTERVAL": "soon"}, "OTEL_METRIC_EXPORT_INTERVAL must be a whole"),
        ({"OTEL_METRIC_EXPORT_INTERVAL": "0"}, "OTEL_METRIC_EXPORT_INTERVAL must be a whole"),
    ],
)
def test_telemetry_variables_that_cannot_be_honoured(
    tmp_path: Path, env: dict[str, str], fragment: str
) -> None:
    write(tmp_path, "[telemetry]\nenabled = true\n")
    with pytest.raises(AgentRunnerError) as info:
        load_config(tmp_path, env=env)
    assert info.value.code is ErrorCode.VALIDATION
    assert fragment in info.value.message and info.value.hint
    # the OTEL_ variables matter only to telemetry that is on (other programs read them too)
    write(tmp_path, "[telemetry]\nenabled = false\n")
    if next(iter(env)).startswith("OTEL_"):
        assert load_config(tmp_path, env=env).telemetry.enabled is False
    # each signal's own variable wins over the general one
    write(tmp_path, "[telemetry]\nenabled = true\n")
    both = {
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
        "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "http/protobuf",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
    }
    assert load_config(tmp_path, env=both).telemetry.enabled is True
    # and metrics that are not sent need no protocol
    del both["OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"]
    with pytest.raises(AgentRunnerError, match="sends metrics as OTLP over HTTP"):
        load_config(tmp_path, env=both)
    assert load_config(tmp_path, env={**both, "OTEL_METRICS_EXPORTER": "none"}).telemetry.enabled


def test_bad_toml_names_the_file(tmp_path: Path) -> None:
    write(tmp_path, "[defaults\nmodel = 1\n")
    with pytest.raises(AgentRunnerError) as info:
        load_config(tmp_path, env={})
    assert "invalid TOML" in info.value.message
    assert "line 1" in info.value.message


def test_secret_error_names_the_line(tmp_path: Path) -> None:
    write(tmp_path, '[defaults]\nmodel = "x"\n\n[providers.openai]\napi_key = "sk-1"\n')
    with pytest.raises(AgentRunnerError) as info:
        load_config(tmp_path, env={})
    assert info.value.line == 5


class TestExtensions:
    def test_reserved_and_duplicate_keys_are_rejected(self) -> None:
        registry = ConfigExtensionRegistry()
        with pytest.raises(AgentRunnerError, match="reserved"):
            registry.register("database", {})
        registry.register("slack", {"enabled": True})
        with pytest.raises(AgentRunnerError, match="already registered"):
            registry.register("slack", {})
        for company_key in ("company", "journal"):
            with pytest.raises(AgentRunnerError, match="reserved"):
                registry.register(company_key, {})

    def test_partial_values_are_shallow_merged(self, tmp_path: Path) -> None:
        registry = ConfigExtensionRegistry()
        registry.register("alerts", {"enabled": True, "level": "medium"})
        write(tmp_path, '[alerts]\nlevel = "high"\n')
        config = load_config(tmp_path, env={}, extensions=registry)
        assert dict(config.extensions["alerts"]) == {"enabled": True, "level": "high"}

    def test_validation_failure_names_the_section(self, tmp_path: Path) -> None:
        def validate(value: object) -> None:
            raise ValueError("level must be low or high")

        registry = ConfigExtensionRegistry()
        registry.register("alerts", {"level": "low"}, validate)
        write(tmp_path, "[alerts]\n")
        with pytest.raises(AgentRunnerError, match=r"\[alerts\] is invalid: level must be"):
            load_config(tmp_path, env={}, extensions=registry)

    def test_unknown_sections_survive_load_and_save(self, tmp_path: Path) -> None:
        registry = ConfigExtensionRegistry()
        registry.register("alerts", {"enabled": True, "level": "medium"})
        write(tmp_path, FULL + '\n[alerts]\nlevel = "high"\n')
        config = load_config(tmp_path, env={}, extensions=registry)
        config.with_extension("alerts", {"level": "low"}).save()
        again = load_config(tmp_path, env={}, extensions=registry)
        assert dict(again.unknown) == {"slack": {"enabled": True}}
        assert dict(again.extensions["alerts"]) == {"enabled": True, "level": "low"}
        assert again.providers["local"].base_url == "http://127.0.0.1:11434/v1"


def test_secret_env_names_the_variables_an_operator_keeps_secret(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, "").parent, env={}).secret_env == ()
    write(tmp_path, '[defaults]\nmodel = "x"\n\n[security]\nsecret_env = ["VAULT_TOKEN", "_K2"]\n')
    assert load_config(tmp_path, env={}).secret_env == ("VAULT_TOKEN", "_K2")
    write(tmp_path, '[defaults]\nmodel = "x"\n\n[security]\nsecret_env = ["VAULT_TOKEN", "A-B"]\n')
    with pytest.raises(AgentRunnerError) as info:
        load_config(tmp_path, env={})
    error = info.value
    assert error.code is ErrorCode.INVALID_SPECIFICATION and error.line == 5
    assert "security.secret_env: 'A-B' is not an environment variable name" in error.message
    assert error.hint and 'secret_env = ["VAULT_TOKEN"' in error.hint


@pytest.mark.parametrize(
    ("text", "line", "config_key", "fragment"),
    [
        (  # [defaults] model comes first: the error is [compaction]'s, on line 5
            '[defaults]\nmodel = "openai:gpt-4.1-mini"\n\n[compaction]\nmodel = 5\n',
            5,
            ("compaction", "model"),
            "compaction.model must be a non-empty string",
        ),
        (  # enabled is a key of [telemetry] too
            '[telemetry]\nenabled = true\n[journal]\nmodel = "x:y"\n[compaction]\nenabled = "no"\n',
            6,
            ("compaction", "enabled"),
            "compaction.enabled must be true or false",
        ),
        (  # [journal] model, after [compaction]'s and [defaults]' model
            '[defaults]\nmodel = "x:y"\n[compaction]\nmodel = "x:z"\n[journal]\nmodel = ""\n',
            6,
            ("journal", "model"),
            "journal.model must be a non-empty string",
        ),
        (  # two providers: the second's kind is wrong
            '[providers.a]\nkind = "openai"\n\n[providers.b]\nkind = "cohere"\n',
            5,
            ("providers", "b", "kind"),
            "providers.b.kind must be one of",
        ),
        (  # two models' windows, the quoted names holding dots
            '[models."a:m-4.1"]\ncontext_window = 8000\n[models."b:m-4.1"]\ncontext_window = 8\n',
            4,
            ("models", "b:m-4.1", "context_window"),
            "at least 1024, got 8",
        ),
        (  # two prices; the wrong one written as a dotted key under [prices]
            '[prices."a:x"]\ninput_per_mtok = 1\n[prices]\n"b:y".input_per_mtok = -1\n',
            4,
            ("prices", "b:y", "input_per_mtok"),
            "prices.b:y.input_per_mtok must be a non-negative number",
        ),
        (  # after a multi-line string that reads like a [compaction] table
            '[defaults]\nperson = """\n[compaction]\nmodel = 3\n"""\n[compaction]\nmodel = 3\n',
            7,
            ("compaction", "model"),
            "compaction.model must be a non-empty string",
        ),
        (  # dotted keys before any table, [defaults] model after them
            'compaction.enabled = true\ncompaction.model = 5\n\n[defaults]\nmodel = "x:y"\n',
            2,
            ("compaction", "model"),
            "compaction.model must be a non-empty string",
        ),
        (  # inline tables
            'defaults = { model = "x:y" }\ncompaction = { enabled = true, model = 3 }\n',
            2,
            ("compaction", "model"),
            "compaction.model must be a non-empty string",
        ),
    ],
)
def test_an_error_is_located_by_its_own_section_and_key(
    tmp_path: Path, text: str, line: int, config_key: tuple[str, ...], fragment: str
) -> None:
    """A key that several sections have (model, enabled, kind, context_window) is reported at
    its own section's line, not at the first line that has a key of that name."""
    write(tmp_path, text)
    with pytest.raises(AgentRunnerError) as info:
        load_config(tmp_path, env={})
    error = info.value
    assert error.code is ErrorCode.INVALID_SPECIFICATION and fragment in error.message
    assert error.line == line
    assert error.details["config_key"] == config_key


def test_an_extension_section_that_fails_its_check_is_located_at_its_table(tmp_path: Path) -> None:
    def validate(value: object) -> None:
        raise ValueError("level must be low or high")

    registry = ConfigExtensionRegistry()
    registry.register("alerts", {"level": "low"}, validate)
    write(tmp_path, '[defaults]\nmodel = "x:y"\n\n[alerts]\nlevel = "loud"\n')
    with pytest.raises(AgentRunnerError) as info:
        load_config(tmp_path, env={}, extensions=registry)
    assert (info.value.line, info.value.details["config_key"]) == (4, ("alerts",))
    write(tmp_path, 'alerts = { level = "loud" }\n')
    with pytest.raises(AgentRunnerError) as info:
        load_config(tmp_path, env={}, extensions=registry)
    assert info.value.line == 1
