"""No process ever carries the HF token in its argv, and no file the run writes holds it.

A real `scripts/bench.sh` and then a real `scripts/mopup.sh` run end to end, as in
tests/test_mopup.py (whose scratch tree and fake model server are reused): the real harbor
on tests/harbor_env/scripted_env.py and the local dataset, the probe and the agent talking
to the loopback fake OpenAI endpoint (which accepts only the token, so it must travel), and
doctor's `hf auth whoami` asking a loopback fake of the HF API. Meanwhile a watcher thread
reads every /proc/<pid>/cmdline every ~20 ms. argv is world-readable (ps); a process's
environment (/proc/<pid>/environ) is private to its user, which is where the token belongs,
so that is not checked.

A leak is the token or any 12-character piece of it. A self-test first proves the watcher
catches one: a `sleep` with the token in its argv.
"""

from __future__ import annotations

import ast
import inspect
import json
import os
import secrets
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from tests.test_mopup import FakeServer, Tree
from tools.hub import environments

REPO = Path(__file__).resolve().parents[1]
# The server profile's own model: a run serves the model its profile declares (tools/settings_rules.py).
MODEL = "Qwen/Qwen3.8-27B-FP8"
PIECE = 12  # the shortest piece of the token that counts as a leak
POLL_SECONDS = 0.02
PLAN = {"t-pass": ["pass"], "t-sandbox": ["SandboxError", "pass"]}  # one infra error to mop up


def new_token() -> str:
    """A distinctive fake token, fresh per test, so no two tests' watchers see each other's."""
    return "hf_" + secrets.token_hex(16)


def pieces(token: str) -> set[bytes]:
    """Every PIECE-long window of the token: any longer piece contains one."""
    raw = token.encode()
    return {raw[i:i + PIECE] for i in range(len(raw) - PIECE + 1)}


def holds_secret(data: bytes, windows: set[bytes]) -> bool:
    return any(w in data for w in windows)


@dataclass
class Seen:
    pid: int
    ppid: int
    argv: list[str]


@dataclass
class ArgvWatcher:
    """Polls /proc/*/cmdline (never environ) and keeps every process it saw."""

    token: str
    seen: dict[tuple[int, str], Seen] = field(default_factory=dict)
    leaks: list[Seen] = field(default_factory=list)
    scans: int = 0

    def __post_init__(self):
        self._windows = pieces(self.token)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ArgvWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.scan()
            self._stop.wait(POLL_SECONDS)

    def scan(self) -> None:
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                    raw = f.read()
                with open(f"/proc/{entry.name}/stat", "rb") as f:
                    stat = f.read()
            except OSError:  # gone between the listing and the read
                continue
            if not raw:  # a kernel thread, or a zombie
                continue
            # pid (comm) state ppid ...: comm may hold spaces and parentheses.
            ppid = int(stat.rsplit(b")", 1)[1].split()[1])
            seen = Seen(int(entry.name), ppid, raw.decode(errors="replace").rstrip("\0").split("\0"))
            key = (seen.pid, " ".join(seen.argv))
            if key not in self.seen:
                self.seen[key] = seen
                if holds_secret(raw, self._windows):
                    self.leaks.append(seen)
        self.scans += 1

    def descendants(self, root: int) -> list[Seen]:
        """Every process seen whose ancestry, as seen, leads to ROOT (ROOT included)."""
        parents = {s.pid: s.ppid for s in self.seen.values()}
        out = []
        for s in self.seen.values():
            pid, hops = s.pid, 0
            while pid not in (root, 0, 1) and pid in parents and hops < 64:
                pid, hops = parents[pid], hops + 1
            if pid == root:
                out.append(s)
        return out


def files_holding(root: Path, token: str) -> list[str]:
    """Files under ROOT (symlinks not followed: they lead into the repository) with a piece of the token."""
    windows = pieces(token)
    hits = []
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = Path(dirpath) / name
            if path.is_symlink():
                continue
            if holds_secret(path.read_bytes(), windows):
                hits.append(str(path.relative_to(root)))
    return sorted(hits)


def kinds(processes: list[Seen]) -> set[str]:
    """What each process was, in the words the assertions use."""
    found = set()
    for s in processes:
        line = " ".join(s.argv)
        for script in ("bench.sh", "mopup.sh", "doctor.sh", "probe.sh", "tally.sh"):
            if f"scripts/{script}" in line:
                found.add(script)
        if "hf auth whoami" in line:
            found.add("hf auth whoami")
        if "/harbor run " in line:
            found.add("harbor run")
        if "/harbor job resume " in line:
            found.add("harbor job resume")
        if s.argv[0].endswith("curl"):
            found.add("curl")
    return found


# --- the watcher catches a leak ------------------------------------------------------------------


@pytest.mark.parametrize("secret_part", ["whole", "piece"])
def test_the_watcher_catches_a_token_in_argv(secret_part):
    token = new_token()
    word = token if secret_part == "whole" else f"--x={token[7:7 + PIECE]}"
    with ArgvWatcher(token) as watcher:
        # sleep's argv[0] is free text: the token rides in it, as a leaked flag would.
        sleeper = subprocess.Popen([word, "60"], executable=shutil.which("sleep"))
        try:
            deadline = time.monotonic() + 60  # a bound: the sleeper lives until it is seen
            while not watcher.leaks and time.monotonic() < deadline:
                time.sleep(POLL_SECONDS)
        finally:
            sleeper.kill()
            sleeper.wait()
    assert [leak.pid for leak in watcher.leaks] == [sleeper.pid]
    assert watcher.leaks[0].argv == [word, "60"]


def test_the_watcher_ignores_a_token_in_the_environment():
    token = new_token()
    with ArgvWatcher(token) as watcher:
        sleeper = subprocess.Popen(["sleep", "60"], env={**os.environ, "HF_TOKEN": token})

        def seen_as_sleep() -> bool:
            # Between fork and exec the child still shows this test's own argv under its pid:
            # wait for the argv sleep runs with, not for the pid alone.
            return any(s.pid == sleeper.pid and s.argv == ["sleep", "60"] for s in list(watcher.seen.values()))

        try:
            deadline = time.monotonic() + 60  # a bound: the sleeper lives until it is seen
            while not seen_as_sleep() and time.monotonic() < deadline:
                time.sleep(POLL_SECONDS)
        finally:
            sleeper.kill()
            sleeper.wait()
    assert seen_as_sleep()
    assert watcher.leaks == []


# --- bench then mop-up, end to end -----------------------------------------------------------------


class FakeHFAPI:
    """tests/fakes/fake_hf_jobs.py on a free loopback port: doctor's whoami answers alice."""

    def __init__(self, tmp: Path):
        (tmp / "hf-scenario.json").write_text(json.dumps({"namespace": "alice"}))
        port_file = tmp / "hf-port"
        self.proc = subprocess.Popen(
            [sys.executable, str(REPO / "tests/fakes/fake_hf_jobs.py"), "--scenario", str(tmp / "hf-scenario.json"),
             "--record", str(tmp / "hf-requests.jsonl"), "--port-file", str(port_file), "--max-lifetime", "600"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while not (port_file.exists() and port_file.read_text().strip()):
            assert time.monotonic() < deadline, "fake HF API did not start"
            time.sleep(0.05)
        self.endpoint = f"http://127.0.0.1:{port_file.read_text().strip()}"

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)


# Per agent, the multiplier of the tasks' 1 s agent timeout. terminus-2 calls the model from
# harbor and ends its trial when the model marks the task complete twice (TASK_COMPLETE): the
# timeout is only a bound, long enough on a loaded machine. mini-swe-agent's run is one exec.
MULTIPLIER = {"terminus-2": "60", "mini-swe-agent": "1"}
# terminus-2's answer format (harbor 0.25.0, terminus_json_plain_parser.py: analysis, plan,
# commands), with the task marked complete: it asks once to confirm, then the trial ends.
TASK_COMPLETE = json.dumps({"analysis": "done", "plan": "none", "commands": [], "task_complete": True})


def run_file(agent: str) -> str:
    return f"""\
# Written by tests/test_no_secret_in_argv.py.
SERVER=qwen3.8-27b-fp8-sglang-h200
MODEL={MODEL}
JOB_NAME=argv-{agent}
AGENT={agent}
DATASET_PATH=dataset
TASKS='t-pass t-sandbox'
ENV_TYPE=scripted_env:ScriptedEnv
AGENT_TIMEOUT_MULTIPLIER={MULTIPLIER[agent]}
N_CONCURRENT=2
"""


def assert_the_agent_got_key_and_endpoint(tree: Tree, agent: str, base: str) -> None:
    """The key and endpoint reached the agent, from harbor's environment."""
    trials = [t for t in tree.trial_dirs() if (t / "result.json").exists()]
    assert len(trials) == 2
    for trial in trials:
        result = json.loads((trial / "result.json").read_text())
        if agent == "terminus-2":
            # terminus-2 called the fake model server, which answers only the token: tokens
            # counted means calls answered, a wrong or missing key would be a 401.
            assert result["agent_result"]["n_input_tokens"] > 0, trial
            assert result["agent_result"]["metadata"]["api_request_times_msec"], trial
        else:
            # harbor resolved the --ae templates from its environment into the sandbox command
            # (which, like the key beside it, lives in the sandbox, not in a local argv).
            assert f"model.model_kwargs.api_base={base}" in (trial / "trial.log").read_text(), trial


def scratch_home(tmp: Path) -> tuple[Path, Path]:
    """HOME with git-lfs initialised, and a bin dir with a git-lfs: doctor only looks for them."""
    home, bin_dir = tmp / "home", tmp / "bin"
    home.mkdir()
    bin_dir.mkdir()
    (home / ".gitconfig").write_text('[filter "lfs"]\n\tprocess = git-lfs filter-process\n')
    (bin_dir / "git-lfs").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "git-lfs").chmod(0o755)
    hf_home = tmp / "hf-home"
    hf_home.mkdir()
    # Without it the hf CLI fetches the agent-harness registry at start.
    (hf_home / ".agent_harnesses.json").write_text('{"standardEnvVars": [], "harnesses": {}}')
    return home, bin_dir


@pytest.mark.e2e
@pytest.mark.parametrize("agent", ["terminus-2", "mini-swe-agent"])
def test_bench_and_mopup_never_put_the_token_in_argv(tmp_path, monkeypatch, agent):
    token = new_token()
    # The fake model server answers 401 to any other key: the token must reach it, by env.
    monkeypatch.setenv("FAKE_OPENAI_EXPECT_TOKEN", token)
    server = FakeServer(tmp_path, MODEL, "--answer", TASK_COMPLETE)
    monkeypatch.delenv("FAKE_OPENAI_EXPECT_TOKEN")
    hf_api = FakeHFAPI(tmp_path)
    try:
        tree = Tree(tmp_path, PLAN, server)
        (tree.root / "runs" / "mopup-test.env").write_text(run_file(agent))
        home, bin_dir = scratch_home(tmp_path)
        settings = dict(
            HF_TOKEN=token, HOME=str(home), HF_HOME=str(tmp_path / "hf-home"), GIT_CONFIG_NOSYSTEM="1",
            HF_ENDPOINT=hf_api.endpoint, PATH=f"{bin_dir}:{REPO / '.venv/bin'}:{os.environ['PATH']}", PROBE="1")
        outputs = {}
        with ArgvWatcher(token) as watcher:
            roots = {}
            for phase, script in (("bench", "bench.sh"), ("mopup", "mopup.sh")):
                env = tree.env(phase, **settings)
                env.pop("HF_HUB_OFFLINE")  # doctor's whoami asks the fake HF API
                proc = subprocess.Popen([str(tree.root / "scripts" / script)], cwd=tree.root, env=env,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                roots[phase] = proc.pid
                out, err = proc.communicate(timeout=300)
                outputs[phase] = out + err
                assert proc.returncode == 0, outputs[phase]
    finally:
        hf_api.stop()
        server.stop()

    # It ran: doctor's whoami was accepted, the probe passed, and mop-up retried the infra error.
    assert "HF token accepted (whoami: alice)" in outputs["bench"]
    assert "re-ran 1 of 1 planned trials" in outputs["mopup"], outputs["mopup"]
    assert sorted((r["phase"], r["task"]) for r in tree.executed()) == [
        ("bench", "t-pass"), ("bench", "t-sandbox"), ("mopup", "t-sandbox")]
    assert_the_agent_got_key_and_endpoint(tree, agent, server.base)

    # The watcher watched: these processes of the run, among many more, were seen alive.
    ours = watcher.descendants(roots["bench"]) + watcher.descendants(roots["mopup"])
    print(f"\n  [{agent}] watcher: {watcher.scans} scans, {len(watcher.seen)} processes seen, "
          f"{len(ours)} of this run's: {sorted(kinds(ours))}")
    assert {"bench.sh", "doctor.sh", "hf auth whoami", "harbor run", "mopup.sh", "harbor job resume"} <= kinds(ours)
    assert len(ours) >= 15

    assert [" ".join(leak.argv) for leak in watcher.leaks] == []
    assert files_holding(tmp_path, token) == []
    for phase, text in outputs.items():
        assert not holds_secret(text.encode(), pieces(token)), f"{phase} printed the token"


# --- environments whose exec would put the key in a local argv: refused before harbor starts -------

# Custom environments given by import path, as a user's own module would be.
CUSTOM_ENVS = """\
from harbor.environments.base import BaseEnvironment
from harbor.environments.hf_sandbox import HFSandboxEnvironment
from harbor.environments.podman import PodmanEnvironment


class MyPodman(PodmanEnvironment):
    pass


class MySandbox(HFSandboxEnvironment):
    async def exec(self, command, cwd=None, env=None, timeout_sec=None, user=None):
        raise NotImplementedError  # a subclass may run anything here


class NewCloud(BaseEnvironment):
    pass
"""

DOCKER_REASON = "(a DockerEnvironment) runs 'docker compose ... exec -e KEY=value', so its key"
UNKNOWN_REASON = ("is not an environment known to keep its key (OPENAI_API_KEY=<token>) out of every local "
                  "process's argv (only ENV_TYPE=hf-sandbox is: tools/hub/environments.py says why)")


@pytest.mark.parametrize(("env_type", "reason"), [
    ("podman", DOCKER_REASON),
    ("kata", DOCKER_REASON),
    ("harbor.environments.docker.docker:DockerEnvironment", DOCKER_REASON),
    ("my_envs:MyPodman", DOCKER_REASON),
    ("ec2", "harbor.environments.ec2:EC2Environment (a EC2Environment) runs 'ssh ... docker compose exec -e KEY=value'"),
    ("openshift", "harbor.environments.openshift:OpenshiftEnvironment (a OpenshiftEnvironment) runs "
                  "'oc exec POD ... -- bash -c 'export KEY=value && ...''"),
    ("my_envs:NewCloud", f"my_envs:NewCloud {UNKNOWN_REASON}"),
    ("my_envs:MySandbox", "my_envs:MySandbox is a subclass of HFSandboxEnvironment, and a subclass can change how "
                          "exec runs"),
])
def test_mini_swe_agent_is_refused_where_its_key_could_reach_a_local_argv(tmp_path, env_type, reason):
    # harbor 0.25.0 (and 0.26.0) ran `docker compose ... exec -e OPENAI_API_KEY=<token>` for the docker family
    # while only ENV_TYPE=docker was refused (the watcher caught it); then ec2 (ssh) and
    # openshift (oc exec) passed a deny-list. The rule is now default-deny.
    token = new_token()
    (tmp_path / "my_envs.py").write_text(CUSTOM_ENVS)
    tree = Tree(tmp_path, PLAN, SimpleNamespace(base="http://127.0.0.1:9/v1"))  # never called
    (tree.root / "runs" / "mopup-test.env").write_text(run_file("mini-swe-agent").replace(
        "ENV_TYPE=scripted_env:ScriptedEnv", f"ENV_TYPE={env_type}"))
    env = tree.env("bench", HF_TOKEN=token, PYTHONPATH=str(tmp_path))
    with ArgvWatcher(token) as watcher:
        proc = subprocess.run([str(tree.root / "scripts" / "bench.sh")], cwd=tree.root, env=env,
                              capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert f"bench: run 'mopup-test': mini-swe-agent on ENV_TYPE={env_type} is refused: " in proc.stderr
    assert reason in proc.stderr
    assert proc.stderr.rstrip().endswith(
        ". Use ENV_TYPE=hf-sandbox, or AGENT=terminus-2 (it calls the model from harbor's own process)")
    assert not (tree.root / "jobs").exists() and tree.executed() == []  # harbor never started
    assert watcher.leaks == []


def test_every_environment_harbor_registers_is_classified():
    # Default-deny: hf-sandbox is the one harbor environment known to pass the key as data; every
    # other one harbor registers is refused with a reason naming its class, and the ones read
    # to put the environment in a local argv say what they run.
    from harbor.models.environment_type import EnvironmentType

    reasons = {t.value: environments.refusal(t.value) for t in EnvironmentType}
    assert len(reasons) == len(EnvironmentType) == 38
    assert [name for name, reason in reasons.items() if reason is None] == ["hf-sandbox"]
    local_argv = sorted(name for name, reason in reasons.items() if reason and "would sit in a local" in reason)
    assert local_argv == ["apple-container", "docker", "ec2", "kata", "openshift", "podman", "sbx"]
    assert reasons["ec2"] == (
        "harbor.environments.ec2:EC2Environment (a EC2Environment) runs 'ssh ... docker compose exec -e KEY=value', "
        "so its key (OPENAI_API_KEY=<token>) would sit in a local process's argv, readable by every local user (ps)")
    assert reasons["openshift"] == (
        "harbor.environments.openshift:OpenshiftEnvironment (a OpenshiftEnvironment) runs "
        "'oc exec POD ... -- bash -c 'export KEY=value && ...'', so its key (OPENAI_API_KEY=<token>) would sit in "
        "a local process's argv, readable by every local user (ps)")
    for name, reason in reasons.items():
        if name != "hf-sandbox" and name not in local_argv:
            assert reason.endswith(f" {UNKNOWN_REASON}") and reason.startswith("harbor.environments."), name
    # The four types harbor 0.26.0 added: never read here, so refused like every unknown class.
    assert {"snowflake", "boxd", "superserve", "aca-sandbox"} <= set(reasons) - {"hf-sandbox", *local_argv}


def test_a_new_class_is_refused_and_the_test_environment_is_allowed_only_as_itself(tmp_path, monkeypatch):
    from harbor.environments.base import BaseEnvironment
    from harbor.environments.hf_sandbox import HFSandboxEnvironment

    class Future(BaseEnvironment):  # an environment no one has read
        pass

    class QuietSandbox(HFSandboxEnvironment):  # overrides nothing, and is still not the class read
        pass

    assert environments.class_refusal(Future).endswith(f"Future {UNKNOWN_REASON}")
    assert "is a subclass of HFSandboxEnvironment" in environments.class_refusal(QuietSandbox)
    assert environments.class_refusal(HFSandboxEnvironment) is None
    assert environments.refusal("harbor.environments.hf_sandbox:HFSandboxEnvironment") is None

    # The repository's test environment is allowed as the class its file defines...
    monkeypatch.syspath_prepend(str(REPO / "tests" / "harbor_env"))
    assert environments.refusal("scripted_env:ScriptedEnv") is None
    from scripted_env import ScriptedEnv

    class Sub(ScriptedEnv):  # ...not as a subclass...
        pass

    assert environments.class_refusal(Sub).endswith(f"Sub {UNKNOWN_REASON}")
    # ...and not as a namesake elsewhere: a module of the same name and class is a user's own.
    (tmp_path / "lookalike").mkdir()
    shutil.copy(REPO / "tests" / "harbor_env" / "scripted_env.py", tmp_path / "lookalike" / "scripted_env_copy.py")
    monkeypatch.syspath_prepend(str(tmp_path / "lookalike"))
    assert environments.refusal("scripted_env_copy:ScriptedEnv") == f"scripted_env_copy:ScriptedEnv {UNKNOWN_REASON}"


def test_a_module_class_that_cannot_load_cannot_be_checked():
    result = CliRunner().invoke(environments.cli, ["key-refusal", "no_such_module:Env"])
    assert result.exit_code == 1
    assert result.output == ("Error: cannot load the environment class of ENV_TYPE=no_such_module:Env: "
                             "Failed to import module 'no_such_module': No module named 'no_such_module'\n")


def test_the_environments_refused_still_put_the_environment_in_their_argv():
    # What tools/hub/environments.py relies on, read in harbor 0.26.0's own code: if an upgrade moves
    # the environment out of argv, or a new environment puts it there, this says where to look.
    from harbor.environments import ec2, openshift
    from harbor.environments.apple_container import AppleContainerEnvironment
    from harbor.environments.docker.docker import DockerEnvironment
    from harbor.environments.sbx import local as sbx_local

    assert 'exec_command.extend(["-e", f"{key}={value}"])' in inspect.getsource(DockerEnvironment)
    assert 'args.extend(["--env", f"{key}={value}"])' in inspect.getsource(sbx_local)
    assert 'exec_cmd.extend(["-e", f"{key}={value}"])' in inspect.getsource(AppleContainerEnvironment)
    # EC2: docker compose exec -e KEY=value, sent as the command of a local ssh.
    assert 'parts.extend(["-e", f"{key}={value}"])' in inspect.getsource(ec2._EC2ComposeOps._exec_main_detached)
    assert "self._ssh_exec(" in inspect.getsource(ec2.EC2Environment._compose_exec)
    assert "*self._ssh_base_cmd(" in inspect.getsource(ec2.EC2Environment._ssh_raw)
    # OpenShift: export KEY=value inside the argv of a local oc exec.
    exec_source = inspect.getsource(openshift.OpenshiftEnvironment.exec)
    assert 'shell_parts.append(f"export {key}={shlex.quote(value)}")' in exec_source
    assert "self._run_oc_command(" in exec_source
    assert 'full_command = ["oc"] + command' in inspect.getsource(openshift.OpenshiftEnvironment._run_oc_command)


def test_the_environments_allowed_pass_the_environment_as_data():
    # hf-sandbox: exec hands env to huggingface_hub's Sandbox.run, which sends it in the JSON
    # body of a request; neither starts a local process.
    from harbor.environments import hf_sandbox
    from huggingface_hub import _sandbox

    exec_source = inspect.getsource(hf_sandbox.HFSandboxEnvironment.exec)
    assert "sandbox.run,\n" in exec_source and "env=env or None," in exec_source
    run_source = inspect.getsource(_sandbox.Sandbox.run)
    assert 'payload["env"] = env' in run_source and 'self._stream("POST", "/exec", json=payload)' in run_source
    for module in (hf_sandbox, _sandbox):
        assert not starts_processes(inspect.getsource(module)), module.__name__
    # The test environment starts no process at all: kept that way, it stays allowed.
    assert not starts_processes((REPO / "tests" / "harbor_env" / "scripted_env.py").read_text())


def starts_processes(source: str) -> list[str]:
    """What in SOURCE can start a process: an import of subprocess, pty or multiprocessing, or a call
    of asyncio's create_subprocess_*, os.system/popen/exec*/spawn*/fork*/posix_spawn*."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) else [])
            found += [n for n in names if n and n.split(".")[0] in ("subprocess", "pty", "multiprocessing")]
        if isinstance(node, ast.Attribute) and (
                node.attr.startswith(("create_subprocess", "exec", "spawn", "fork", "posix_spawn"))
                or node.attr in ("system", "popen")) and isinstance(node.value, ast.Name) \
                and node.value.id in ("os", "asyncio"):
            found.append(f"{node.value.id}.{node.attr}")
    return found


def test_starts_processes_sees_a_process_start():
    assert starts_processes("import subprocess\n") == ["subprocess"]
    assert starts_processes("import asyncio\nasyncio.create_subprocess_exec('ssh')\n") == [
        "asyncio.create_subprocess_exec"]
    assert starts_processes("import os\nos.execvp('oc', [])\nos.kill(1, 9)\n") == ["os.execvp"]


# --- make serve, its watchdog and the heartbeat; the watchdog's check as HF runs it -----------------


@pytest.mark.e2e
def test_serve_its_watchdog_the_heartbeat_and_the_check_never_put_the_token_in_argv(tmp_path):
    from tests.test_watchdog import Fakes, play_the_scheduler, vllm_metrics

    token = new_token()
    fakes = Fakes(tmp_path)
    try:
        fakes.metrics.write_text(vllm_metrics(0, 3))
        fakes.jobs_api({"new_job": {"id": "srv1", "expose_url": fakes.model_url}, "new_scheduled_jobs": ["wd1"]})
        home, bin_dir = scratch_home(tmp_path)
        env = {k: v for k, v in os.environ.items() if k not in ("RUN", "DRY_RUN", "CLI_SETTINGS", "HF_NAMESPACE")}
        env.update(RUN="qwen-t2", HF_TOKEN=token, HF_ENDPOINT=fakes.url, HOME=str(home), HF_HOME=str(tmp_path / "hf-home"),
                   HF_HUB_DISABLE_UPDATE_CHECK="1", STATE_ROOT=str(tmp_path / "state"), READY_POLL="1",
                   HEARTBEAT_EVERY="1s", WATCHDOG_GRACE="2s")
        log = tmp_path / "state" / "qwen-t2" / "heartbeat.log"
        with ArgvWatcher(token) as watcher:
            serve = subprocess.run([str(REPO / "scripts/serve.sh")], cwd=REPO, env=env, capture_output=True, text=True,
                                   timeout=300)
            deadline = time.monotonic() + 120  # a bound: the heartbeat stops once serve lets go of the run
            while "heartbeat stopped" not in (log.read_text() if log.exists() else ""):
                assert time.monotonic() < deadline, "the heartbeat did not stop"
                time.sleep(0.1)
            spec = next(r["body"]["jobSpec"] for r in fakes.requests()
                        if (r["method"], r["path"]) == ("POST", "/api/scheduled-jobs/alice"))
            check, _, _ = play_the_scheduler(spec, endpoint=fakes.url, token=token, tmp=tmp_path)
    finally:
        fakes.stop()
    assert serve.returncode == 0, serve.stderr
    assert check.returncode == 0, check.stdout + check.stderr
    seen = [" ".join(s.argv) for s in watcher.seen.values()]
    print(f"\n  [serve + watchdog] watcher: {watcher.scans} scans, {len(watcher.seen)} processes seen")
    # It watched the install, a heartbeat and the check, among the rest.
    assert any(" jobs scheduled run " in line for line in seen)
    assert any("tools.run.watchdog beat" in line for line in seen)
    assert any("tools.run.watchdog check" in line for line in seen)
    assert [" ".join(leak.argv) for leak in watcher.leaks] == []
    assert files_holding(tmp_path, token) == []
    for text in (serve.stdout, serve.stderr, check.stdout, check.stderr):
        assert not holds_secret(text.encode(), pieces(token))
