"""In-run retries (MAX_RETRIES) and tools/results/retried.py, the job plugin that keeps every retried attempt.

harbor 0.26.0 retries a trial inside its job when every exception it recorded is one of
--retry-include, and deletes the failed attempt's dir before it runs the trial again under the
same name (harbor/trial/queue.py). The end-to-end tests run the real `harbor run -k 3
--max-retries 2` (and mop-up's real `harbor job resume`) on tests/datasets/mopup with
tests/harbor_env/scripted_env.py, as tests/test_mopup.py does, and read what harbor executed from
the scripted environment's log; the rest pin the harbor facts the plugin stands on, and drive its
hook with the END events harbor's own Trial._emit builds, on a job written with harbor's models.
"""

from __future__ import annotations

import inspect
import json
import subprocess
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.fixtures import hostile
from tests.fixtures.harbor_jobs import TrialSpec
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


# --------------------------------------------------------------------------- the hook, driven with harbor's events
#
# A job written with harbor's own models (tests/fixtures/harbor_jobs.py, lock.json included), and the
# END events harbor's own Trial._emit builds from a trial's config, result and lock (the TrialHookEvent
# every hook receives), awaited as harbor awaits them: no harbor run, so make check runs these.

RETRY = {"max_retries": 2, "include_exceptions": ["ReadTimeout", "SandboxError"]}


class HookJob:
    """What the plugin reads of harbor's Job (harbor/job.py): its config, job_dir, on_trial_ended."""

    def __init__(self, config):
        self.config = config
        self.job_dir = config.jobs_dir / config.job_name
        self.ended: list = []

    def on_trial_ended(self, callback):
        self.ended.append(callback)
        return self


def hook_job(tmp_path: Path, specs) -> HookJob:
    from harbor.models.job.config import JobConfig, RetryConfig

    from tests.fixtures.harbor_jobs import write_job

    job_dir = write_job(tmp_path / "jobs", "hook-job", specs, lock=True)
    config = JobConfig.model_validate_json((job_dir / "config.json").read_text())
    return HookJob(config.model_copy(update={"retry": RetryConfig.model_validate(RETRY)}))


def trial_dir_of(job: HookJob, task: str) -> Path:
    [trial] = [p for p in job.job_dir.iterdir() if p.name.startswith(f"{task}__")]
    return trial


async def harbor_emits_end(job: HookJob, trial: Path) -> None:
    """harbor's own Trial._emit(END) for the attempt in trial's dir, to every hook the plugin registered."""
    from harbor.models.job.lock import JobLock
    from harbor.models.trial.config import TrialConfig
    from harbor.models.trial.result import TrialResult
    from harbor.trial.hooks import TrialEvent
    from harbor.trial.trial import Trial

    result = TrialResult.model_validate_json((trial / "result.json").read_text())
    [lock] = [t for t in JobLock.model_validate_json((job.job_dir / "lock.json").read_text()).trials
              if t.task.name == result.task_name]
    emitter = SimpleNamespace(task=SimpleNamespace(name=result.task_name), result=result, _trial_lock=lock,
                              config=TrialConfig.model_validate_json((trial / "config.json").read_text()),
                              _hooks={TrialEvent.END: job.ended})
    await Trial._emit(emitter, TrialEvent.END)


def rerun(trial: Path) -> str:
    """What harbor's queue does to a retried attempt: deletes its dir and runs the trial again under the
    same name (harbor/trial/queue.py); the new attempt passes, under a new id. Returns that id."""
    import shutil
    import uuid

    from harbor.models.trial.result import TrialResult
    from harbor.models.verifier.result import VerifierResult

    failed = TrialResult.model_validate_json((trial / "result.json").read_text())
    again = failed.model_copy(update={"id": uuid.uuid4(), "exception_info": None,
                                      "verifier_result": VerifierResult(rewards={"reward": 1.0})})
    config = (trial / "config.json").read_text()
    shutil.rmtree(trial)
    trial.mkdir()
    (trial / "config.json").write_text(config)
    (trial / "result.json").write_text(again.model_dump_json(indent=4))
    return str(again.id)


@pytest.mark.parametrize("kind", ["fifo", "directory", "oversized", "link"])
def test_a_result_json_that_is_no_regular_file_or_too_big_gives_no_id_never_hangs(tmp_path, kind):
    trial = tmp_path / "t__abc"
    trial.mkdir()
    path = trial / "result.json"
    if kind in hostile.KINDS:
        hostile.make(path, kind, 64 * hostile.MiB, "a result.json")  # a FIFO: the plugin once waited for a writer
    else:
        (tmp_path / "elsewhere.json").write_text('{"id": "1"}')
        path.symlink_to(tmp_path / "elsewhere.json")
    before = sorted(p.name for p in trial.iterdir())
    assert retried.result_id_of(trial) is None
    assert sorted(p.name for p in trial.iterdir()) == before


def test_the_hook_keeps_each_retryable_attempt_and_at_the_end_removes_only_those_harbor_kept(tmp_path):
    """A ReadTimeout attempt harbor then deletes and runs again: its copy stays, the one place it is
    left. A SandboxError attempt harbor keeps (no retry left): its copy is the same attempt twice, removed.
    A NonZeroAgentExitCodeError and a pass: never copied. A copy another harbor process left is not this
    one's to remove, though its trial dir holds that very attempt."""
    import asyncio

    from harbor.models.job.result import JobResult

    job = hook_job(tmp_path, [TrialSpec("t-readtimeout", exc="ReadTimeout"), TrialSpec("t-sandbox", exc="SandboxError"),
                              TrialSpec("t-apt", exc="NonZeroAgentExitCodeError"), TrialSpec("t-pass", reward=1.0)])
    timeout, sandbox, apt, passed = (trial_dir_of(job, t) for t in ("t-readtimeout", "t-sandbox", "t-apt", "t-pass"))
    ids = {t: json.loads((t / "result.json").read_text())["id"] for t in (timeout, sandbox, apt)}
    kept_dir = tally_jobs.retried_attempts_dir(job.job_dir)
    earlier = kept_dir / f"{apt.name}.{ids[apt]}"  # left by an earlier harbor of this job
    retried.keep(apt, earlier)
    first_attempt = {p.name: p.read_bytes() for p in timeout.iterdir() if p.is_file()}
    plugin = retried.KeepRetried()

    async def the_job() -> tuple[list[str], str]:
        await plugin.on_job_start(job)
        assert len(job.ended) == 1  # one hook, on END
        await harbor_emits_end(job, timeout)
        second = rerun(timeout)
        await harbor_emits_end(job, timeout)
        for trial in (sandbox, apt, passed):
            await harbor_emits_end(job, trial)
        before_end = sorted(p.name for p in kept_dir.iterdir())
        await plugin.on_job_end(JobResult.model_validate_json((job.job_dir / "result.json").read_text()))
        return before_end, second

    before_end, second = asyncio.run(the_job())
    copy = kept_dir / f"{timeout.name}.{ids[timeout]}"
    assert before_end == sorted([copy.name, f"{sandbox.name}.{ids[sandbox]}", earlier.name])
    assert sorted(p.name for p in kept_dir.iterdir()) == sorted([copy.name, earlier.name])
    # The retried attempt's copy is that attempt whole; the job holds the attempt that replaced it.
    assert {p.name: p.read_bytes() for p in copy.iterdir() if p.is_file()} == first_attempt
    assert json.loads((timeout / "result.json").read_text())["id"] == second != ids[timeout]
    assert json.loads((sandbox / "result.json").read_text())["id"] == ids[sandbox]
    assert not list(kept_dir.parent.glob("**/.*.tmp-*"))


def test_a_copy_the_hook_cannot_make_stops_harbor_with_the_attempt_in_place(tmp_path):
    """.retried/ is a file: the copy cannot be made, and the hook's error leaves harbor's own Trial._emit
    (which the trial's run does not catch before the queue's rmtree: test_the_harbor_facts_the_plugin_stands_on),
    naming the attempt and the fix; the attempt is untouched and no partial copy is left."""
    import asyncio

    job = hook_job(tmp_path, [TrialSpec("t-readtimeout", exc="ReadTimeout")])
    trial = trial_dir_of(job, "t-readtimeout")
    blocked = job.job_dir.parent / tally_jobs.RETRIED_DIR
    blocked.write_text("a file where the kept attempts would go\n")
    before = {p.relative_to(tmp_path): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    plugin = retried.KeepRetried()

    async def the_job() -> None:
        await plugin.on_job_start(job)
        await harbor_emits_end(job, trial)

    with pytest.raises(retried.KeepRetriedError) as raised:
        asyncio.run(the_job())
    assert str(raised.value) == (
        f"tools.results.retried: could not keep {trial} before harbor's retry deletes it ([Errno 20] Not a directory: "
        f"'{blocked / job.job_dir.name}'); harbor stops here rather than lose it. Free the space (or fix "
        f"{blocked / job.job_dir.name}), then run the same make verb again: its trials are resumed")
    assert {p.relative_to(tmp_path): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before
