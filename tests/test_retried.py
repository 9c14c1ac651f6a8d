"""In-run retries (MAX_RETRIES) and tools/results/retried.py, the job plugin that keeps every retried attempt.

harbor 0.26.0 retries a trial inside its job when every exception it recorded is one of
--retry-include, and deletes the failed attempt's dir before it runs the trial again under the
same name (harbor/trial/queue.py). The end-to-end tests run the real `harbor run -k 3
--max-retries 2` (and mop-up's real `harbor job resume`) on tests/datasets/mopup with
tests/harbor_env/scripted_env.py, as tests/test_mopup.py does, and read what harbor executed from
the scripted environment's log; the rest pin the harbor facts the plugin stands on.
"""

from __future__ import annotations

import inspect
import json
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from tests.test_mopup import JOB, MODEL, FakeServer, Tree
from tools.results import retried
from tools.results import tally_jobs
from tools.results import tally_policy

assert FakeServer  # the server fixture of tests/test_mopup.py, used by name
from tests.test_mopup import server  # noqa: E402,F401  (a fixture)

REPO = Path(__file__).resolve().parents[1]
K = 3
TASKS = ("t-pass", "t-readtimeout", "t-sandbox", "t-apt", "t-timeout")
# Attempt by attempt, across the task's trials (the scripted environment counts a task's starts).
PLAN = {
    "t-pass": ["pass"],
    "t-readtimeout": ["ReadTimeout", "pass", "ReadTimeout", "fail", "pass"],  # two flakes, each retried once
    "t-sandbox": ["SandboxError"] * 9 + ["pass"],  # errs on every try of the run: mop-up's
    "t-apt": ["apt-mirror", "pass"],  # infra by its message only (a NonZeroAgentExitCodeError): never in-run
    "t-timeout": ["AgentTimeoutError"],  # the model's own result: never retried
}
RUN_FILE = f"""\
# Written by tests/test_retried.py: a k = {K} run that retries infra errors in the run.
SERVER=qwen3.8-27b-fp8-sglang-h200
MODEL={MODEL}
JOB_NAME={JOB}
AGENT=oracle
DATASET_PATH=dataset
TASKS='{" ".join(TASKS)}'
ENV_TYPE=scripted_env:ScriptedEnv
AGENT_TIMEOUT_MULTIPLIER=1
N_ATTEMPTS={K}
MAX_RETRIES=2
N_CONCURRENT=1
"""


def k_run(tmp_path: Path, server) -> Tree:
    tree = Tree(tmp_path, PLAN, server)
    (tree.root / "runs" / "mopup-test.env").write_text(RUN_FILE)
    return tree


def kept(tree: Tree) -> dict[str, dict]:
    """The attempts kept under .retried/<job>/, by dir name: their result.json."""
    where = tree.root / "jobs" / tally_jobs.RETRIED_DIR / JOB
    return {p.name: json.loads((p / "result.json").read_text()) for p in sorted(where.iterdir())} if where.is_dir() else {}


def starts(tree: Tree, phase: str) -> Counter:
    return Counter(r["task"] for r in tree.executed(phase))


@pytest.mark.e2e
def test_an_infra_error_is_retried_in_the_run_kept_and_the_slots_hold_exactly_k(tmp_path, server):
    tree = k_run(tmp_path, server)
    proc = tree.bench()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # What harbor executed: a ReadTimeout or SandboxError tried again at once (up to 2 more times);
    # apt-mirror (a NonZeroAgentExitCodeError) and the timeout never, as the policy wants.
    assert starts(tree, "bench") == {"t-pass": 3, "t-readtimeout": 5, "t-sandbox": 9, "t-apt": 3, "t-timeout": 3}

    # The job holds one dir per trial, k per task: harbor replaced each retried attempt in its dir.
    by_task = Counter(r["task_name"] for r in tree.results().values())
    assert by_task == {task: K for task in TASKS}
    job_result = json.loads((tree.job_dir / "result.json").read_text())
    assert job_result["stats"]["n_retries"] == 8

    # Every attempt harbor retried, and only those, is kept whole beside the job, under its own id;
    # the last SandboxError of each t-sandbox trial is in the job itself, not kept twice.
    copies = kept(tree)
    assert sorted((r["task_name"], r["exception_info"]["exception_type"]) for r in copies.values()) == \
        [("t-readtimeout", "ReadTimeout")] * 2 + [("t-sandbox", "SandboxError")] * 6
    assert all(name == f"{r['trial_name']}.{r['id']}" for name, r in copies.items())
    live = {r["id"] for r in tree.results().values()}
    assert not live & {r["id"] for r in copies.values()}
    for name in copies:  # whole: its config, its log
        assert {"config.json", "result.json", "trial.log"} <= {p.name for p in (tree.root / "jobs" / ".retried" / JOB / name).iterdir()}

    # The tally: every slot of the k is filled where harbor's retry settled it; no retried attempt
    # fills one, yet each is counted among the run's trials.
    report = tree.tally()
    slots = {e["task"]: e["slots"] for e in report["per_task"]}
    assert {t: len(s) for t, s in slots.items()} == {task: K for task in TASKS}
    assert Counter(slots["t-readtimeout"]) == {"passed": 2, "failed": 1}
    assert slots["t-sandbox"] == ["errored"] * K
    assert Counter(slots["t-apt"]) == {"passed": 2, "errored": 1}
    assert report["retried_in_run"] == 8 and report["trial_dirs"] == len(TASKS) * K + 8
    assert report["exceptions_all_trials"]["SandboxError"] == 9
    assert report["exceptions_all_trials"]["ReadTimeout"] == 2
    flagged = [t for e in report["per_task"] for t in e["trials"] if t["retried"]]
    assert len(flagged) == 8 and all(t["trial_dir"] not in e["slot_trials"] for e in report["per_task"]
                                     for t in flagged)

    # Mop-up fills what survived the run's retries, and nothing else: t-sandbox's three slots and
    # t-apt's one; its harbor carries the plugin too, whichever way it runs.
    proc = tree.mopup()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert starts(tree, "mopup") == {"t-sandbox": 3, "t-apt": 1}
    [resumed] = [e for e in tree.manifest() if e.get("event") == "mopup"]
    assert resumed["mode"] == "resume" and resumed["argv"] == [
        "harbor", "job", "resume", "-p", str(tree.job_dir), "--filter-error-type", "mopup-archived-first-matches-nothing",
        "--plugin", retried.PLUGIN]
    final = tree.tally()
    assert final["slots"] == len(TASKS) * K and final["unfinished"] == 0 and final["errored"] == 0
    assert {e["task"]: Counter(e["slots"]) for e in final["per_task"]}["t-sandbox"] == {"passed": K}
    assert final["retried_in_run"] == 8  # nothing kept was lost on the way


@pytest.mark.e2e
def test_an_attempt_that_cannot_be_kept_is_never_deleted_harbor_stops_instead(tmp_path, server):
    tree = k_run(tmp_path, server)
    (tree.root / "runs" / "mopup-test.env").write_text(RUN_FILE.replace(
        f"TASKS='{' '.join(TASKS)}'", "TASKS=t-readtimeout").replace(f"N_ATTEMPTS={K}", "N_ATTEMPTS=1"))
    (tree.root / "jobs").mkdir()
    (tree.root / "jobs" / tally_jobs.RETRIED_DIR).write_text("a file where the kept attempts would go\n")
    proc = tree.bench()
    assert proc.returncode != 0
    assert "tools.results.retried: could not keep" in proc.stdout + proc.stderr
    # The ReadTimeout attempt is where harbor wrote it, whole: harbor never reached its rmtree or its retry.
    [(trial, result)] = tree.results().items()
    assert result["exception_info"]["exception_type"] == "ReadTimeout" and (trial / "trial.log").exists()
    assert starts(tree, "bench") == {"t-readtimeout": 1}


def test_the_retry_flags_are_the_policys_infra_types_and_reach_harbors_job_config():
    """MAX_RETRIES=2 on the leaderboard run: harbor's own --print-config resolves an include list of the
    policy's infra types (CancelledError left to mop-up), under harbor's default exclusions, none of
    which it overlaps: every type listed is retried, and nothing else is."""
    env = {"RUN": "qwen-t2-leaderboard", "PATH": f"{REPO / '.venv/bin'}:/usr/bin:/bin", "HOME": "/nonexistent",
           "HARBOR_TELEMETRY": "0"}
    argv = subprocess.run([str(REPO / "tests/bin/argv-of"), "bench"], capture_output=True, check=True,
                          env=env).stdout.split(b"\0")[:-1]
    argv = [a.decode() for a in argv]
    assert argv[argv.index("--max-retries") + 1] == "2"
    assert argv[argv.index("--plugin") + 1] == retried.PLUGIN == "tools.results.retried:KeepRetried"
    config = json.loads(subprocess.run([*argv, "--print-config"], capture_output=True, text=True, check=True,
                                       env=env).stdout)
    policy = tally_policy.load_policy()
    want = sorted(set(policy.infra_types) - {"CancelledError"})
    assert config["retry"]["max_retries"] == 2
    assert config["retry"]["include_exceptions"] == want
    assert [a for i, a in enumerate(argv) if i and argv[i - 1] == "--retry-include"] == list(tally_policy.retry_include(policy))
    from harbor.models.job.config import RetryConfig, default_retry_exclusions

    assert "NonZeroAgentExitCodeError" not in want and "AgentTimeoutError" not in want
    assert not set(want) & set(default_retry_exclusions())
    assert "CancelledError" in default_retry_exclusions()
    retry = RetryConfig.model_validate(config["retry"])
    assert [t for t in want if retry.is_retryable(t)] == want
    assert not any(retry.is_retryable(t) for t in ("NonZeroAgentExitCodeError", "AgentTimeoutError",
                                                   "ContextWindowExceededError", "CancelledError"))


def test_the_harbor_facts_the_plugin_stands_on():
    """harbor 0.26.0: the queue deletes a retried attempt's dir after Trial.run returns; Trial.run fires
    END (every hook awaited) after result.json is written, inside run, so a hook's exception leaves
    run before the queue's rmtree; a job plugin is loaded by harbor run and harbor job resume alike and
    is no part of the job's config."""
    from harbor.cli import jobs as cli_jobs
    from harbor.trial import queue, trial

    retry_loop = inspect.getsource(queue.TrialQueue._execute_trial_with_retries)
    run_at, rmtree_at = retry_loop.index("result = await trial.run()"), retry_loop.index("shutil.rmtree(trial.paths.trial_dir")
    assert run_at < rmtree_at
    assert "self._retry_config.is_retryable(error.exception_type)\n                for error in exceptions" in retry_loop
    assert "exceptions = result.recorded_exceptions()" in retry_loop
    finalize = inspect.getsource(trial.Trial._finalize)
    assert finalize.index("self.paths.result_path.write_text(") < finalize.index("await self._emit(TrialEvent.END)")
    assert "for hook in self._hooks[event]:\n            await hook(hook_event)" in inspect.getsource(trial.Trial._emit)
    run_source = inspect.getsource(trial.Trial.run)
    assert "finally:\n            try:\n                await self._finalize()" in run_source
    # The slot harbor holds across retries: the queue's semaphore wraps the whole retry loop.
    assert "async with self._semaphore:\n            return await self._execute_trial_with_retries" in \
        inspect.getsource(queue.TrialQueue._run_trial)
    # --plugin on both verbs, and plugins are not the job's config (they never reach lock.json).
    source = inspect.getsource(cli_jobs)
    assert source.count('"--plugin",') == 2
    assert "The 'plugins' job config key is deprecated and ignored." in inspect.getsource(
        __import__("harbor.models.job.config", fromlist=["JobConfig"]))
    from harbor.models.job.plugin import JobPlugin

    assert isinstance(retried.KeepRetried(), JobPlugin)


def test_a_copy_is_whole_or_absent_and_never_follows_a_link(tmp_path):
    import os

    src = tmp_path / "t__abc"
    (src / "agent").mkdir(parents=True)
    (src / "result.json").write_text('{"id": "1"}')
    (src / "agent" / "link").symlink_to("/etc/passwd")
    os.mkfifo(src / "agent" / "fifo")  # never opened: a copy must not hang
    dest = tmp_path / ".retried" / "j" / "t__abc.1"
    retried.keep(src, dest)
    assert (dest / "result.json").read_text() == '{"id": "1"}'
    assert os.readlink(dest / "agent" / "link") == "/etc/passwd" and not (dest / "agent" / "fifo").exists()
    assert retried.result_id_of(dest) == "1"
    # A destination that cannot be made: the error names the fix, and no partial copy is left.
    blocked = tmp_path / "blocked"
    blocked.write_text("x")
    with pytest.raises(retried.KeepRetriedError, match="harbor stops here rather than lose it"):
        retried.keep(src, blocked / "j" / "t__abc.1")
    assert not list(tmp_path.glob("**/.t__abc.1.tmp-*"))
