"""A harbor environment for tests: plays the sandbox, with a scripted fate per task.

Used as `harbor run --env scripted_env:ScriptedEnv` with this directory on PYTHONPATH
(docs/harbor.md §9), so the REAL harbor runs whole jobs, resumes and retries offline.

Two files, named by environment variables, drive it:

  SCRIPTED_ENV_PLAN  JSON {task_name: [behaviour for attempt 1, attempt 2, ...]}; the last
                     entry repeats, and a task the plan does not name passes.
  SCRIPTED_ENV_LOG   JSON lines, one appended per trial that starts: task, attempt, behaviour,
                     trial name, and SCRIPTED_ENV_PHASE (e.g. "bench" / "mopup"), so a test
                     can say exactly which tasks a step executed. The attempt number is the
                     count of earlier lines for the task: that is how "ReadTimeout on attempt
                     1, pass on attempt 2" survives across separate harbor processes.

Behaviours, each raised where the real failure surfaces, so harbor records it as it would:

  pass, fail          the verifier's reward is 1 / 0
  ReadTimeout         httpx.ReadTimeout from start()          (sandbox API; no reward)
  SandboxError        huggingface_hub SandboxError from start() (no reward)
  CancelledError      asyncio.CancelledError from start()      (no reward)
  ConnectError        httpx.ConnectError from start()          (no reward)
  apt-mirror          NonZeroAgentExitCodeError during the agent run, with apt-get's
                      expired-mirror output (the verifier still runs: reward 0)
  AgentTimeoutError   the agent's exec outlasts the task's 1 s agent timeout (reward 0)
  ContextWindowExceededError  raised during the agent run (the verifier still runs: reward 0)
  KeyboardInterrupt   KeyboardInterrupt from start(), as harbor's SIGINT and SIGTERM handlers raise
                      one in whichever trial runs at that instant: harbor writes the trial finished
                      with neither a reward nor an exception, and exits
  hang                start() sleeps for an hour: the test kills harbor mid-trial
  slow-pass           start() waits until the file SCRIPTED_ENV_RELEASE exists (ten minutes
                      at most), then the trial passes: harbor is mid-trial until the test,
                      having acted meanwhile, releases it. Without SCRIPTED_ENV_RELEASE it
                      waits SCRIPTED_ENV_SLOW seconds (6).
  linger              slow-pass on SCRIPTED_ENV_RELEASE, and a harbor that lingers after an
                      interrupt: start() also starts a non-daemon thread that waits for the same
                      file (ten minutes at most), so once harbor is interrupted (its trial written
                      with a CancelledError, its main thread done) the process lives on until the
                      file exists or it is signalled again, as Run 2's harbor lived on after its
                      summary (an unclosed client's thread)
  server-dies         the model server dies under the run: start() SIGKILLs the pid in the
                      file SCRIPTED_ENV_SERVER_PID_FILE (the fake model server, so its endpoint
                      stops answering), creates SCRIPTED_ENV_SERVER_DEAD_FILE (the fake Jobs
                      API's "error_if_exists": its job turns ERROR), then raises
                      httpx.ConnectError (no reward), as a trial whose model vanished would

  held-<B>            any start behaviour B above (held-SandboxError, …), once the file
                      SCRIPTED_ENV_HOLD exists (ten minutes at most): the test decides when a
                      run's infra errors begin, so what watches them sees them in its order

Each log line also carries "at" (time.time() when the trial started), so a test can place a
trial inside a step's time window.

The agent must be `oracle` (it runs solution/solve.sh through exec(), which is where the
agent-phase behaviours happen); `nop` never calls the environment during its run.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time
from pathlib import Path

from harbor.environments.base import BaseEnvironment, ExecResult
from harbor.environments.capabilities import EnvironmentCapabilities

APT_MIRROR_OUTPUT = (
    "E: Failed to fetch http://security.debian.org/debian-security/dists/bullseye-security/"
    "InRelease  404  Not Found [IP: 151.101.2.132 80]\n"
    "E: The repository 'http://security.debian.org/debian-security bullseye-security Release' "
    "no longer has a Release file.\n"
    "E: Release file for http://deb.debian.org/debian/dists/bullseye-updates/InRelease is "
    "expired (invalid since 412d 3h 1min 2s). Updates for this repository will not be applied."
)

START_BEHAVIOURS = {"ReadTimeout", "SandboxError", "CancelledError", "ConnectError", "hang", "server-dies",
                    "KeyboardInterrupt"}
AGENT_BEHAVIOURS = {"apt-mirror", "AgentTimeoutError", "ContextWindowExceededError"}
KNOWN = ({"pass", "fail", "slow-pass", "linger"} | START_BEHAVIOURS | AGENT_BEHAVIOURS
         | {f"held-{b}" for b in START_BEHAVIOURS})


def _required_path(name: str) -> Path:
    value = os.environ.get(name)
    if not value:
        raise RuntimeError(f"ScriptedEnv needs {name} in harbor's environment (see tests/harbor_env/scripted_env.py)")
    return Path(value)


def _attempt_and_behaviour(task: str) -> tuple[int, str]:
    plan = json.loads(_required_path("SCRIPTED_ENV_PLAN").read_text())
    log = _required_path("SCRIPTED_ENV_LOG")
    earlier = 0
    if log.exists():
        earlier = sum(1 for line in log.read_text().splitlines() if line and json.loads(line)["task"] == task)
    script = plan.get(task, ["pass"])
    behaviour = script[min(earlier, len(script) - 1)]
    if behaviour not in KNOWN:
        raise RuntimeError(f"ScriptedEnv: unknown behaviour {behaviour!r} for {task} (known: {sorted(KNOWN)})")
    return earlier + 1, behaviour


def _wait_for(path: Path) -> None:
    """Until `path` exists, ten minutes at most: blocking, in a thread of its own."""
    for _ in range(12000):
        if path.exists():
            return
        time.sleep(0.05)


def _kill_the_server() -> None:
    pid = int(_required_path("SCRIPTED_ENV_SERVER_PID_FILE").read_text().strip())
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # already dead: the same end
    _required_path("SCRIPTED_ENV_SERVER_DEAD_FILE").touch()


class ScriptedEnv(BaseEnvironment):
    @staticmethod
    def type() -> str:
        return "scripted"

    @property
    def capabilities(self):
        return EnvironmentCapabilities()

    def _validate_definition(self):
        pass

    async def start(self, force_build):
        task = self.environment_name
        self._attempt, self._behaviour = _attempt_and_behaviour(task)
        entry = {
            "task": task,
            "attempt": self._attempt,
            "behaviour": self._behaviour,
            "trial": self.trial_paths.trial_dir.name,
            "job": self.trial_paths.trial_dir.parent.name,
            "phase": os.environ.get("SCRIPTED_ENV_PHASE", ""),
            "at": time.time(),
        }
        # One short line with O_APPEND: harbor runs trials as asyncio tasks in one process, and
        # harbor processes that overlap (a sharded bench) run different tasks, so a task's
        # attempt count never races.
        with _required_path("SCRIPTED_ENV_LOG").open("a") as log:
            log.write(json.dumps(entry) + "\n")

        b = self._behaviour
        if b.startswith("held-"):
            hold = _required_path("SCRIPTED_ENV_HOLD")
            for _ in range(12000):  # on an event, bounded: a test that forgot to release ends
                if hold.exists():
                    break
                await asyncio.sleep(0.05)
            b = self._behaviour = b.removeprefix("held-")
        if b == "server-dies":
            _kill_the_server()
            import httpx

            raise httpx.ConnectError("scripted: [Errno 111] Connection refused (the model server died)")
        if b == "ReadTimeout":
            import httpx

            raise httpx.ReadTimeout("scripted: timed out reading from the sandbox API")
        if b == "ConnectError":
            import httpx

            raise httpx.ConnectError("scripted: [Errno -2] Name or service not known")
        if b == "SandboxError":
            from huggingface_hub.errors import SandboxError

            raise SandboxError("scripted: connection lost while running command")
        if b == "CancelledError":
            raise asyncio.CancelledError("scripted: cancelled")
        if b == "KeyboardInterrupt":
            raise KeyboardInterrupt
        if b == "hang":
            await asyncio.sleep(3600)
        if b == "linger":
            release = _required_path("SCRIPTED_ENV_RELEASE")
            threading.Thread(target=_wait_for, args=(release,), name="scripted-linger").start()
        if b in ("slow-pass", "linger"):
            release = os.environ.get("SCRIPTED_ENV_RELEASE")
            if not release:
                await asyncio.sleep(float(os.environ.get("SCRIPTED_ENV_SLOW", "6")))
            for _ in range(12000):  # on an event, bounded: a test that forgot to release ends
                if not release or Path(release).exists():
                    break
                await asyncio.sleep(0.05)

    async def stop(self, delete):
        pass

    async def upload_file(self, source_path, target_path):
        pass

    async def upload_dir(self, source_dir, target_dir):
        pass

    def _reward(self) -> str:
        return "1" if self._behaviour in ("pass", "slow-pass", "linger") else "0"

    async def download_file(self, source_path, target_path):
        Path(target_path).parent.mkdir(parents=True, exist_ok=True)
        if str(source_path).endswith("reward.txt"):
            Path(target_path).write_text(self._reward())

    async def download_dir(self, source_dir, target_dir):
        Path(target_dir).mkdir(parents=True, exist_ok=True)
        if str(source_dir).rstrip("/").endswith("verifier"):
            (Path(target_dir) / "reward.txt").write_text(self._reward())

    async def exec(self, command, cwd=None, env=None, timeout_sec=None, user=None):
        # The oracle agent's solve.sh is the only long command; the agent-phase behaviours
        # happen there, inside harbor's agent timeout and its NonZeroAgentExitCodeError handling.
        if "solve" in command:
            b = self._behaviour
            if b == "AgentTimeoutError":
                await asyncio.sleep(5)  # the task's agent timeout is 1 s
            if b == "apt-mirror":
                from harbor.agents.installed.base import NonZeroAgentExitCodeError

                raise NonZeroAgentExitCodeError(f"Command failed (exit 100): apt-get update\n{APT_MIRROR_OUTPUT}")
            if b == "ContextWindowExceededError":
                from harbor.agents.installed.base import ContextWindowExceededError

                raise ContextWindowExceededError(
                    "litellm.ContextWindowExceededError: This model's maximum context length is 262144 tokens"
                )
        return ExecResult(stdout="", stderr="", return_code=0)
