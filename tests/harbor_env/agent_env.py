"""A harbor environment for tests that plays the sandbox of an installed agent calling its model.

Used as `harbor run --env agent_env:AgentEnv` with this directory on PYTHONPATH (docs/harbor.md §9).
When harbor execs the agent's run command, this environment makes the one request that agent's
client would make, using ONLY the environment harbor handed that exec (the per-exec env merged with
the trial's scoped env, BaseEnvironment._merge_env, as a real environment does):

  claude-code  POST $ANTHROPIC_BASE_URL/v1/messages, Authorization: Bearer $ANTHROPIC_AUTH_TOKEN
               (and x-api-key: $ANTHROPIC_API_KEY when that is set and not empty, as Anthropic
               clients send it), model $ANTHROPIC_MODEL
  codex        POST $OPENAI_BASE_URL/responses, Authorization: Bearer $OPENAI_API_KEY, model the
               run command's --model

Every other exec (installs, version checks, setup) succeeds with no output (codex's question for
the agent's uid and gid gets 1000 1000). The verifier's reward
is 1. One JSON line per agent call is appended to $AGENT_ENV_LOG: the agent, the URL called, the
HTTP status, the names of the variables the exec held, and the model variables' values (a model
name, never a key: no key's value is written anywhere).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import urllib.error
import urllib.request
from pathlib import Path

from harbor.environments.base import BaseEnvironment, ExecResult
from harbor.environments.capabilities import EnvironmentCapabilities

MODEL_VARS = ("ANTHROPIC_MODEL", "ANTHROPIC_DEFAULT_SONNET_MODEL", "ANTHROPIC_DEFAULT_OPUS_MODEL",
              "ANTHROPIC_DEFAULT_HAIKU_MODEL", "ANTHROPIC_DEFAULT_FABLE_MODEL", "CLAUDE_CODE_SUBAGENT_MODEL")


def _post(url: str, headers: dict[str, str], body: dict) -> int:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310 (a loopback fake)
            return answer.status
    except urllib.error.HTTPError as err:
        return err.code


def claude_call(env: dict[str, str], command: str) -> tuple[str, int]:
    url = env.get("ANTHROPIC_BASE_URL", "").rstrip("/") + "/v1/messages"
    headers = {"anthropic-version": "2023-06-01"}
    if env.get("ANTHROPIC_AUTH_TOKEN"):
        headers["Authorization"] = f"Bearer {env['ANTHROPIC_AUTH_TOKEN']}"
    if env.get("ANTHROPIC_API_KEY"):
        headers["x-api-key"] = env["ANTHROPIC_API_KEY"]
    body = {"model": env.get("ANTHROPIC_MODEL", ""), "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}
    return url, _post(url, headers, body)


def codex_call(env: dict[str, str], command: str) -> tuple[str, int]:
    url = env.get("OPENAI_BASE_URL", "").rstrip("/") + "/responses"
    m = re.search(r"--model (\S+)", command)
    model = shlex.split(m[1])[0] if m else ""
    headers = {"Authorization": f"Bearer {env['OPENAI_API_KEY']}"} if env.get("OPENAI_API_KEY") else {}
    return url, _post(url, headers, {"model": model, "input": "hi"})


# The agent's run command, by what it runs: its client's call.
CALLS = ((re.compile(r"\| claude --verbose "), "claude-code", claude_call),
         (re.compile(r"codex exec "), "codex", codex_call))


class AgentEnv(BaseEnvironment):
    @staticmethod
    def type() -> str:
        return "agent-test"

    @property
    def capabilities(self):
        return EnvironmentCapabilities()

    def _validate_definition(self):
        pass

    async def start(self, force_build):
        pass

    async def stop(self, delete):
        pass

    async def upload_file(self, source_path, target_path):
        pass

    async def upload_dir(self, source_dir, target_dir):
        pass

    async def download_file(self, source_path, target_path):
        Path(target_path).parent.mkdir(parents=True, exist_ok=True)
        if str(source_path).endswith("reward.txt"):
            Path(target_path).write_text("1")

    async def download_dir(self, source_dir, target_dir):
        Path(target_dir).mkdir(parents=True, exist_ok=True)
        if str(source_dir).rstrip("/").endswith("verifier"):
            (Path(target_dir) / "reward.txt").write_text("1")

    async def exec(self, command, cwd=None, env=None, timeout_sec=None, user=None):
        merged = self._merge_env(env) or {}
        for pattern, agent, call in CALLS:
            if pattern.search(command):
                url, status = await asyncio.to_thread(call, merged, command)
                entry = {"agent": agent, "url": url, "status": status, "env_names": sorted(merged),
                         "models": {k: merged[k] for k in MODEL_VARS if k in merged}}
                with Path(os.environ["AGENT_ENV_LOG"]).open("a") as log:
                    log.write(json.dumps(entry) + "\n")
                return ExecResult(stdout="", stderr="", return_code=0 if status == 200 else 1)
        if "CODEX_RUNTIME_ID" in command:  # codex asks the sandbox's shell for the agent's uid and gid
            return ExecResult(stdout="\nCODEX_RUNTIME_ID 1000 1000\n", stderr="", return_code=0)
        return ExecResult(stdout="", stderr="", return_code=0)
