"""`make mopup` end to end with the real harbor 0.25.0 (issue 5).

Every scenario runs real `harbor run` / `harbor job resume` processes against a local
dataset (tests/datasets/mopup) and tests/harbor_env/scripted_env.py, which plays the
sandbox and logs every trial it starts. So "which tasks did mop-up execute" is read from
that log, not inferred from our own code.

The repository is used through a scratch tree: symlinks to the real scripts/, tools/,
env/, tests/ and .venv, plus a runs/ dir holding this test's run file (lib.sh reads runs/
from its own repository root) and a fresh state/ and jobs/. A loopback fake OpenAI server
(tests/fakes/fake_openai.py) answers /v1/models, which mop-up checks before anything else.

The wasted-work figure, scored trials that mop-up re-executed, is printed for every
scenario and must be 0.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.fixtures import hostile
from tests.fixtures import scratch
from tests.fixtures.harbor_jobs import TrialSpec, make_dataset, write_job
from tools.mopup import mopup
from tools.mopup import mopup_archive
from tools.mopup import mopup_harbor
from tools.mopup import mopup_plan

REPO = Path(__file__).resolve().parents[1]
# The server profile's own model: a run serves the model its profile declares (tools/settings_rules.py).
MODEL = "Qwen/Qwen3.8-27B-FP8"
JOB = "mopup-e2e"

# What each task of tests/datasets/mopup does, attempt by attempt (ScriptedEnv plan).
DEFAULT_PLAN = {
    "t-pass": ["pass"],
    "t-fail": ["fail"],
    "t-timeout": ["AgentTimeoutError"],          # genuine: the model's result, never retried
    "t-context": ["ContextWindowExceededError"],  # genuine: a model limit, never retried
    "t-readtimeout": ["ReadTimeout", "pass"],
    "t-sandbox": ["SandboxError", "pass"],
    "t-cancel": ["CancelledError", "pass"],
    "t-apt": ["apt-mirror", "pass"],             # infra by its message (reward 0 on attempt 1)
    "t-hang": ["pass"],
}
SCORED = {"t-pass", "t-fail", "t-timeout", "t-context", "t-hang"}
INFRA = {"t-readtimeout", "t-sandbox", "t-cancel", "t-apt"}
ALL_TASKS = SCORED | INFRA

RUN_FILE = f"""\
# Written by tests/test_mopup.py: the mop-up test run (no server; a fake endpoint).
SERVER=qwen3.8-27b-fp8-sglang-h200
MODEL={MODEL}
JOB_NAME={JOB}
AGENT=oracle
DATASET_PATH=dataset
ENV_TYPE=scripted_env:ScriptedEnv
AGENT_TIMEOUT_MULTIPLIER=1
N_CONCURRENT=3
"""


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class FakeServer:
    """tests/fakes/fake_openai.py on a free loopback port, serving one model id. It lives 600 s at
    most: a bench and a mop-up each bounded by 300 s can both need it, on a loaded machine."""

    def __init__(self, tmp: Path, model: str, *options: str):
        port_file = tmp / f"port-{model.replace('/', '_')}-{time.monotonic_ns()}"
        self.proc = subprocess.Popen(
            [sys.executable, str(REPO / "tests/fakes/fake_openai.py"), "--port-file", str(port_file),
             "--model", model, "--max-lifetime", "600", *options],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while not (port_file.exists() and port_file.read_text().strip()):
            assert time.monotonic() < deadline, "fake OpenAI server did not start"
            time.sleep(0.05)
        self.base = f"http://127.0.0.1:{port_file.read_text().strip()}/v1"

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)


class Tree:
    """A scratch checkout: the real code by symlink, its own runs/, state/, jobs/."""

    def __init__(self, tmp: Path, plan: dict, server: FakeServer):
        self.root = scratch.checkout(tmp / "repo")
        (self.root / "runs" / "mopup-test.env").write_text(RUN_FILE)
        self.plan_file = tmp / "plan.json"
        self.plan_file.write_text(json.dumps(plan))
        self.log = tmp / "executed.jsonl"
        self.server = server
        self.job_dir = self.root / "jobs" / JOB
        self.state = self.root / "state" / "mopup-test"

    def env(self, phase: str, **settings: str) -> dict:
        env = {k: v for k, v in os.environ.items() if k not in ("RUN", "JOB_NAME", "DRY_RUN", "MOPUP_MODE")}
        env.update(
            RUN="mopup-test", API_BASE=self.server.base, HF_TOKEN="hf_fake_token_for_tests",
            LITELLM_LOCAL_MODEL_COST_MAP="True", HF_HUB_OFFLINE="1",
            PYTHONPATH=str(REPO / "tests" / "harbor_env"),
            SCRIPTED_ENV_PLAN=str(self.plan_file), SCRIPTED_ENV_LOG=str(self.log), SCRIPTED_ENV_PHASE=phase)
        env.pop("STATE_ROOT", None)
        env.update(settings)
        return env

    def bench_cmd(self) -> list[str]:
        # bench.sh's own argv builder (scripts/argv.sh), run the way bench runs it. Not
        # bench.sh itself: its doctor step needs git-lfs and a real HF token.
        script = ('source scripts/lib.sh; source scripts/argv.sh; resolve_run; load_settings; '
                  'refuse_key_in_argv; cd "$REPO_ROOT"; bench_argv argv; '
                  'OPENAI_API_KEY=$HF_TOKEN OPENAI_BASE_URL=$API_BASE exec "${argv[@]}"')
        return ["bash", "-c", script]

    def bench(self, **settings) -> subprocess.CompletedProcess:
        proc = subprocess.run(self.bench_cmd(), cwd=self.root, env=self.env("bench", **settings),
                              capture_output=True, text=True, timeout=300)
        assert (self.job_dir / "config.json").exists(), proc.stdout + proc.stderr
        return proc

    def mopup(self, *args: str, script: str = "mopup.sh", **settings) -> subprocess.CompletedProcess:
        """scripts/mopup.sh, or another of mop-up's verbs (mopup-archive.sh, mopup-restore.sh)."""
        return subprocess.run([str(self.root / "scripts" / script), *args], cwd=self.root,
                              env=self.env("mopup", **settings), capture_output=True, text=True, timeout=300)

    def executed(self, phase: str | None = None) -> list[dict]:
        if not self.log.exists():
            return []
        rows = [json.loads(line) for line in self.log.read_text().splitlines() if line]
        return [r for r in rows if phase is None or r["phase"] == phase]

    def job_dirs(self) -> list[Path]:
        return sorted(p for p in (self.root / "jobs").iterdir() if p.is_dir())

    def trial_dirs(self) -> set[Path]:
        return {t for j in self.job_dirs() for t in j.iterdir() if t.is_dir()}

    def results(self) -> dict[Path, dict]:
        return {t: json.loads((t / "result.json").read_text()) for t in self.trial_dirs() if (t / "result.json").exists()}

    def scored_hashes(self) -> dict[Path, str]:
        """sha256 of the result.json of every trial of a task whose outcome is settled."""
        return {t: sha256(t / "result.json") for t, r in self.results().items() if r["task_name"] in SCORED}

    def tally(self) -> dict:
        proc = subprocess.run([str(REPO / ".venv/bin/python"), "-m", "tools.tally", "tally",
                               "--jobs-dir", str(self.root / "jobs"), "--job-name", JOB, "--json"],
                              capture_output=True, text=True, check=True)
        return json.loads(proc.stdout)

    def manifest(self) -> list[dict]:
        path = self.state / "manifest.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def archived(self) -> set[str]:
        return {r["src"] for r in self.manifest() if r.get("event") == "archive" and r.get("state") == "moved"}


@pytest.fixture
def server(tmp_path):
    s = FakeServer(tmp_path, MODEL)
    yield s
    s.stop()


@pytest.fixture
def report_line(request, capsys):
    """Print past pytest's capture: the wasted-work figure belongs in every test run's output."""
    def write(text: str) -> None:
        with capsys.disabled():
            print(f"\n  [{request.node.name}] {text}", end="")
    return write


def wasted_work(executed: list[dict], scored_before: set[str], report_line) -> int:
    """Scored trials re-executed by mop-up: trials mop-up started for an already-scored task."""
    wasted = [r for r in executed if r["task"] in scored_before]
    report_line(f"wasted work: {len(wasted)} scored trial(s) re-executed by mop-up "
                f"(of {len(executed)} it ran)")
    return len(wasted)


def assert_mopup_kept_everything(tree: Tree, before_dirs: set[Path], hashes: dict[Path, str]) -> None:
    # Every scored result.json is where it was, byte for byte.
    for path, digest in hashes.items():
        assert (path / "result.json").exists(), f"{path} left its job"
        assert sha256(path / "result.json") == digest, f"{path}/result.json changed"
    # Every dir that left a job is in the archive, and the manifest says so.
    gone = {str(p) for p in before_dirs - tree.trial_dirs()}
    assert gone == tree.archived()
    for record in tree.manifest():
        if record.get("event") == "archive" and record.get("state") == "moved":
            assert Path(record["dest"]).is_dir()
            assert str(tree.state / "archive") in record["dest"]


def settled_tasks(tree: Tree) -> set[str]:
    """Tasks with a finished trial that is scored by design (the plan's SCORED tasks)."""
    return {r["task_name"] for r in tree.results().values() if r["task_name"] in SCORED}


# --- scenarios -------------------------------------------------------------------------------


@pytest.mark.e2e
def test_mopup_retries_exactly_the_infra_tasks_then_does_nothing(tmp_path, server, report_line):
    tree = Tree(tmp_path, DEFAULT_PLAN, server)
    tree.bench()
    assert {r["task"] for r in tree.executed("bench")} == ALL_TASKS
    before_dirs, hashes = tree.trial_dirs(), tree.scored_hashes()
    first = tree.tally()
    assert (first["passed"], first["failed"], first["errored"]) == (2, 3, 4)

    proc = tree.mopup()
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "mechanism: resume the job in place" in out
    assert "re-ran 4 of 4 planned trials" in out
    assert sorted(r["task"] for r in tree.executed("mopup")) == sorted(INFRA)
    assert wasted_work(tree.executed("mopup"), SCORED, report_line) == 0
    assert_mopup_kept_everything(tree, before_dirs, hashes)
    assert {Path(s).name.split("__")[0] for s in tree.archived()} == INFRA
    final = tree.tally()
    assert (final["passed"], final["failed"], final["errored"], final["unfinished"]) == (6, 3, 0, 0)
    assert {t["task"] for t in final["per_task"] if t["outcome"] == "failed"} == {"t-fail", "t-timeout", "t-context"}
    assert [p.name for p in tree.job_dirs()] == [JOB]

    # A second mop-up: nothing to do, nothing runs, nothing moves.
    snapshot = {t: sha256(t / "result.json") for t in tree.results()}
    again = tree.mopup()
    assert again.returncode == 0, again.stderr
    assert "nothing to retry" in again.stderr
    assert "re-ran 0 of 0 planned trials" in again.stderr
    assert len(tree.executed("mopup")) == 4
    assert {t: sha256(t / "result.json") for t in tree.results()} == snapshot


@pytest.mark.e2e
def test_archive_lists_and_restores(tmp_path, server):
    tree = Tree(tmp_path, DEFAULT_PLAN, server)
    tree.bench()
    assert tree.mopup().returncode == 0
    listing = tree.mopup(script="mopup-archive.sh")
    assert listing.returncode == 0, listing.stderr
    lines = listing.stdout.strip().splitlines()
    assert len(lines) == 4 and all(line.startswith("archived") for line in lines)
    one = Path(sorted(tree.archived())[0])

    proc = tree.mopup(script="mopup-restore.sh", TRIALS=one.name)
    assert proc.returncode == 0, proc.stderr
    assert (one / "result.json").exists()
    assert "restored" in tree.mopup(script="mopup-archive.sh").stdout
    # The restored attempt is older: the tally still takes the retry's pass.
    assert tree.tally()["passed"] == 6
    bad = tree.mopup(script="mopup-restore.sh", TRIALS="no-such-trial__abc")
    assert bad.returncode == 1 and "not in the archive" in bad.stderr


@pytest.mark.e2e
def test_dry_run_prints_the_plan_and_changes_nothing(tmp_path, server):
    tree = Tree(tmp_path, DEFAULT_PLAN, server)
    tree.bench()
    before = {t: sha256(t / "result.json") for t in tree.results()}
    proc = tree.mopup(DRY_RUN="1")
    out = proc.stderr
    assert proc.returncode == 0, out
    for task in INFRA:
        assert task in out
    for task in SCORED:
        assert f"  {task} " not in out
    assert "harbor job resume -p" in out and "--filter-error-type mopup-archived-first-matches-nothing" in out
    assert "new trials land in" in out and "dry run: nothing moved, nothing run" in out
    assert {t: sha256(t / "result.json") for t in tree.results()} == before
    assert tree.executed("mopup") == [] and not tree.state.exists()


@pytest.mark.e2e
def test_new_endpoint_same_model_resumes_without_edits(tmp_path, server, report_line):
    tree = Tree(tmp_path, DEFAULT_PLAN, server)
    tree.bench()
    hashes, before_dirs = tree.scored_hashes(), tree.trial_dirs()
    server.stop()  # the model server died; a relaunch answers elsewhere
    relaunched = FakeServer(tmp_path, MODEL)
    try:
        tree.server = relaunched
        proc = tree.mopup()
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "mechanism: resume the job in place" in proc.stderr
    finally:
        relaunched.stop()
    assert sorted(r["task"] for r in tree.executed("mopup")) == sorted(INFRA)
    assert wasted_work(tree.executed("mopup"), SCORED, report_line) == 0
    assert_mopup_kept_everything(tree, before_dirs, hashes)
    assert relaunched.base not in (tree.job_dir / "config.json").read_text()


@pytest.mark.e2e
def test_endpoint_serving_another_model_is_refused(tmp_path, server):
    tree = Tree(tmp_path, DEFAULT_PLAN, server)
    tree.bench()
    before = {t: sha256(t / "result.json") for t in tree.results()}
    other = FakeServer(tmp_path, "someone/else-7b")
    try:
        tree.server = other
        proc = tree.mopup()
    finally:
        other.stop()
    assert proc.returncode == 1
    assert f"serves 'someone/else-7b', not '{MODEL}'" in proc.stderr
    assert "refusing to mop up" in proc.stderr
    assert tree.executed("mopup") == [] and tree.manifest() == []
    assert {t: sha256(t / "result.json") for t in tree.results()} == before


@pytest.mark.e2e
def test_concurrency_change_patches_config_and_lock_together(tmp_path, server, report_line):
    tree = Tree(tmp_path, DEFAULT_PLAN, server)
    tree.bench()
    hashes, before_dirs = tree.scored_hashes(), tree.trial_dirs()
    old_config = (tree.job_dir / "config.json").read_bytes()
    old_lock = (tree.job_dir / "lock.json").read_bytes()
    proc = tree.mopup(N_CONCURRENT="1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "n_concurrent_trials 3 -> 1 in config.json and lock.json" in proc.stderr
    assert json.loads((tree.job_dir / "config.json").read_text())["n_concurrent_trials"] == 1
    assert json.loads((tree.job_dir / "lock.json").read_text())["n_concurrent_trials"] == 1
    backups = list((tree.state / "archive").glob(f"*/{JOB}.job-files"))
    assert len(backups) == 1
    assert (backups[0] / "config.json").read_bytes() == old_config
    assert (backups[0] / "lock.json").read_bytes() == old_lock
    assert sorted(r["task"] for r in tree.executed("mopup")) == sorted(INFRA)
    assert wasted_work(tree.executed("mopup"), SCORED, report_line) == 0
    assert_mopup_kept_everything(tree, before_dirs, hashes)


@pytest.mark.e2e
def test_changed_setting_runs_a_standalone_retry_job(tmp_path, server, report_line):
    tree = Tree(tmp_path, DEFAULT_PLAN, server)
    tree.bench()
    hashes, before_dirs = tree.scored_hashes(), tree.trial_dirs()

    forced = tree.mopup(MOPUP_MODE="resume", AGENT_TIMEOUT_MULTIPLIER="2")
    assert forced.returncode == 1
    assert "agent_timeout_multiplier: 1.0 -> 2.0" in forced.stderr
    assert tree.executed("mopup") == [] and tree.manifest() == []

    proc = tree.mopup(AGENT_TIMEOUT_MULTIPLIER="2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "mechanism: a standalone retry job" in proc.stderr
    retry = tree.root / "jobs" / f"{JOB}-retry-1"
    assert sorted(r["task"] for r in tree.executed("mopup")) == sorted(INFRA)
    assert {r["job"] for r in tree.executed("mopup")} == {retry.name}
    assert wasted_work(tree.executed("mopup"), SCORED, report_line) == 0
    assert before_dirs <= tree.trial_dirs() and tree.archived() == set()
    assert_mopup_kept_everything(tree, before_dirs, hashes)
    assert json.loads((retry / "config.json").read_text())["agent_timeout_multiplier"] == 2.0
    final = tree.tally()
    assert (final["passed"], final["failed"], final["errored"]) == (6, 3, 0)

    # Back to the original settings: the retry job settled everything, so nothing to do
    # (a resume of the first job would re-run its four errored tasks: it must not happen).
    again = tree.mopup()
    assert again.returncode == 0 and "nothing to retry" in again.stderr, again.stderr
    assert len(tree.executed("mopup")) == 4


@pytest.mark.e2e
def test_crash_mid_run_retries_unfinished_and_never_started(tmp_path, server, report_line):
    plan = dict(DEFAULT_PLAN, **{"t-hang": ["hang", "pass"]})
    tree = Tree(tmp_path, plan, server)
    # One trial at a time, in harbor's (alphabetical) order: t-hang hangs with the tasks
    # after it not yet started, and harbor is killed there, as a dying machine would be.
    proc = subprocess.Popen(tree.bench_cmd(), cwd=tree.root, env=tree.env("bench", N_CONCURRENT="1"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while not any(r["task"] == "t-hang" for r in tree.executed("bench")):
        assert proc.poll() is None and time.monotonic() < deadline, "harbor never reached t-hang"
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()

    crashed = {t for t in tree.trial_dirs() if not (t / "result.json").exists()}
    assert [t.name.split("__")[0] for t in crashed] == ["t-hang"]
    never_started = ALL_TASKS - {r["task"] for r in tree.executed("bench")}
    assert never_started  # e.g. t-pass, t-timeout: mop-up must find them although no dir names them
    settled = settled_tasks(tree)
    expected = ALL_TASKS - settled  # infra, crashed and never-started tasks
    hashes, before_dirs = tree.scored_hashes(), tree.trial_dirs()

    out = tree.mopup(N_CONCURRENT="2")
    assert out.returncode == 0, out.stdout + out.stderr
    for task in never_started:
        assert any(task in line and "never started" in line for line in out.stderr.splitlines()), task
    assert sorted(r["task"] for r in tree.executed("mopup")) == sorted(expected)
    assert wasted_work(tree.executed("mopup"), settled, report_line) == 0
    assert_mopup_kept_everything(tree, before_dirs, hashes)
    assert {str(c) for c in crashed} <= tree.archived()
    # Infra tasks that never started met their scripted infra error only now: errored again.
    again_infra = never_started & INFRA
    after = tree.tally()
    assert {t["task"] for t in after["per_task"] if t["outcome"] == "errored"} == again_infra
    assert after["unfinished"] == 0

    # Run it again, as the user would until it is clean: exactly those, nothing else.
    n_before = len(tree.executed("mopup"))
    hashes2, before_dirs2, settled2 = tree.scored_hashes(), tree.trial_dirs(), settled_tasks(tree)
    second = tree.mopup(N_CONCURRENT="2")
    assert second.returncode == 0, second.stdout + second.stderr
    assert sorted(r["task"] for r in tree.executed("mopup")[n_before:]) == sorted(again_infra)
    assert wasted_work(tree.executed("mopup")[n_before:], settled2, report_line) == 0
    assert_mopup_kept_everything(tree, before_dirs | before_dirs2, {**hashes, **hashes2})
    final = tree.tally()
    assert (final["passed"], final["failed"], final["errored"], final["unfinished"]) == (6, 3, 0, 0)


@pytest.mark.e2e
def test_interrupted_mopup_can_be_run_again(tmp_path, server, report_line):
    # The first mop-up dies while harbor is re-running t-readtimeout (its attempt 2 hangs).
    plan = dict(DEFAULT_PLAN, **{"t-readtimeout": ["ReadTimeout", "hang", "pass"]})
    tree = Tree(tmp_path, plan, server)
    tree.bench()
    hashes, before_dirs = tree.scored_hashes(), tree.trial_dirs()
    proc = subprocess.Popen([str(tree.root / "scripts" / "mopup.sh")], cwd=tree.root, env=tree.env("mopup"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while not any(r["task"] == "t-readtimeout" for r in tree.executed("mopup")):
        assert proc.poll() is None and time.monotonic() < deadline, "mop-up never reached t-readtimeout"
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert any(t.name.startswith("t-readtimeout__") and not (t / "result.json").exists() for t in tree.trial_dirs())

    outcomes = {t["task"]: t["outcome"] for t in tree.tally()["per_task"]}
    expected = {t for t in ALL_TASKS if outcomes.get(t, "unfinished") in ("errored", "unfinished")}
    assert "t-readtimeout" in expected and not expected & SCORED
    n_before, settled = len(tree.executed("mopup")), settled_tasks(tree)
    hashes2, before_dirs2 = tree.scored_hashes(), tree.trial_dirs()

    again = tree.mopup()
    assert again.returncode == 0, again.stdout + again.stderr
    ran = tree.executed("mopup")[n_before:]
    assert sorted(r["task"] for r in ran) == sorted(expected)
    assert wasted_work(ran, settled, report_line) == 0
    assert_mopup_kept_everything(tree, before_dirs | before_dirs2, {**hashes, **hashes2})
    assert len({r["batch"] for r in tree.manifest() if r.get("event") == "archive"}) == 2
    final = tree.tally()
    assert (final["passed"], final["failed"], final["errored"], final["unfinished"]) == (6, 3, 0, 0)


# --- tools/mopup/mopup.py, function by function ------------------------------------------------------

BASE_CONFIG = {
    "job_name": "j", "jobs_dir": "jobs", "n_concurrent_trials": 3, "agent_timeout_multiplier": 4.0,
    "environment": {"type": "hf-sandbox", "kwargs": {"flavor": "cpu-upgrade"}},
    "agents": [{"name": "terminus-2", "model_name": "openai/Qwen/Qwen3.8-27B-FP8", "kwargs": {"reasoning_effort": "low"}}],
    "datasets": [{"repo": "https://huggingface.co/datasets/harborframework/terminal-bench-2.1"}],
}


def variant(**changes) -> dict:
    config = json.loads(json.dumps(BASE_CONFIG))
    for dotted, value in changes.items():
        target, *path = dotted.split("__")
        node = config
        keys = [target, *path]
        for key in keys[:-1]:
            node = node[int(key)] if isinstance(node, list) else node[key]
        node[keys[-1]] = value
    return config


def test_config_differences_ignore_location_and_concurrency_only():
    assert mopup_harbor.config_differences(BASE_CONFIG, variant(job_name="other", jobs_dir="/x", n_concurrent_trials=1)) == []
    assert mopup_harbor.config_differences(BASE_CONFIG, variant(agent_timeout_multiplier=2.0)) == [
        "agent_timeout_multiplier: 4.0 -> 2.0"]
    frozen_endpoint = variant()
    frozen_endpoint["agents"][0]["kwargs"]["api_base"] = "https://old--30000.hf.jobs/v1"
    assert mopup_harbor.config_differences(frozen_endpoint, BASE_CONFIG) == [
        'agents[0].kwargs.api_base: "https://old--30000.hf.jobs/v1" -> null']
    assert mopup_harbor.config_differences(BASE_CONFIG, variant(environment__kwargs__flavor="cpu-basic")) == [
        'environment.kwargs.flavor: "cpu-upgrade" -> "cpu-basic"']


def test_redacted_secrets_block_a_resume():
    config = variant()
    config["agents"][0]["env"] = {"OPENAI_API_KEY": "sk-l****def", "OPENAI_BASE_URL": "${OPENAI_BASE_URL}"}
    assert mopup_harbor.redacted_secrets(config) == ["terminus-2: OPENAI_API_KEY"]
    config["agents"][0]["env"]["OPENAI_API_KEY"] = "${OPENAI_API_KEY}"
    assert mopup_harbor.redacted_secrets(config) == []


def plan_of(jobs: Path, job_name: str = "fx") -> dict:
    """mop-up's plan (MOPUP_MODE=auto) of a run written with harbor's models, its settings unchanged."""
    current = json.loads((jobs / job_name / "config.json").read_text())
    return mopup_plan.build_plan(jobs, job_name, "auto", 3, current, job_name)


def test_a_resume_that_would_re_run_a_task_another_job_settled_is_not_chosen(tmp_path):
    # x never started in the first job (harbor was stopped first) and a retry job passed it: the
    # first job's resume would run x again, a scored trial wasted; a retry job runs b alone.
    jobs = tmp_path / "jobs"
    make_dataset(tmp_path / "dataset", ["x"])
    write_job(jobs, "fx", [TrialSpec("a", 1.0), TrialSpec("b", None, "SandboxError", "Sandbox API error (503)")],
              lock=True)
    write_job(jobs, "fx-retry-1", [TrialSpec("x", 1.0)], scoped=True)
    plan = plan_of(jobs)
    assert [(t["task"], t["missing"]) for t in plan["tasks"]] == [("b", 1)]
    assert plan["why_not_resume"] == ["a resume would also re-run x, already settled by another job of the run"]
    assert plan["mode"] == "retry-job" and plan["archive"] == [] and plan["resume_argv"] is None


def test_a_resume_that_would_not_re_run_a_task_of_another_job_is_not_chosen(tmp_path):
    # c's only trial is an infra error in a job other than the one a resume would run (the first
    # job was scoped to a and b): resuming it would leave c as it is.
    jobs = tmp_path / "jobs"
    make_dataset(tmp_path / "dataset", ["c"])
    write_job(jobs, "fx", [TrialSpec("a", 1.0), TrialSpec("b", None, "SandboxError", "Sandbox API error (503)")],
              scoped=True, lock=True)
    write_job(jobs, "fx-retry-1", [TrialSpec("c", None, "SandboxError", "Sandbox API error (503)")], scoped=True)
    plan = plan_of(jobs)
    assert [(t["task"], t["missing"]) for t in plan["tasks"]] == [("b", 1), ("c", 1)]
    assert plan["why_not_resume"] == [
        "a resume would not re-run c (their trials are in another job of the run)"]
    assert plan["mode"] == "retry-job" and plan["archive"] == [] and plan["resume_argv"] is None


def test_with_every_task_in_its_job_a_resume_is_chosen(tmp_path):
    # The same first job, with nothing elsewhere: resuming it runs exactly b (the two tests above
    # are refused for their other job alone).
    jobs = tmp_path / "jobs"
    job = write_job(jobs, "fx", [TrialSpec("a", 1.0), TrialSpec("b", None, "SandboxError", "Sandbox API error (503)")],
                    lock=True)
    plan = plan_of(jobs)
    assert (plan["mode"], plan["why_not_resume"]) == ("resume", [])
    assert [a["src"] for a in plan["archive"]] == [str(next(job.glob("b__*")))]


def test_patch_concurrency_both_files_with_backups_and_finishes_a_half_done_patch(tmp_path):
    job, state = tmp_path / "jobs" / "j", tmp_path / "state"
    job.mkdir(parents=True)
    (job / "config.json").write_text(json.dumps(BASE_CONFIG, indent=4))
    (job / "lock.json").write_text(json.dumps({"schema_version": 3, "n_concurrent_trials": 3, "trials": []}))
    originals = {n: (job / n).read_bytes() for n in ("config.json", "lock.json")}
    assert mopup_archive.patch_concurrency(job, 1, tmp_path / "bk", state) == ["config.json", "lock.json"]
    assert {n: json.loads((job / n).read_text())["n_concurrent_trials"] for n in originals} == {"config.json": 1, "lock.json": 1}
    assert {n: (tmp_path / "bk" / n).read_bytes() for n in originals} == originals
    assert mopup_archive.patch_concurrency(job, 1, tmp_path / "bk2", state) == []  # idempotent
    # A crash between the two replacements leaves lock.json behind: the next run finishes it.
    (job / "lock.json").write_text(originals["lock.json"].decode())
    assert mopup_archive.patch_concurrency(job, 1, tmp_path / "bk3", state) == ["lock.json"]
    assert not list(job.glob("*.mopup-tmp"))


def test_archive_is_idempotent_listable_and_restorable(tmp_path):
    job, state = tmp_path / "jobs" / "j", tmp_path / "state" / "r"
    trial = job / "t-x__abc1234"
    (trial / "agent").mkdir(parents=True)
    (trial / "agent" / "trajectory.json").write_text("{}")
    plan = {"batch": "B1", "archive": [{"src": str(trial), "job": "j", "task": "t-x", "finished": False}]}
    assert mopup_archive.archive_trials(plan, state) == 1
    dest = state / "archive" / "B1" / "j" / trial.name
    assert not trial.exists() and (dest / "agent" / "trajectory.json").read_text() == "{}"
    assert mopup_archive.archive_trials(plan, state) == 0  # a rerun of the same plan skips what is done
    runner = CliRunner()
    listing = runner.invoke(mopup.cli, ["archive", "--state-dir", str(state)])
    assert listing.exit_code == 0 and listing.output.startswith("archived ") and "task=t-x" in listing.output
    # Restoring never overwrites: a dir of that name back in the job blocks it.
    trial.mkdir()
    blocked = runner.invoke(mopup.cli, ["restore", "--state-dir", str(state), trial.name])
    assert blocked.exit_code == 1 and "already exists" in blocked.output and dest.exists()
    trial.rmdir()
    done = runner.invoke(mopup.cli, ["restore", "--state-dir", str(state), "all"])
    assert done.exit_code == 0 and (trial / "agent" / "trajectory.json").exists() and not dest.exists()
    assert runner.invoke(mopup.cli, ["archive", "--state-dir", str(state)]).output.startswith("restored ")
    events = [(r["event"], r["state"]) for r in mopup_archive.read_manifest(state)]
    assert events == [("archive", "moving"), ("archive", "moved"), ("restore", "moving"), ("restore", "moved")]


def test_report_fails_when_harbor_ran_an_unplanned_trial(tmp_path):
    jobs = tmp_path / "jobs"
    for name in ("t-a__1111111", "t-b__2222222"):
        (jobs / "j" / name).mkdir(parents=True)
        (jobs / "j" / name / "result.json").write_text(json.dumps({"task_name": name.split("__")[0]}))
    plan = {"jobs_dir": str(jobs), "job_name": "j", "tasks": [{"task": "t-a"}], "trial_dirs_before": []}
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    result = CliRunner().invoke(mopup.cli, ["report", "--plan", str(tmp_path / "plan.json")])
    assert "re-ran 1 of 1 planned trials" in result.output
    assert result.exit_code == 1 and "did not plan" in result.output and "t-b__2222222" in result.output



@pytest.mark.parametrize("kind", hostile.KINDS)
def test_a_current_config_or_plan_that_is_no_regular_file_or_too_big_is_refused_never_read(tmp_path, kind):
    state = tmp_path / "state"
    config = tmp_path / "current-config.json"
    reason = hostile.make(config, kind, 64 * hostile.MiB, "a job config")
    out = tmp_path / "plan.json"
    result = CliRunner().invoke(mopup.cli, ["plan", "--jobs-dir", str(tmp_path / "jobs"), "--job-name", "j", "--run", "r",
                                            "--state-dir", str(state), "--n-concurrent", "1", "--current-config",
                                            str(config), "--out", str(out)])
    assert result.exit_code == 1
    assert result.output == (f"Error: {config} holds no JSON job config ({reason}): `harbor run … --print-config` "
                             "printed none (check the run's settings with make print RUN=…)\n")
    plan = tmp_path / "mopup-plan.json"
    reason = hostile.make(plan, kind, 64 * hostile.MiB, "a mop-up plan")
    for argv in (["prepare", "--plan", str(plan), "--state-dir", str(state)], ["report", "--plan", str(plan)]):
        result = CliRunner().invoke(mopup.cli, argv)
        assert result.exit_code == 1
        assert result.output == (f"Error: the mop-up plan {plan} cannot be read ({reason}): nothing was moved; "
                                 "make mopup writes a new one\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["current-config.json", "mopup-plan.json"]


@pytest.mark.e2e
def test_changed_task_files_make_resume_impossible(tmp_path, server, report_line):
    tree = Tree(tmp_path, DEFAULT_PLAN, server)
    tree.bench()
    hashes, before_dirs = tree.scored_hashes(), tree.trial_dirs()
    # The task changed after the run (a dataset moved on): harbor's lock.json would refuse
    # a resume after -f had deleted, which is what the config comparison alone cannot see.
    (tree.root / "dataset" / "t-sandbox" / "instruction.md").write_text("Write 'done!' to /app/out.txt.\n")
    forced = tree.mopup(MOPUP_MODE="resume")
    assert forced.returncode == 1
    assert "the files of t-sandbox changed since the job ran" in forced.stderr
    assert tree.executed("mopup") == [] and tree.manifest() == [] and tree.trial_dirs() == before_dirs

    proc = tree.mopup()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "mechanism: a standalone retry job" in proc.stderr
    assert sorted(r["task"] for r in tree.executed("mopup")) == sorted(INFRA)
    assert wasted_work(tree.executed("mopup"), SCORED, report_line) == 0
    assert_mopup_kept_everything(tree, before_dirs, hashes)


@pytest.mark.parametrize("script, settings, args, message", [
    ("mopup.sh", {"MOPUP_MODE": "bogus"}, [], "setting MOPUP_MODE must be one of auto, resume, retry-job, got 'bogus'"),
    ("mopup.sh", {"WHERE": "hf"}, [], "setting BUCKET is empty for run 'mopup-test'"),
    ("mopup.sh", {"WHERE": "hf", "BUCKET": "alice/tb"}, [], "is not a git checkout"),
    ("mopup-restore.sh", {}, [], "say which trial dirs to restore: TRIALS="),
    ("mopup-restore.sh", {"TRIALS": "all"}, ["extra"], "mopup-restore takes no arguments, got 'extra'"),
    ("mopup-archive.sh", {}, ["extra"], "mopup-archive takes no arguments, got 'extra'"),
    # The verbs that were mopup.sh's own words are their own scripts now: the old spelling says where.
    ("mopup.sh", {}, ["restore"], "mopup.sh takes no arguments, got 'restore' (make mopup-archive lists the "
                                  "archive: scripts/mopup-archive.sh; make mopup-restore puts it back: "
                                  "scripts/mopup-restore.sh)"),
    ("mopup.sh", {}, [], "no job 'mopup-e2e' under"),  # before any bench
])
def test_bad_input_names_the_problem_and_changes_nothing(tmp_path, server, script, settings, args, message):
    tree = Tree(tmp_path, DEFAULT_PLAN, server)
    proc = tree.mopup(*args, script=script, **settings)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert message in proc.stderr
    assert not (tree.root / "jobs").exists() and tree.manifest() == [] and tree.executed() == []


def test_a_job_of_another_model_under_the_run_s_name_is_refused_and_nothing_moves(tmp_path, server):
    """A run file copied from another keeps the original's JOB_NAME: the job dir of that name ran
    another model. Mop-up refuses before it plans a retry of "the missing" tasks with this run's
    model: nothing archived, nothing run, every file as it was."""
    from tests.fixtures.harbor_jobs import TrialSpec, write_job

    tree = Tree(tmp_path, DEFAULT_PLAN, server)
    job = write_job(tree.root / "jobs", JOB, [TrialSpec("t-sandbox", None, "SandboxError"), TrialSpec("t-pass", 1.0)],
                    dataset=tmp_path / "their-dataset", model="openai/Other/Model-7B")
    before = {p: sha256(p) for p in job.rglob("*") if p.is_file()}
    proc = tree.mopup()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert (f"Error: tally failed: {job} ran model 'openai/Other/Model-7B' (its config.json), not the run's MODEL "
            f"{MODEL}: another run's job under this run's job name") in proc.stderr
    assert "Give this run its own JOB_NAME" in proc.stderr
    assert {p: sha256(p) for p in job.rglob("*") if p.is_file()} == before
    assert tree.manifest() == [] and tree.executed() == []
    assert not (tree.state / "archive").exists()


@pytest.mark.e2e
def test_job_result_left_empty_by_a_kill_is_archived_not_fatal(tmp_path, server, report_line):
    # Harbor rewrites <job>/result.json at every trial start and end; a kill mid-write leaves
    # it empty, and `harbor job resume` then dies before running anything (seen for real
    # in test_interrupted_mopup_can_be_run_again, depending on the kill's timing).
    tree = Tree(tmp_path, DEFAULT_PLAN, server)
    tree.bench()
    hashes, before_dirs = tree.scored_hashes(), tree.trial_dirs()
    (tree.job_dir / "result.json").write_text("")
    proc = tree.mopup()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "result.json is unreadable" in proc.stderr
    assert sorted(r["task"] for r in tree.executed("mopup")) == sorted(INFRA)
    assert wasted_work(tree.executed("mopup"), SCORED, report_line) == 0
    assert_mopup_kept_everything(tree, before_dirs, hashes)
    kept = [r for r in tree.manifest() if r.get("event") == "archive-job-file" and r.get("state") == "moved"]
    assert len(kept) == 1 and Path(kept[0]["dest"]).read_text() == ""
    assert json.loads((tree.job_dir / "result.json").read_text())["n_total_trials"] == 9
    final = tree.tally()
    assert (final["passed"], final["failed"], final["errored"], final["unfinished"]) == (6, 3, 0, 0)


@pytest.mark.e2e
def test_a_trial_harbor_was_stopped_inside_is_an_interruption_mopup_retries(tmp_path, server):
    # harbor 0.26 turns SIGINT and SIGTERM into a KeyboardInterrupt raised in whichever trial runs at
    # that instant; Trial.run records every Exception and CancelledError, not that: the trial is written
    # finished with neither a reward nor an exception, and harbor exits. Seen under a campaign's stop;
    # here raised from the sandbox's start, on the pinned harbor. It must be retried, never left.
    plan = {task: ["pass"] for task in ALL_TASKS} | {"t-cancel": ["KeyboardInterrupt", "pass"]}
    tree = Tree(tmp_path, plan, server)
    proc = tree.bench()
    assert proc.returncode != 0, proc.stdout + proc.stderr
    stopped = [r for r in tree.results().values() if r["task_name"] == "t-cancel"]
    assert [(r["verifier_result"], r["exception_info"], r["finished_at"] is not None) for r in stopped] == [
        (None, None, True)]
    first = {t["task"]: (t["outcome"], t["rule"]) for t in tree.tally()["per_task"]}
    assert first["t-cancel"] == ("errored", "interrupted-unrecorded")
    proc = tree.mopup()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [r["behaviour"] for r in tree.executed() if r["task"] == "t-cancel"] == ["KeyboardInterrupt", "pass"]
    final = tree.tally()
    assert (final["passed"], final["errored"], final["unclassified"], final["unfinished"]) == (len(ALL_TASKS), 0, 0, 0)
