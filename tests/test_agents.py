"""Every agent harbor ships, decided from harbor's own classes; the key's path; claude-code and codex
through the real harbor against the loopback fake model server.

tools/run/agents.py reads the wiring from harbor's agent classes at the pinned version and proves it
with harbor's resolver. These tests hold it to harbor's declarations (a change in them fails here,
not in a run), hold the key to the environment (templates in argv and config.json, never a value),
and run a claude-code and a codex bench with the exact argv scripts/argv.sh builds, through the real
`harbor run`, on tests/harbor_env/agent_env.py, which makes the call each agent's client would make
with only the environment harbor handed the exec.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from tools import settings_rules
from tools.hub import submission_meta
from tools.run import agents

REPO = Path(__file__).resolve().parents[1]
MODEL = "Qwen/Qwen3.8-27B-FP8"
SERVED = list(settings_rules.SERVED_PROTOCOLS)
HARBOR = REPO / ".venv" / "bin" / "harbor"

# What harbor 0.26.0's classes decide against a server of all three protocols (exact counts: an agent
# added, removed or re-declared by a harbor upgrade changes them).
HOST = ["computer-1", "dspy-rlm", "terminus-2"]
SANDBOX = ["aider", "claude-code", "codex", "copilot-cli", "goose", "hermes", "kimi-code", "mini-swe-agent",
           "muse-code", "openhands", "openhands-sdk", "qwen-coder", "swe-agent"]
NONE = ["nop", "oracle"]

SNAPSHOT = {
    "terminus-2": agents.Wiring(
        "terminus-2", "host", "harbor.agents.terminus_2.terminus_2:Terminus2", "openai_chat_completions",
        f"openai/{MODEL}", "OPENAI_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "v1", "/v1/chat/completions"),
    "mini-swe-agent": agents.Wiring(
        "mini-swe-agent", "sandbox", "harbor.agents.installed.mini_swe_agent:MiniSweAgent", "openai_chat_completions",
        f"openai/{MODEL}", "OPENAI_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "v1", "/v1/chat/completions"),
    "claude-code": agents.Wiring(
        "claude-code", "sandbox", "harbor.agents.installed.claude_code:ClaudeCode", "anthropic_messages",
        f"anthropic/{MODEL}", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "root",
        "/v1/messages"),
    "codex": agents.Wiring(
        "codex", "sandbox", "harbor.agents.installed.codex:Codex", "openai_responses",
        f"openai/{MODEL}", "OPENAI_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "v1", "/v1/responses"),
    "oracle": agents.Wiring("oracle", "none", "harbor.agents.oracle:OracleAgent"),
}


@pytest.fixture(scope="module")
def decisions() -> dict[str, agents.Wiring]:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    return {w.agent: w for w in agents.decide_all(SERVED, MODEL)}


def test_every_agent_harbor_lists_gets_a_decision_from_its_classes(decisions):
    listed = json.loads(subprocess.run([str(HARBOR), "agent", "list", "--json"], capture_output=True, text=True,
                                       check=True, timeout=120).stdout)
    assert sorted(decisions) == sorted(listed) and len(listed) == 47
    by_kind = {kind: sorted(a for a, w in decisions.items() if w.kind == kind) for kind in ("host", "sandbox", "none")}
    assert by_kind == {"host": HOST, "sandbox": SANDBOX, "none": NONE}
    refused = [w for w in decisions.values() if w.kind == "refused"]
    assert len(refused) == 29 and all(w.why and w.agent_class for w in refused)
    for w in decisions.values():
        if w.kind in ("host", "sandbox"):
            assert w.protocol in SERVED and w.route == agents.ROUTES[w.protocol][1] and w.model.endswith(f"/{MODEL}")
            assert w.forwarded == ((w.key_var, w.url_var) if w.kind == "sandbox" else ())
        if w.protocol == "anthropic_messages":  # a bearer only: the jobs proxy reads no x-api-key
            assert w.key_dest == "ANTHROPIC_AUTH_TOKEN"


def test_the_wiring_of_the_agents_this_repository_runs_is_harbor_s_declaration(decisions):
    for name, want in SNAPSHOT.items():
        assert decisions[name] == want, name
    assert decisions["claude-code"].line() == (
        "claude-code calls the model inside the sandbox (--ae templates) in anthropic_messages at the server's "
        "/v1/messages: key in ANTHROPIC_AUTH_TOKEN (Authorization: Bearer), base URL in ANTHROPIC_BASE_URL (the "
        f"endpoint without /v1), --model anthropic/{MODEL}; as harbor.agents.installed.claude_code:ClaudeCode."
        "MODEL_CONNECTION declares (harbor's resolver)")
    # What the snapshot rests on, in harbor's own declarations.
    from harbor.agents.installed.claude_code import ClaudeCode
    spec = ClaudeCode.MODEL_CONNECTION
    assert [f.value for f in spec.supported_api_formats] == ["anthropic_messages"]
    assert spec.agent_provider_access.api_key_candidate_names == ["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"]
    assert spec.agent_provider_access.base_url_candidate_names == ["ANTHROPIC_BASE_URL"]


def test_refusals_say_why(decisions):
    assert decisions["gemini-cli"].why == (
        "it speaks google_generate_content, and this server serves openai_chat_completions anthropic_messages "
        "openai_responses (google_generate_content is Google's Gemini API, which no engine here serves)")
    assert decisions["cursor-cli"].why.startswith("harbor declares no model connection for it (harbor.agents."
                                                  "installed.cursor_cli:CursorCli.MODEL_CONNECTION is None)")
    assert "only through its own configuration (a file or a flag it writes)" in decisions["opencode"].why
    assert "which anthropic_messages clients send as x-api-key" in decisions["opencode"].why
    only_chat = agents.decide("claude-code", ["openai_chat_completions"], MODEL)
    assert (only_chat.kind, only_chat.why) == ("refused", "it speaks anthropic_messages, and this server serves "
                                                          "openai_chat_completions")
    assert agents.decide("no-such-agent", SERVED, MODEL).why == (
        f"AGENT=no-such-agent is not an agent harbor {agents.harbor_version()} ships (harbor agent list)")


def test_the_refusal_names_the_fix_with_the_agents_this_server_allows():
    result = CliRunner().invoke(agents.cli, ["wiring", "claude-code", "openai_chat_completions", MODEL])
    assert result.exit_code == 1
    allowed = ("aider computer-1 copilot-cli dspy-rlm goose hermes kimi-code mini-swe-agent nop openhands "
               "openhands-sdk oracle qwen-coder swe-agent terminus-2")
    assert result.output == (
        "Error: AGENT=claude-code is refused: it speaks anthropic_messages, and this server serves "
        "openai_chat_completions. Pick an agent this server's protocols (openai_chat_completions) allow: "
        f"{allowed} (docs/agents.md)\n")


def test_served_protocols_are_harbor_s_formats_and_each_has_its_route():
    from harbor.models.model_api_format import ModelApiFormat
    assert set(settings_rules.SERVED_PROTOCOLS) <= {f.value for f in ModelApiFormat}
    assert set(agents.ROUTES) == set(settings_rules.SERVED_PROTOCOLS)
    # Every other format harbor names is a vendor's own API, refused with its name.
    assert {f.value for f in ModelApiFormat} - set(agents.ROUTES) == set(agents.VENDOR_FORMATS)


# --- the key's path: the environment only -------------------------------------------------------

def bench_argv(run: str, **given: str) -> list[str]:
    """The harbor run argv scripts/argv.sh builds for RUN with the settings GIVEN (as on make's command line)."""
    script = ('source scripts/lib.sh; source scripts/argv.sh; RUN=$1; load_settings; agent_wiring; bench_argv argv; '
              'printf "%s\\0" "${argv[@]}"')
    env = dict(os.environ, CLI_SETTINGS=" ".join(given), **given)
    out = subprocess.run(["bash", "-c", script, "bash", run], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=180)
    assert out.returncode == 0, out.stderr
    return out.stdout.split("\0")[:-1]


@pytest.mark.parametrize(("agent", "env", "resolved"), [
    ("claude-code", {"ANTHROPIC_AUTH_TOKEN": "${ANTHROPIC_AUTH_TOKEN}", "ANTHROPIC_BASE_URL": "${ANTHROPIC_BASE_URL}"},
     ("ANTHROPIC_AUTH_TOKEN", "anthropic_messages", "https://job--30000.hf.jobs", ["ANTHROPIC_BASE_URL"])),
    ("codex", {"OPENAI_API_KEY": "${OPENAI_API_KEY}", "OPENAI_BASE_URL": "${OPENAI_BASE_URL}"},
     ("OPENAI_API_KEY", "openai_responses", "https://job--30000.hf.jobs/v1", ["OPENAI_BASE_URL"])),
    ("terminus-2", {}, ("OPENAI_API_KEY", None, "https://job--30000.hf.jobs/v1", [])),
])
def test_the_key_travels_in_harbor_s_environment_as_a_template_never_a_value(agent, env, resolved):
    from harbor.agents.agent_auth_resolution import resolved_connection_mapping
    from harbor.models.job.config import JobConfig

    token = "hf_" + secrets.token_hex(16)
    argv = bench_argv("qwen-claude-code", AGENT=agent)
    assert token not in " ".join(argv) and argv[:5] == ["harbor", "run", "--agent", agent, "--model"]
    base = "https://job--30000.hf.jobs/v1"
    names = {"claude-code": ("ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL")}.get(agent, ("OPENAI_API_KEY", "OPENAI_BASE_URL"))
    url = base.removesuffix("/v1") if agent == "claude-code" else base
    harbor_env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", HF_TOKEN=token, **{names[0]: token, names[1]: url})
    out = subprocess.run([str(HARBOR), *argv[1:], "--print-config"], cwd=REPO, env=harbor_env, capture_output=True,
                         text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    assert token not in out.stdout + out.stderr
    config = JobConfig.model_validate_json(out.stdout)
    assert config.agents[0].env == env
    saved = dict(os.environ)
    try:
        os.environ.update({names[0]: token, names[1]: url})
        mapping = resolved_connection_mapping(config.agents[0])
    finally:
        os.environ.clear()
        os.environ.update(saved)
    key_dest, protocol, endpoint, url_dests = resolved
    assert (mapping["api_key_destination_name"], mapping["model_api_format"], mapping["resolved_base_url"]) == (
        key_dest, protocol, endpoint)
    assert mapping["base_url_destination_names"] == url_dests


def test_an_in_sandbox_agent_is_refused_where_its_key_could_reach_a_local_argv():
    env = dict(os.environ, RUN="qwen-claude-code", ENV_TYPE="docker")
    env.pop("CLI_SETTINGS", None)
    out = subprocess.run([str(REPO / "scripts" / "print.sh")], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=180)
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr == (
        "print: run 'qwen-claude-code': claude-code on ENV_TYPE=docker is refused: harbor.environments.docker.docker:"
        "DockerEnvironment (a DockerEnvironment) runs 'docker compose ... exec -e KEY=value', so its key "
        "(ANTHROPIC_AUTH_TOKEN=<token>) would sit in a local process's argv, readable by every local user (ps). Use "
        "ENV_TYPE=hf-sandbox, or AGENT=terminus-2 (it calls the model from harbor's own process)\n")


# --- claude-code and codex through the real harbor against the loopback fake -------------------

def wait_for(predicate, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.fixture
def fake_server(tmp_path):
    token = "hf_" + secrets.token_hex(16)
    port_file, record = tmp_path / "port", tmp_path / "requests.jsonl"
    proc = subprocess.Popen([sys.executable, str(REPO / "tests/fakes/fake_openai.py"), "--port-file", str(port_file),
                             "--record", str(record), "--model", MODEL, "--max-lifetime", "600"],
                            env=dict(os.environ, FAKE_OPENAI_EXPECT_TOKEN=token),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: port_file.exists() and port_file.read_text().strip() or proc.poll() is not None, 30, port_file)
    assert proc.poll() is None
    yield token, f"http://127.0.0.1:{port_file.read_text().strip()}/v1", record
    proc.terminate()
    proc.wait(timeout=10)


def one_task_dataset(root: Path) -> Path:
    task = root / "dataset" / "t-call"
    for sub in ("environment", "solution", "tests"):
        (task / sub).mkdir(parents=True)
    (task / "task.toml").write_text('version = "1.0"\n[agent]\ntimeout_sec = 300.0\n[verifier]\ntimeout_sec = 30.0\n'
                                    '[environment]\ndocker_image = "python:3.12-slim"\n')
    (task / "instruction.md").write_text("Say hi.\n")
    (task / "environment" / "Dockerfile").write_text("FROM python:3.12-slim\n")
    (task / "tests" / "test.sh").write_text("#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n")
    (task / "solution" / "solve.sh").write_text("#!/bin/bash\ntrue\n")
    return root / "dataset"


@pytest.mark.parametrize(("agent", "path", "models"), [
    ("claude-code", "/v1/messages", {name: MODEL for name in (
        "ANTHROPIC_MODEL", "ANTHROPIC_DEFAULT_SONNET_MODEL", "ANTHROPIC_DEFAULT_OPUS_MODEL",
        "ANTHROPIC_DEFAULT_HAIKU_MODEL", "ANTHROPIC_DEFAULT_FABLE_MODEL", "CLAUDE_CODE_SUBAGENT_MODEL")}),
    ("codex", "/v1/responses", {}),
])
def test_a_bench_reaches_the_server_on_the_agent_s_route_with_a_bearer(tmp_path, fake_server, agent, path, models):
    token, base, record = fake_server
    log = tmp_path / "agent-env.jsonl"
    given = {"AGENT": agent, "ENV_TYPE": "agent_env:AgentEnv", "DATASET_PATH": str(one_task_dataset(tmp_path)),
             "DATASET_REPO": "", "JOBS_DIR": str(tmp_path / "jobs"), "JOB_NAME": f"{agent}-job"}
    # The run's own harbor line, with the environment make bench gives harbor (with_agent_env).
    script = ('source scripts/lib.sh; source scripts/argv.sh; RUN=$1; load_settings; agent_wiring; bench_argv argv; '
              'with_agent_env "$TOKEN" "$BASE" env PYTHONPATH="$PWD/tests/harbor_env" "${argv[@]}"')
    env = dict(os.environ, CLI_SETTINGS=" ".join(given), TOKEN=token, BASE=base, AGENT_ENV_LOG=str(log),
               LITELLM_LOCAL_MODEL_COST_MAP="True", PATH=f"{REPO / '.venv' / 'bin'}:{os.environ['PATH']}", **given)
    out = subprocess.run(["bash", "-c", script, "bash", "qwen-claude-code"], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(c["agent"], c["status"], c["models"]) for c in calls] == [(agent, 200, models)]
    requests = [json.loads(line) for line in record.read_text().splitlines()]
    assert [(r["method"], r["path"], r["status"], r["auth"], r.get("x_api_key", False), r["body"]["model"])
            for r in requests] == [("POST", path, 200, "ok", False, MODEL)]
    job = tmp_path / "jobs" / f"{agent}-job"
    config = json.loads((job / "config.json").read_text())
    assert config["agents"][0]["env"] == {n: "${" + n + "}" for n in SNAPSHOT[agent].forwarded}
    for written in job.rglob("*"):
        if written.is_file():
            assert token not in written.read_text(errors="replace"), written
    result = json.loads((job / "result.json").read_text())
    assert (result["n_total_trials"], result["stats"]["n_completed_trials"], result["stats"]["n_errored_trials"]) == (1, 1, 0)
    # What the trial records as the model's provider is what a submission's metadata.yaml says.
    trials = [p for p in job.iterdir() if p.is_dir()]
    assert len(trials) == 1
    assert submission_meta.recorded_provider(trials) == {"claude-code": "anthropic", "codex": "openai"}[agent]


def test_docs_agents_md_lists_the_decisions(decisions):
    doc = (REPO / "docs" / "agents.md").read_text()
    section = doc[doc.index("## §2 Which agents run"):doc.index("## §3")]
    import re
    listed = {kind: re.findall(r"`([a-z0-9-]+)`", section[section.index(head):].split("\n- ")[0])
              for kind, head in (("host", "From harbor's own process"), ("sandbox", "From inside the sandbox"),
                                 ("none", "No model at all"))}
    assert listed == {"host": HOST, "sandbox": SANDBOX, "none": NONE}
    assert ".." + "/shared" not in doc  # the page stands in the repository alone
