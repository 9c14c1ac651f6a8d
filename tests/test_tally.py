"""tools/tally.py: discovery, selection, classification, both accountings, JSON, CLI, bad input.

Every job dir here is written with harbor 0.26's own pydantic models
(tests/fixtures/harbor_jobs.py, docs/harbor.md §8). Expected numbers are worked out by hand
in the comments beside each fixture, not read back from the tool.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.fixtures.harbor_jobs import DELETE, TrialSpec, rewrite_result, trial_name, write_job
from tools.results import slots
from tools import tally as tally_cli
from tools.results import tally_core
from tools.results import tally_jobs
from tools.results import tally_policy
from tools.results import tally_trials

S = TrialSpec
REPO = Path(__file__).resolve().parent.parent

APT = ("Command failed (exit 100): apt-get update\nstdout: \nstderr: E: Release file for "
       "http://security.debian.org/debian-security/dists/bullseye-security/InRelease is expired "
       "(invalid since 12d 4h 3min 11s).")
PS = "Command failed (exit 127): bash -lc 'ps aux'\nstdout: \nstderr: /bin/sh: 1: ps: not found"
CTX = ("Command failed (exit 1): mini-swe-agent --yolo -c model.model_kwargs.timeout=3600\n"
       "stdout: litellm.ContextWindowExceededError: maximum context length is 262144 tokens\nstderr: ")
# A bare exit whose command line carries `timeout=3600` (every mini-swe-agent run does):
# must NOT read as a timeout limit.
BARE = ("Command failed (exit 1): mini-swe-agent --yolo -c model.model_kwargs.timeout=3600 "
        "--exit-immediately\nstdout: Traceback (most recent call last):\nstderr: ")


@pytest.fixture(scope="module")
def policy():
    return tally_policy.load_policy()


def outcomes(report: dict) -> dict[str, str]:
    return {e["task"]: e["outcome"] for e in report["per_task"]}


def counts(report: dict) -> dict:
    return {k: report[k] for k in ("tasks", "passed", "failed", "errored", "unclassified", "unfinished", "scored")}


# --------------------------------------------------------------------------- harbor pin


def test_harbor_pin_matches_the_schema_the_fixtures_were_verified_against():
    # A pin bump must fail here first: tally reads these names from raw JSON.
    assert importlib.metadata.version("harbor") == "0.26.0"
    from harbor.models.agent.context import AgentContext
    from harbor.models.trial.result import ExceptionInfo, TimingInfo, TrialResult
    from harbor.models.verifier.result import VerifierResult

    assert set(tally_trials.RESULT_FIELDS) <= set(TrialResult.model_fields)
    assert {"task_name", "trial_name", "finished_at", "started_at"} <= set(TrialResult.model_fields)
    assert set(VerifierResult.model_fields) == {"rewards"}
    assert {"exception_type", "exception_message"} <= set(ExceptionInfo.model_fields)
    assert {"n_input_tokens", "n_cache_tokens", "n_output_tokens"} <= set(AgentContext.model_fields)
    assert set(TimingInfo.model_fields) == {"started_at", "finished_at"}


# --------------------------------------------------------------------------- discovery


def test_retry_job_name_and_number():
    assert tally_jobs.retry_job_name("run", 1) == "run-retry-1"
    assert tally_jobs.retry_number("run", "run") == 0
    assert tally_jobs.retry_number("run", "run-retry-12") == 12
    for other in ("run-smoke", "run-retry-", "run-retry-x", "run-retry-0", "run-retry-1a", "runx", "run-retry-²"):
        assert tally_jobs.retry_number("run", other) is None, other
    with pytest.raises(ValueError):
        tally_jobs.retry_job_name("run", 0)


def test_run_job_dirs_flat_then_nested_in_retry_order(tmp_path):
    for name in ("run", "run-retry-10", "run-retry-2", "run-smoke", "run-retry-x", "other",
                 "jobs/run-retry-1", "jobs/run-retry-3", "jobs/run-smoke"):
        (tmp_path / name).mkdir(parents=True)
    (tmp_path / "run-retry-4").write_text("a file, not a job dir")
    got = [str(p.relative_to(tmp_path)) for p in tally_jobs.run_job_dirs(tmp_path, "run")]
    assert got == ["run", "run-retry-2", "run-retry-10", "jobs/run-retry-1", "jobs/run-retry-3"]
    assert tally_jobs.next_retry_job_name(tmp_path, "run") == "run-retry-11"
    assert tally_jobs.next_retry_job_name(tmp_path, "fresh") == "fresh-retry-1"


def test_run_job_dirs_missing_jobs_dir_names_it(tmp_path):
    with pytest.raises(tally_jobs.TallyError, match=r"jobs dir not found: .*nope .*--jobs-dir"):
        tally_jobs.run_job_dirs(tmp_path / "nope", "run")


# --------------------------------------------------------------------------- whose job dir


def test_whose_job_a_dir_is_comes_from_the_fields_harbor_writes():
    """The names refuse_foreign_job_dirs reads are harbor 0.26's own: JobConfig.job_name and .agents,
    AgentConfig.model_name; and a config.json as harbor writes it (exclude_defaults) holds them."""
    from harbor.models.job.config import JobConfig
    from harbor.models.trial.config import AgentConfig


    assert {tally_jobs.CONFIG_JOB_NAME, tally_jobs.CONFIG_AGENTS} <= set(JobConfig.model_fields)
    assert tally_jobs.CONFIG_MODEL_NAME in AgentConfig.model_fields
    written = json.loads(JobConfig(job_name="j", agents=[AgentConfig(name="terminus-2", model_name="openai/Q/M")])
                         .model_dump_json(indent=4, exclude_defaults=True))
    assert written[tally_jobs.CONFIG_JOB_NAME] == "j"
    assert written[tally_jobs.CONFIG_AGENTS][0][tally_jobs.CONFIG_MODEL_NAME] == "openai/Q/M"


def test_model_matches_harbor_s_provider_prefixed_name():
    from tools.results.tally_jobs import model_matches

    assert model_matches("openai/Qwen/Qwen3.8-27B-FP8", "Qwen/Qwen3.8-27B-FP8")
    assert model_matches("openai/openai/gpt-oss-20b", "openai/gpt-oss-20b")  # Run 2's model id
    assert model_matches("Qwen/Qwen3.8-27B-FP8", "Qwen/Qwen3.8-27B-FP8")
    for other in ("openai/Qwen/Qwen3.8-27B", "openai/Other/Qwen3.8-27B-FP8", "openai/Qwen3.8-27B-FP8"):
        assert not model_matches(other, "Qwen/Qwen3.8-27B-FP8"), other


MINE = "Qwen/Qwen3.8-27B-FP8"  # the fixtures' model, as a run's MODEL names it


def foreign_run(jobs):
    """Run `a`'s own job and retry job, both of MINE."""
    write_job(jobs, "a", [S("t1", 1.0, finished=60), S("t2", None, "SandboxError", finished=61)])
    write_job(jobs, "a-retry-1", [S("t2", 0.0, finished=90)], scoped=True)


def test_a_job_dir_of_another_model_under_the_run_s_name_is_refused_never_counted(tmp_path):
    """A job dir named as a shard of run `a`, written by a run whose JOB_NAME was a-shard-1 with another
    model: tally and retry-targets refuse it, naming it, its model and the fix; nothing is counted."""
    jobs = tmp_path / "jobs"
    foreign_run(jobs)
    own = run_cli("tally", "--jobs-dir", jobs, "--job-name", "a", "--model", MINE, "--json")
    assert own.exit_code == 0, own.output
    assert json.loads(own.stdout)["tasks"] == 2
    write_job(jobs, "a-shard-1", [S("t3", 1.0, finished=120)], model="openai/Other/Model-7B")
    for verb in ("tally", "retry-targets", "job-dirs"):
        r = run_cli(verb, "--jobs-dir", jobs, "--job-name", "a", "--model", MINE)
        assert r.exit_code == 1, (verb, r.output)
        assert r.stdout == ""
        assert r.stderr == (f"Error: {jobs / 'a-shard-1'} ran model 'openai/Other/Model-7B' (its config.json), not "
                            f"the run's MODEL {MINE}: another run's job under this run's job name, so its trials are "
                            f"not this run's. Give this run its own JOB_NAME (a run file copied from another keeps the "
                            f"original's), or move that job dir out of the jobs dir (a job of this run renamed on "
                            f"purpose: give it back the name harbor wrote it as)\n")
    # Without a MODEL to compare (tally.py on its own), the model is not checked.
    assert run_cli("tally", "--jobs-dir", jobs, "--job-name", "a", "--json").exit_code == 0


def test_a_job_dir_whose_config_names_another_job_is_refused(tmp_path):
    """A copy of job `b` under the name of a's retry job 2: its config.json names b, so it is b's."""
    jobs = tmp_path / "jobs"
    foreign_run(jobs)
    write_job(jobs, "b", [S("t1", 0.0, finished=200)])
    os.rename(jobs / "b", jobs / "a-retry-2")
    r = run_cli("tally", "--jobs-dir", jobs, "--job-name", "a", "--model", MINE)
    assert r.exit_code == 1
    assert r.stderr == (f"Error: {jobs / 'a-retry-2'}/config.json names job 'b': harbor wrote it as that job, and it "
                        f"was renamed or copied here since: another run's job under this run's job name, so its trials "
                        f"are not this run's. Give this run its own JOB_NAME (a run file copied from another keeps the "
                        f"original's), or move that job dir out of the jobs dir (a job of this run renamed on purpose: "
                        f"give it back the name harbor wrote it as)\n")
    # An explicit JOB_DIR is the caller's own choice: never refused for it.
    r = run_cli("tally", jobs / "a-retry-2", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["tasks"] == 1


def test_what_cannot_tell_whose_job_it_is_is_not_refused(tmp_path):
    """No config.json yet (harbor writes it first), one that is not JSON, no job_name or model in it
    (harbor's defaults), a symlinked job dir (never followed: the scan reports it)."""
    from tools.results.tally_jobs import not_the_runs

    jobs = tmp_path / "jobs"
    foreign_run(jobs)
    (jobs / "a-retry-2").mkdir()
    (jobs / "a-retry-3").mkdir()
    (jobs / "a-retry-3" / "config.json").write_text("{not json")
    (jobs / "a-retry-4").mkdir()
    (jobs / "a-retry-4" / "config.json").write_text(json.dumps({"agents": [{"name": "oracle"}]}))
    write_job(tmp_path / "elsewhere", "z", [S("t1", 1.0)], model="openai/Other/Model-7B")
    (jobs / "a-retry-5").symlink_to(tmp_path / "elsewhere" / "z")
    assert [not_the_runs(d, MINE) for d in tally_jobs.run_job_dirs(jobs, "a")] == [None] * 6


# --------------------------------------------------------------------------- classification

CASES = [
    # (exception type, message, reward, timeouts_unscored) -> (outcome, rule)
    (None, None, 1.0, False, "passed", "reward"),
    (None, None, 0.0, False, "failed", "reward"),
    (None, None, 0.99, False, "failed", "reward"),
    (None, None, None, False, "errored", "interrupted-unrecorded"),  # no verifier result: harbor was stopped inside it
    ("AgentTimeoutError", "timed out", 0.0, False, "failed", "reward"),
    ("AgentTimeoutError", "timed out", 1.0, False, "passed", "reward"),
    ("AgentTimeoutError", "timed out", None, False, "failed", "limit-type"),
    ("AgentTimeoutError", "timed out", 0.0, True, "errored", "timeout-unscored"),
    ("AgentTimeoutError", "timed out", 1.0, True, "errored", "timeout-unscored"),
    ("ContextWindowExceededError", CTX, 0.0, False, "failed", "reward"),
    ("ContextWindowExceededError", CTX, None, False, "failed", "limit-type"),
    ("ContextWindowExceededError", CTX, None, True, "failed", "limit-type"),
    ("ContextLengthExceededError", "", None, False, "failed", "limit-type"),
    ("OutputTokenExceededError", "", None, False, "failed", "limit-type"),
    ("SandboxError", "Sandbox API error (503)", None, False, "errored", "infra-type"),
    ("SandboxError", "x", 1.0, False, "errored", "infra-type"),  # a reward does not rescue infra
    ("ReadTimeout", "", None, False, "errored", "infra-type"),
    ("RemoteProtocolError", "", None, False, "errored", "infra-type"),
    ("CancelledError", "", None, False, "errored", "infra-type"),
    ("InternalServerError", "", None, False, "errored", "infra-type"),
    ("ApiOverloadedError", "", None, False, "errored", "infra-type"),
    ("NetworkConnectionError", "", 0.0, False, "errored", "infra-type"),
    ("NonZeroAgentExitCodeError", APT, 0.0, False, "errored", "infra-message"),
    ("NonZeroAgentExitCodeError", PS, None, False, "errored", "infra-message"),
    ("NonZeroAgentExitCodeError", CTX, None, False, "failed", "nonzero-exit-limit"),
    ("NonZeroAgentExitCodeError", "Command failed (exit 124): timeout 600 make", None, False, "failed",
     "nonzero-exit-limit"),
    ("NonZeroAgentExitCodeError", BARE, None, False, "errored", "nonzero-exit-infra"),
    ("NonZeroAgentExitCodeError", BARE, 0.0, False, "failed", "reward"),
    ("NonZeroAgentExitCodeError", BARE, 1.0, False, "passed", "reward"),
    ("NonZeroAgentExitCodeError", None, None, False, "errored", "nonzero-exit-infra"),
    ("RuntimeError", "HF Sandbox is not running. Call start() first.", None, False, "errored", "infra-message"),
    ("RuntimeError", "something else", None, False, "unclassified", "no-rule"),
    ("VerifierTimeoutError", "", None, False, "unclassified", "no-rule"),
    ("VerifierTimeoutError", "", 0.0, False, "failed", "reward"),
    ("BadRequestError", "", None, False, "unclassified", "no-rule"),
]


@pytest.mark.parametrize("etype,msg,reward,unscored,outcome,rule", CASES)
def test_classify(policy, etype, msg, reward, unscored, outcome, rule):
    trial = tally_trials.Trial("d/t__x", "d", "t", "finished", reward=reward, exception_type=etype, exception_message=msg)
    got = tally_policy.classify(trial, policy, unscored)
    assert got[:2] == (outcome, rule), got[2]


def test_no_reward_no_exception_is_an_interruption_only_when_no_verifier_ran(policy):
    # harbor stopped inside the trial (a KeyboardInterrupt: Trial.run records none): retried as an interruption.
    stopped = tally_trials.Trial("d/t__x", "d", "t", "finished")
    assert tally_policy.classify(stopped, policy)[:2] == ("errored", "interrupted-unrecorded")
    stopped.outcome, stopped.rule = "errored", "interrupted-unrecorded"
    assert tally_policy.infra_side(stopped, policy) == "interrupted" and not slots.is_settled(stopped)
    # The verifier ran and gave no usable reward: its answer, not a stop; a person decides.
    answered = tally_trials.Trial("d/t__x", "d", "t", "finished", verified=True)
    assert tally_policy.classify(answered, policy)[:2] == ("unclassified", "no-reward-no-exception")


# --------------------------------------------------------------------------- a mixed run

# 22 tasks over the job, a retry job, a nested retry job; a smoke job that must be ignored.
# Default accounting, worked by hand:
#   passed (6):  t-pass, t-timeout-1, t-nz-reward, t-resume, t-retried, t-nested
#   failed (8):  t-fail, t-timeout-0, t-ctx-reward, t-ctx-noreward, t-nz-ctx, t-crash-later, t-empty, t-reroll
#   errored (5): t-nz-apt, t-nz-bare, t-overloaded, t-cancel, t-still-infra
#   unclassified (1): t-verifier;  unfinished (2): t-crash-only, t-corrupt
MAIN = [
    S("t-pass", 1.0, finished=60),
    S("t-fail", 0.0, finished=61),
    S("t-timeout-0", 0.0, "AgentTimeoutError", finished=62),
    S("t-timeout-1", 1.0, "AgentTimeoutError", finished=63),
    S("t-ctx-reward", 0.0, "ContextWindowExceededError", CTX, finished=64),
    S("t-ctx-noreward", None, "ContextWindowExceededError", CTX, finished=65),
    S("t-nz-apt", 0.0, "NonZeroAgentExitCodeError", APT, finished=66),
    S("t-nz-ctx", None, "NonZeroAgentExitCodeError", CTX, finished=67),
    S("t-nz-bare", None, "NonZeroAgentExitCodeError", BARE, finished=68),
    S("t-nz-reward", 1.0, "NonZeroAgentExitCodeError", BARE, finished=69),
    S("t-overloaded", None, "ApiOverloadedError", finished=70),
    S("t-cancel", None, "CancelledError", "", finished=71),
    S("t-verifier", None, "VerifierTimeoutError", finished=72),
    S("t-resume", None, "SandboxError", finished=10),          # pass 1 ...
    S("t-resume", 1.0, finished=100, attempt=1),               # ... the resume pass, same job dir
    S("t-crash-later", 0.0, finished=50),
    S("t-crash-later", finished=None, attempt=1),              # crashed later: never hides the finished one
    S("t-crash-only", finished=None),
    S("t-corrupt", raw_result='{"task_name": "t-corrupt", "finis'),
    S("t-empty", raw_result=""),
    S("t-empty", 0.0, finished=80, attempt=1),
    S("t-retried", None, "ReadTimeout", finished=20),
    S("t-reroll", 1.0, finished=30),
    S("t-nested", None, "ReadTimeout", finished=40),
    S("t-still-infra", None, "ReadTimeout", finished=41),
]
RETRY1 = [
    S("t-retried", 1.0, finished=1500),
    S("t-reroll", 0.0, finished=1510),
    S("t-still-infra", None, "ReadTimeout", finished=1520),
]
NESTED2 = [S("t-nested", 1.0, finished=2000)]
EXPECTED = {
    "t-pass": "passed", "t-timeout-1": "passed", "t-nz-reward": "passed", "t-resume": "passed",
    "t-retried": "passed", "t-nested": "passed",
    "t-fail": "failed", "t-timeout-0": "failed", "t-ctx-reward": "failed", "t-ctx-noreward": "failed",
    "t-nz-ctx": "failed", "t-crash-later": "failed", "t-empty": "failed", "t-reroll": "failed",
    "t-nz-apt": "errored", "t-nz-bare": "errored", "t-overloaded": "errored", "t-cancel": "errored",
    "t-still-infra": "errored",
    "t-verifier": "unclassified",
    "t-crash-only": "unfinished", "t-corrupt": "unfinished",
}


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    root = tmp_path_factory.mktemp("mixed")
    jobs = root / "jobs"
    ds = root / "dataset"
    write_job(jobs, "fx", MAIN, dataset=ds)
    write_job(jobs, "fx-retry-1", RETRY1, dataset=ds, scoped=True)
    write_job(jobs / "jobs", "fx-retry-2", NESTED2, dataset=ds, scoped=True)  # harbor's default nesting
    write_job(jobs, "fx-smoke", [S("t-pass", None, "SandboxError", finished=5000)], dataset=ds, scoped=True)
    # Decoys below a trial dir: the scan must never walk into agent/.
    agent = jobs / "fx" / trial_name("t-pass", "fx") / "agent"
    (agent / "result.json").write_text('{"task_name": "decoy", "finished_at": "2030-01-01T00:00:00Z"}')
    (agent / "sub").mkdir()
    (agent / "sub" / "result.json").write_text("not json")
    return jobs


def test_mixed_run_default_accounting(mixed, policy):
    report = tally_core.tally(tally_jobs.run_job_dirs(mixed, "fx"), policy, run="fx")
    assert outcomes(report) == EXPECTED
    assert counts(report) == {"tasks": 22, "passed": 6, "failed": 8, "errored": 5, "unclassified": 1,
                              "unfinished": 2, "scored": 14}
    assert report["pass_rate"] == 6 / 14
    assert report["accounting"] == "timeouts-scored"
    assert report["errored_breakdown"] == {"infra": 5, "final": 0, "timeout": 0, "verdict": 0}
    assert [os.path.relpath(d, mixed) for d in report["job_dirs"]] == ["fx", "fx-retry-1", "jobs/fx-retry-2"]
    # 25 + 3 + 1 trial dirs; the smoke job and the decoys are not among them.
    assert report["trial_dirs"] == 29
    by_task = {e["task"]: e for e in report["per_task"]}
    assert by_task["t-resume"]["attempts"] == 2
    assert by_task["t-resume"]["finished_at"] == "2026-09-03T09:40:00Z"
    assert by_task["t-crash-later"]["attempts"] == 1 and len(by_task["t-crash-later"]["trials"]) == 2
    assert [t["outcome"] for t in by_task["t-crash-later"]["trials"]] == ["unfinished", "failed"]
    assert by_task["t-empty"]["attempts"] == 1
    assert [t["outcome"] for t in by_task["t-empty"]["trials"]] == ["unreadable", "failed"]
    assert by_task["t-corrupt"]["attempts"] == 0 and by_task["t-corrupt"]["trial_dir"] is None
    assert by_task["t-nested"]["job_dir"] == str(mixed / "jobs" / "fx-retry-2")
    assert by_task["t-nz-apt"]["rule"] == "infra-message" and by_task["t-nz-apt"]["reward"] == 0.0
    assert by_task["t-nz-bare"]["rule"] == "nonzero-exit-infra"
    assert by_task["t-nz-ctx"]["rule"] == "nonzero-exit-limit"
    assert report["exceptions"] == {
        "NonZeroAgentExitCodeError": 4, "AgentTimeoutError": 2, "ContextWindowExceededError": 2,
        "ApiOverloadedError": 1, "CancelledError": 1, "ReadTimeout": 1, "VerifierTimeoutError": 1}
    # t-retried, t-nested, t-still-infra in fx, t-still-infra again in fx-retry-1
    assert report["exceptions_all_trials"]["ReadTimeout"] == 4
    assert report["exceptions_all_trials"]["SandboxError"] == 1  # the smoke job's is not counted
    # Every infra-errored attempt by side: the sandbox's t-nz-apt (an expired mirror), t-nz-bare, t-resume's
    # SandboxError and the four ReadTimeouts; the server's t-overloaded; t-cancel's interruption.
    assert report["infra_by_side"] == {"sandbox": 7, "server": 1, "interrupted": 1}
    assert "Infra errors by side (every attempt): sandbox 7, model server 1, interrupted 1 (" in tally_cli.render_text(report)


def test_mixed_run_warnings(mixed, policy):
    report = tally_core.tally(tally_jobs.run_job_dirs(mixed, "fx"), policy)
    w = report["warnings"]
    assert len(w) == 3, w
    assert w[0] == ("t-reroll: scored attempts disagree (passed at 2026-09-03T08:30:00Z, failed at "
                    "2026-09-04T09:10:00Z); the latest counts: failed")
    corrupt = str(mixed / "fx" / trial_name("t-corrupt", "fx") / "result.json")
    empty = str(mixed / "fx" / trial_name("t-empty", "fx") / "result.json")
    truncated = "truncated JSON: a string starting at line 1 column 28 never ends"
    assert w[1] == f"{corrupt}: unreadable result.json ({truncated}); the trial counts as unfinished"
    assert w[2] == f"{empty}: unreadable result.json (empty file); the trial counts as unfinished"
    assert report["unreadable"] == [
        {"path": corrupt, "error": truncated},
        {"path": empty, "error": "empty file"},
    ]


def test_mixed_run_timeouts_unscored(mixed, policy):
    report = tally_core.tally(tally_jobs.run_job_dirs(mixed, "fx"), policy, timeouts_unscored=True)
    expected = dict(EXPECTED, **{"t-timeout-0": "errored", "t-timeout-1": "errored"})
    assert outcomes(report) == expected
    assert counts(report) == {"tasks": 22, "passed": 5, "failed": 7, "errored": 7, "unclassified": 1,
                              "unfinished": 2, "scored": 12}
    assert report["errored_breakdown"] == {"infra": 5, "final": 0, "timeout": 2, "verdict": 0}
    assert report["accounting"] == "timeouts-unscored"


def test_retry_targets_are_infra_and_unfinished_with_all_trial_dirs(mixed, policy):
    report = tally_core.tally(tally_jobs.run_job_dirs(mixed, "fx"), policy)
    targets = tally_core.retry_targets(report)
    assert [t["task"] for t in targets] == ["t-cancel", "t-corrupt", "t-crash-only", "t-nz-apt", "t-nz-bare",
                                            "t-overloaded", "t-still-infra"]
    still = next(t for t in targets if t["task"] == "t-still-infra")
    assert [t["trial_dir"] for t in still["trials"]] == [
        str(mixed / "fx" / trial_name("t-still-infra", "fx")),
        str(mixed / "fx-retry-1" / trial_name("t-still-infra", "fx-retry-1")),
    ]
    # Under --timeouts-unscored the timeouts are errored but still never retry targets.
    unscored = tally_core.tally(tally_jobs.run_job_dirs(mixed, "fx"), policy, timeouts_unscored=True)
    assert [t["task"] for t in tally_core.retry_targets(unscored)] == [t["task"] for t in targets]


def test_per_task_entry_exact(mixed, policy):
    report = tally_core.tally(tally_jobs.run_job_dirs(mixed, "fx"), policy)
    entry = next(e for e in report["per_task"] if e["task"] == "t-retried")
    first = str(mixed / "fx" / trial_name("t-retried", "fx"))
    second = str(mixed / "fx-retry-1" / trial_name("t-retried", "fx-retry-1"))
    assert entry == {
        "task": "t-retried", "outcome": "passed", "computed_outcome": "passed", "rule": "reward",
        "reason": "reward 1 (pass threshold 1)", "reward": 1.0, "exception_type": None,
        "exception_message": None, "finished_at": "2026-09-04T09:00:00Z", "trial_dir": second,
        "job_dir": str(mixed / "fx-retry-1"), "settled": True, "infra": False, "attempts": 2, "verdict": None,
        "infra_streak": 0, "final_error": False, "open_slots": 0,
        "trials": [
            {"trial_dir": first, "job_dir": str(mixed / "fx"), "finished_at": "2026-09-03T08:20:00Z",
             "reward": None, "exception_type": "ReadTimeout", "outcome": "errored", "rule": "infra-type",
             "retried": False, "settled": False, "infra": True},
            {"trial_dir": second, "job_dir": str(mixed / "fx-retry-1"), "finished_at": "2026-09-04T09:00:00Z",
             "reward": 1.0, "exception_type": None, "outcome": "passed", "rule": "reward", "retried": False,
             "settled": True, "infra": False},
        ],
    }


def test_explicit_job_dir_is_added_once(mixed, policy):
    dirs = tally_jobs.resolve_job_dirs((str(mixed / "fx"),), str(mixed), "fx")
    report = tally_core.tally(dirs, policy)
    assert len(report["job_dirs"]) == 3 and report["tasks"] == 22
    only_nested = tally_core.tally([mixed / "jobs" / "fx-retry-2"], policy)
    assert outcomes(only_nested) == {"t-nested": "passed"}


# --------------------------------------------------------------------------- Run 1 arithmetic

RUN1_INFRA = ["circuit-fibsqrt", "feal-linear-cryptanalysis", "query-optimize", "schemelike-metacircular-eval"]


@pytest.fixture(scope="module")
def run1(tmp_path_factory):
    """Run 1's composition: 53 pass, 16 fail (reward 0), 16 AgentTimeoutError (reward 0),
    4 infra errors that failed on each of 3 attempts (job, retry-1, retry-2)."""
    root = tmp_path_factory.mktemp("run1")
    jobs, ds = root / "jobs", root / "dataset"
    main = [S(f"pass-{i:02d}", 1.0, finished=i) for i in range(53)]
    main += [S(f"fail-{i:02d}", 0.0, finished=60 + i) for i in range(16)]
    main += [S(f"timeout-{i:02d}", 0.0, "AgentTimeoutError", "Agent execution timed out", finished=80 + i)
             for i in range(16)]
    kinds = ["SandboxError", "RemoteProtocolError"]
    main += [S(t, None, kinds[i % 2], finished=100 + i) for i, t in enumerate(RUN1_INFRA)]
    write_job(jobs, "q", main, dataset=ds)
    for n in (1, 2):
        write_job(jobs, f"q-retry-{n}", [S(t, None, kinds[(i + n) % 2], finished=2000 * n + i)
                                         for i, t in enumerate(RUN1_INFRA)], dataset=ds, scoped=True)
    verdicts = root / "verdicts.yaml"
    verdicts.write_text("verdicts:\n" + "".join(
        f"  {t}:\n    outcome: errored\n    reason: SandboxError/RemoteProtocolError on all 3 attempts; accepted as final\n"
        for t in RUN1_INFRA))
    return jobs, verdicts


def test_run1_default_accounting_reproduces_62_35(run1, policy):
    jobs, verdicts = run1
    report = tally_core.tally(tally_jobs.run_job_dirs(jobs, "q"), policy, tally_policy.load_verdicts(verdicts))
    assert counts(report) == {"tasks": 89, "passed": 53, "failed": 32, "errored": 4, "unclassified": 0,
                              "unfinished": 0, "scored": 85}
    assert round(100 * report["pass_rate"], 2) == 62.35
    assert report["errored_breakdown"] == {"infra": 0, "final": 0, "timeout": 0, "verdict": 4}
    assert tally_core.retry_targets(report) == []  # verdicts end the retrying
    text = tally_cli.render_text(report)
    assert "| Passed | 53 | 59.6% |" in text
    assert "| Failed (scored, reward < 1, incl. AgentTimeoutError) | 32 | 36.0% |" in text
    assert "| Errored (unscored: 0 infra, 4 by verdict) | 4 | 4.5% |" in text
    assert "Pass rate excluding infra errors: 62.35% (53/85)" in text
    assert "Accounting: timeouts-scored (default)" in text


def test_run1_timeouts_unscored_reproduces_the_reference_table(run1, policy):
    jobs, verdicts = run1
    report = tally_core.tally(tally_jobs.run_job_dirs(jobs, "q"), policy, tally_policy.load_verdicts(verdicts), timeouts_unscored=True)
    assert counts(report) == {"tasks": 89, "passed": 53, "failed": 16, "errored": 20, "unclassified": 0,
                              "unfinished": 0, "scored": 69}
    assert round(100 * report["pass_rate"], 1) == 76.8
    assert report["errored_breakdown"] == {"infra": 0, "final": 0, "timeout": 16, "verdict": 4}
    text = tally_cli.render_text(report)
    assert "| Passed | 53 | 59.6% |" in text
    assert "| Failed (scored, reward < 1) | 16 | 18.0% |" in text
    assert "| Errored (unscored: 0 infra, 16 AgentTimeoutError, 4 by verdict) | 20 | 22.5% |" in text
    assert "Pass rate excluding infra errors and timeouts: 76.81% (53/69)" in text
    assert "Accounting: timeouts-unscored" in text


def test_run1_without_verdicts_the_four_are_final_errors_after_three_attempts(run1, policy):
    # The reference accepted these four as final errors after 3 attempts: MAX_TASK_RETRIES=3, the
    # default, makes the same decision with no verdicts file, and mop-up no longer retries them.
    jobs, _ = run1
    report = tally_core.tally(tally_jobs.run_job_dirs(jobs, "q"), policy)
    infra_attempts = {e["task"]: sum(1 for t in e["trials"] if t["rule"] in slots.INFRA_RULES) for e in report["per_task"]}
    assert {t for t, n in infra_attempts.items() if n >= tally_core.DEFAULT_MAX_TASK_RETRIES} == set(RUN1_INFRA)
    assert report["errored"] == 4
    assert report["errored_breakdown"] == {"infra": 0, "final": 4, "timeout": 0, "verdict": 0}
    assert report["max_task_retries"] == 3 and report["final_errors"] == sorted(RUN1_INFRA)
    assert tally_core.retry_targets(report) == []
    text = tally_cli.render_text(report)
    assert "| Errored (unscored: 0 infra, 4 final: MAX_TASK_RETRIES=3 attempts in a row were infra) | 4 | 4.5% |" in text
    assert (f"Final errors (4): 4 task(s) whose infra error survived 3 attempts in a row per open slot "
            f"(MAX_TASK_RETRIES=3): {', '.join(sorted(RUN1_INFRA))}. They count as errored, and mop-up, make "
            f"reproduce and AUTO_STOP no longer wait for them (make mopup RUN=q MAX_TASK_RETRIES=4 tries each "
            f"once more).") in text
    # One more allowed attempt (or no limit) makes them retry targets again, each with its 3 attempts.
    for limit in (4, 0):
        report = tally_core.tally(tally_jobs.run_job_dirs(jobs, "q"), policy, max_task_retries=limit)
        assert report["final_errors"] == [] and report["errored_breakdown"]["infra"] == 4
        targets = tally_core.retry_targets(report)
        assert [t["task"] for t in targets] == sorted(RUN1_INFRA)
        assert all(t["attempts"] == 3 and len(t["trials"]) == 3 for t in targets)


def test_final_error_counts_the_infra_attempts_since_the_latest_settled_one(tmp_path, policy):
    """k = 1: a settled trial resets the count; an unfinished trial neither counts nor resets it.
    k = 5: a task's open slots are final errors once its last MAX_TASK_RETRIES attempts were infra."""
    ds = tmp_path / "dataset"
    write_job(tmp_path / "jobs", "r", [
        S("streak", None, "SandboxError", finished=10), S("streak", None, "SandboxError", finished=20, attempt=1),
        S("streak", None, None, finished=None, attempt=2), S("streak", None, "SandboxError", finished=30, attempt=3),
        S("broken", None, "SandboxError", finished=10), S("broken", 1.0, finished=20, attempt=1),
        S("broken", None, "SandboxError", finished=30, attempt=2), S("broken", None, "SandboxError", finished=40, attempt=3),
    ], dataset=ds)
    report = tally_core.tally(tally_jobs.run_job_dirs(tmp_path / "jobs", "r"), policy, max_task_retries=3)
    by_task = {e["task"]: e for e in report["per_task"]}
    assert (by_task["streak"]["infra_streak"], by_task["streak"]["final_error"]) == (3, True)
    # broken passed once, so it is settled at k = 1 whatever came after; its streak is the 2 after the pass.
    assert (by_task["broken"]["outcome"], by_task["broken"]["infra_streak"], by_task["broken"]["final_error"]) == (
        "passed", 2, False)
    assert [t["task"] for t in tally_core.retry_targets(report)] == []
    assert report["final_errors"] == ["streak"]
    report = tally_core.tally(tally_jobs.run_job_dirs(tmp_path / "jobs", "r"), policy, max_task_retries=4)
    assert [t["task"] for t in tally_core.retry_targets(report)] == ["streak"]


def test_verdict_shown_as_such(run1, policy):
    jobs, verdicts = run1
    report = tally_core.tally(tally_jobs.run_job_dirs(jobs, "q"), policy, tally_policy.load_verdicts(verdicts), verdicts_path=str(verdicts))
    e = next(e for e in report["per_task"] if e["task"] == "query-optimize")
    assert (e["outcome"], e["computed_outcome"], e["rule"]) == ("errored", "errored", "verdict")
    assert e["verdict"] == "SandboxError/RemoteProtocolError on all 3 attempts; accepted as final"
    assert report["verdicts"] == str(verdicts)
    assert "| query-optimize | errored (verdict) |" in tally_cli.render_markdown(report)


# --------------------------------------------------------------------------- selection details


def test_latest_finished_at_wins_across_job_dirs_not_dir_order(tmp_path, policy):
    jobs = tmp_path / "jobs"
    # The retry job is OLDER than the main job's second attempt: timestamps decide, not dirs.
    write_job(jobs, "r", [S("t", 0.0, finished=10), S("t", 1.0, finished=300, attempt=1)], dataset=tmp_path / "ds")
    write_job(jobs, "r-retry-1", [S("t", 0.0, finished=200)], dataset=tmp_path / "ds", scoped=True)
    report = tally_core.tally(tally_jobs.run_job_dirs(jobs, "r"), policy)
    (e,) = report["per_task"]
    assert (e["outcome"], e["finished_at"], e["attempts"]) == ("passed", "2026-09-03T13:00:00Z", 3)


def test_naive_timestamp_read_as_utc_and_reported(tmp_path, policy):
    jobs = tmp_path / "jobs"
    job = write_job(jobs, "n", [S("a", 1.0, finished=10), S("b", 0.0, finished=20)], dataset=tmp_path / "ds")
    path = job / trial_name("a", "n") / "result.json"
    rewrite_result(path, finished_at="2026-09-03T10:00:00")  # no zone
    report = tally_core.tally([job], policy)
    assert next(e for e in report["per_task"] if e["task"] == "a")["finished_at"] == "2026-09-03T10:00:00Z"
    assert report["warnings"] == [f"1 result.json file(s) have a finished_at without a time zone; read as UTC: {path}"]


def test_odd_and_missing_timestamps_rank_first_and_are_reported(tmp_path, policy):
    jobs = tmp_path / "jobs"
    job = write_job(jobs, "o", [S("a", 1.0, finished=10), S("a", 0.0, finished=5, attempt=1),
                                S("b", 1.0, finished=10)], dataset=tmp_path / "ds")
    odd = job / trial_name("a", "o") / "result.json"
    rewrite_result(odd, finished_at="yesterday-ish")
    gone = job / trial_name("b", "o") / "result.json"
    rewrite_result(gone, finished_at=DELETE)
    report = tally_core.tally([job], policy)
    # a: the odd timestamp ranks below the timestamped attempt (reward 0).
    assert outcomes(report) == {"a": "failed", "b": "passed"}
    assert report["warnings"] == [
        f"{odd}: finished_at 'yesterday-ish' is not an ISO-8601 time of the years 2000-2199; this trial ranks below every timestamped attempt of its task",
        "a: scored attempts disagree (passed at (no finished_at), failed at 2026-09-03T08:05:00Z); the latest counts: failed",
        f"1 result.json file(s) lack field(s) finished_at (not harbor 0.26's TrialResult?): {gone}",
    ]


def test_tie_on_finished_at_is_broken_by_path(tmp_path, policy):
    jobs = tmp_path / "jobs"
    job = write_job(jobs, "tie", [S("t", 1.0, finished=10), S("t", 0.0, finished=10, attempt=1)],
                    dataset=tmp_path / "ds")
    names = sorted([trial_name("t", "tie"), trial_name("t", "tie", 1)])
    report = tally_core.tally([job], policy)
    (e,) = report["per_task"]
    assert e["trial_dir"] == str(job / names[-1])
    assert any(w.startswith("t: two attempts finished at the same time 2026-09-03T08:10:00Z") for w in report["warnings"])


def test_missing_schema_fields_and_reward_shapes(tmp_path, policy):
    jobs = tmp_path / "jobs"
    job = write_job(jobs, "m", [S("no-task", 1.0), S("other-key", rewards={"accuracy": 1.0}),
                                S("string-reward", rewards={"reward": 1.0})], dataset=tmp_path / "ds")
    rewrite_result(job / trial_name("no-task", "m") / "result.json", task_name=DELETE, agent_execution=DELETE)
    rewrite_result(job / trial_name("string-reward", "m") / "result.json", verifier_result={"rewards": {"reward": "1"}})
    report = tally_core.tally([job], policy)
    # The name comes back from the trial's config.json; the reward shapes give no reward.
    assert outcomes(report) == {"no-task": "passed", "other-key": "unclassified", "string-reward": "unclassified"}
    w = report["warnings"]
    assert len(w) == 3, w
    assert "verifier rewards ['accuracy'] have no 'reward' key; treated as no reward" in w[0]
    assert "verifier reward '1' is not a number; treated as no reward" in w[1]
    assert w[2].startswith("1 result.json file(s) lack field(s) task_name, agent_execution (not harbor 0.26's")


@pytest.mark.parametrize("value, year", [
    ("1990-06-01T12:00:00Z", None), ("1999-12-31T23:59:59Z", None), ("2000-01-01T00:00:00Z", 2000),
    ("2199-12-31T23:59:59Z", 2199), ("2200-01-01T00:00:00Z", None), ("2500-06-01T12:00:00Z", None),
    ("2000-01-01T00:30:00+01:00", None),  # 1999 in UTC: the guard reads the UTC year
    ("2199-12-31T23:30:00-01:00", None),  # 2200 in UTC
])
def test_a_timestamp_outside_the_years_2000_to_2199_is_no_time(value, year):
    # Reached by the guard itself (the year 1 and 9999 of the hostile files overflow before it).
    dt, naive = tally_trials.parse_timestamp(value)
    assert (dt.year if dt else None, naive) == (year, False)


def test_a_crashed_dir_whose_truncated_name_fits_two_long_tasks_joins_neither(tmp_path, policy):
    # Two tasks share their first 32 characters: a crashed dir named by those 32 alone could be
    # either's, so it stays under its own (truncated) name rather than being guessed into one.
    one, two = "a-very-long-task-name-beyond-32-characters", "a-very-long-task-name-beyond-32-chars-too"
    assert one[:32] == two[:32]
    jobs = tmp_path / "jobs"
    job = write_job(jobs, "L", [S(one, 0.0, finished=10), S(two, 1.0, finished=11), S(one, finished=None, attempt=1)],
                    dataset=tmp_path / "ds")
    (job / trial_name(one, "L", 1) / "config.json").unlink()
    report = tally_core.tally([job], policy)
    assert sorted((e["task"], len(e["trials"])) for e in report["per_task"]) == [
        (one[:32].rstrip("-"), 1), (one, 1), (two, 1)]


def test_long_task_name_crashed_dir_joins_its_task(tmp_path, policy):
    long = "a-very-long-task-name-beyond-32-characters"
    jobs = tmp_path / "jobs"
    job = write_job(jobs, "L", [S(long, 0.0, finished=10), S(long, finished=None, attempt=1)], dataset=tmp_path / "ds")
    crashed = job / trial_name(long, "L", 1)
    (crashed / "config.json").unlink()  # only the truncated dir name is left to go on
    report = tally_core.tally([job], policy)
    (e,) = report["per_task"]
    assert e["task"] == long and len(e["trials"]) == 2


def test_tokens_and_agent_time_totals(tmp_path, policy):
    jobs = tmp_path / "jobs"
    job = write_job(jobs, "tok", [
        S("a", None, "SandboxError", finished=10, tokens=(100, 40, 7), agent_minutes=10),
        S("a", 1.0, finished=100, attempt=1, tokens=(1000, 400, 70), agent_minutes=30),
        S("b", 0.0, finished=50, tokens=(None, None, None), agent_minutes=5),
        S("c", 0.0, finished=60, tokens=None, agent_minutes=1),
    ], dataset=tmp_path / "ds")
    report = tally_core.tally([job], policy)
    assert report["tokens"] == {"input": 1000, "cache": 400, "output": 70}
    assert report["tokens_all_trials"] == {"input": 1100, "cache": 440, "output": 77}
    assert report["trials_without_tokens"] == 2
    assert report["agent_seconds"] == 36 * 60
    assert report["agent_seconds_all_trials"] == 46 * 60


def test_infra_after_a_settled_attempt_no_longer_hides_it_and_is_warned(tmp_path, policy):
    # Changed with attempt slots (docs/design.md decision 13): this used to count the later
    # infra error (task errored, retried by mop-up); now the settled attempt fills the slot.
    jobs = tmp_path / "jobs"
    job = write_job(jobs, "w", [S("t", 1.0, finished=10), S("t", None, "SandboxError", finished=20, attempt=1)],
                    dataset=tmp_path / "ds")
    report = tally_core.tally([job], policy)
    assert outcomes(report) == {"t": "passed"}
    assert report["per_task"][0]["trial_dir"] == str(job / trial_name("t", "w"))
    assert report["per_task"][0]["attempts"] == 2
    assert tally_core.retry_targets(report) == []
    assert report["warnings"] == [
        "t: an infra error (SandboxError) finished after the settled attempt (passed); the settled attempt counts "
        "and the task is not retried (an infra error no longer hides a settled attempt: docs/design.md decision 13)"]


def test_planned_tasks_never_started_are_reported(tmp_path, policy):
    jobs = tmp_path / "jobs"
    job = write_job(jobs, "p", [S("a", 1.0), S("b", 1.0), S("c", 1.0)], dataset=tmp_path / "ds")
    import shutil
    shutil.rmtree(job / trial_name("c", "p"))
    report = tally_core.tally([job], policy)
    assert report["warnings"] == [
        f"{job}/result.json plans 3 task(s) but only 2 have a trial dir: 1 never started (resume the job)"]


def test_unrelated_dir_in_job_is_skipped_with_a_warning(tmp_path, policy):
    jobs = tmp_path / "jobs"
    job = write_job(jobs, "u", [S("a", 1.0)], dataset=tmp_path / "ds")
    (job / "notes").mkdir()
    report = tally_core.tally([job], policy)
    assert report["tasks"] == 1
    assert report["warnings"] == [f"{job}/notes: not a trial dir (no result.json or config.json); skipped"]


# --------------------------------------------------------------------------- policy and verdicts


def test_policy_file_lists(policy):
    assert policy.pass_threshold == 1.0
    for name in ("SandboxError", "RemoteProtocolError", "ReadTimeout", "ReadError", "ConnectError", "ConnectTimeout",
                 "InternalServerError", "CancelledError", "NetworkConnectionError", "ApiInternalServerError",
                 "ApiOverloadedError", "ApiConnectionClosedError"):
        assert name in policy.infra_types
    assert policy.timeout_types == {"AgentTimeoutError"}
    assert {"AgentTimeoutError", "ContextWindowExceededError", "ContextLengthExceededError",
            "OutputTokenExceededError"} <= policy.limit_types
    assert "AgentTimeoutError" not in policy.infra_types
    assert policy.nonzero_exit_types == {"NonZeroAgentExitCodeError"}
    # The sides: the model server's types and the interruptions; the rest of infra is the sandboxes'.
    assert {"InternalServerError", "APIConnectionError", "Timeout", "ApiInternalServerError"} <= policy.server_types
    assert policy.interrupted_types == {"CancelledError"}
    assert not {"SandboxError", "RemoteProtocolError", "ReadTimeout"} & (policy.server_types | policy.interrupted_types)


def test_every_infra_error_has_one_side(policy):
    def side(etype, msg=""):
        t = tally_trials.Trial("d/x__1", "d", "x", "finished", exception_type=etype, exception_message=msg)
        t.outcome, t.rule, t.reason = tally_policy.classify(t, policy)
        return tally_policy.infra_side(t, policy)

    assert [side(e) for e in ("SandboxError", "ReadTimeout", "InternalServerError", "Timeout", "CancelledError")] == [
        "sandbox", "sandbox", "server", "server", "interrupted"]
    # An infra message (a broken task image) and a bare non-zero exit are the sandbox's.
    assert side("NonZeroAgentExitCodeError", "E: Release file for http://x is expired") == "sandbox"
    assert side("NonZeroAgentExitCodeError", "exit 1") == "sandbox"


@pytest.mark.parametrize("text,message", [
    ("infra:\n  typez: [X]\n", "infra has unknown key(s) ['typez']"),
    ("infraa:\n  types: [X]\n", "unknown key(s) ['infraa']"),
    ("infra:\n  types: [X]\nlimits:\n  types: [X]\n", "X is listed in both infra and limits"),
    ("infra:\n  message_patterns:\n    - pattern: '('\n      why: broken\n", "is not a valid regex"),
    ("infra:\n  message_patterns:\n    - pattern: 'x'\n", "must be a mapping with 'pattern' and 'why'"),
    ("pass_threshold: 2\n", "pass_threshold must be a number in (0, 1]"),
    ("infra:\n  types: [AgentTimeoutError]\ntimeouts:\n  types: [AgentTimeoutError]\n", "are also infra types"),
    ("- a list\n", "expected a mapping"),
    ("infra: [\n", "cannot read it as YAML"),
    ("infra:\n  types: [X]\n  server_types: [Y]\n", "infra.server_types lists ['Y'], which infra.types does not"),
    ("infra:\n  types: [X]\n  server_types: [X]\n  interrupted_types: [X]\n",
     "['X'] are in both infra.server_types and infra.interrupted_types"),
    ("infra:\n  types: [X]\n  interrupted_types: X\n", "infra.interrupted_types must be a list of exception type names"),
])
def test_bad_policy_is_named(tmp_path, text, message):
    p = tmp_path / "policy.yaml"
    p.write_text(text)
    with pytest.raises(tally_jobs.TallyError) as e:
        tally_policy.load_policy(p)
    assert message in str(e.value) and str(p) in str(e.value)


@pytest.mark.parametrize("text,message", [
    ("verdicts:\n  t:\n    outcome: errored\n", "give exactly `outcome:` and `reason:`"),
    ("verdicts:\n  t:\n    outcome: skipped\n    reason: x\n", "outcome must be passed, failed or errored"),
    ("verdicts:\n  t:\n    outcome: errored\n    reason: ''\n", "a verdict needs a reason"),
    ("t: errored\n", "expected one top-level key `verdicts:`"),
])
def test_bad_verdicts_are_named(tmp_path, text, message):
    p = tmp_path / "v.yaml"
    p.write_text(text)
    with pytest.raises(tally_jobs.TallyError, match=message.replace("(", r"\(").replace("`", ".")):
        tally_policy.load_verdicts(p)


def test_verdict_for_unknown_task_is_warned(mixed, policy, tmp_path):
    report = tally_core.tally(tally_jobs.run_job_dirs(mixed, "fx"), policy, {"nope": tally_policy.Verdict("errored", "x")})
    assert "verdict for nope ignored: no trial of that task in these job dirs" in report["warnings"]


# --------------------------------------------------------------------------- CLI

TOP_FIELDS = {
    "run", "accounting", "policy", "verdicts", "pass_threshold", "job_dirs", "tasks", "passed", "failed", "errored",
    "unclassified", "unfinished", "scored", "pass_rate", "errored_breakdown", "exceptions", "exceptions_all_trials",
    "infra_by_side", "tokens", "tokens_all_trials", "trials_without_tokens", "agent_seconds", "agent_seconds_all_trials",
    "trial_dirs", "retried_in_run", "max_task_retries", "final_errors", "warnings", "unreadable", "per_task",
}
TASK_FIELDS = {"task", "outcome", "computed_outcome", "rule", "reason", "reward", "exception_type",
               "exception_message", "finished_at", "trial_dir", "job_dir", "attempts", "verdict", "infra_streak",
               "final_error", "trials", "settled", "infra", "open_slots"}
TRIAL_FIELDS = {"trial_dir", "job_dir", "finished_at", "reward", "exception_type", "outcome", "rule", "retried",
                "settled", "infra"}


def run_cli(*args):
    return CliRunner().invoke(tally_cli.cli, [str(a) for a in args])


def test_cli_json_fields(mixed):
    r = run_cli("tally", "--jobs-dir", mixed, "--job-name", "fx", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert set(doc) == TOP_FIELDS
    assert doc["run"] == "fx" and doc["policy"] == str(tally_policy.DEFAULT_POLICY) and doc["verdicts"] is None
    assert doc["tasks"] == 22 and doc["pass_rate"] == 6 / 14
    assert set(doc["tokens"]) == {"input", "cache", "output"}
    assert [e["task"] for e in doc["per_task"]] == sorted(EXPECTED)
    for e in doc["per_task"]:
        assert set(e) == TASK_FIELDS
        assert e["outcome"] in tally_core.OUTCOMES
        for t in e["trials"]:
            assert set(t) == TRIAL_FIELDS


def test_cli_text_and_markdown(mixed, tmp_path):
    md = tmp_path / "out.md"
    r = run_cli("tally", "--jobs-dir", mixed, "--job-name", "fx", "--timeouts-unscored", "--run-name", "label",
                "--markdown", md)
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("Run: label\nAccounting: timeouts-unscored")
    assert "| Outcome | Count | % of 22 |" in r.stdout
    assert "Pass rate excluding infra errors and timeouts: 41.67% (5/12)" in r.stdout
    assert f"tally: wrote {md}" in r.stderr
    text = md.read_text()
    assert text.startswith("# label: per-task outcomes\n")
    assert f"| t-nested | passed | 1 | - | 2 | 2026-09-04T17:20:00Z | fx-retry-2/{trial_name('t-nested', 'fx-retry-2')} |" in text


def test_cli_retry_targets_json_and_text(mixed, tmp_path):
    r = run_cli("retry-targets", "--jobs-dir", mixed, "--job-name", "fx", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert set(doc) == {"run", "policy", "infra_types", "job_dirs", "tasks"}
    assert doc["infra_types"] == list(tally_policy.load_policy().infra_types)
    assert [t["task"] for t in doc["tasks"]] == ["t-cancel", "t-corrupt", "t-crash-only", "t-nz-apt", "t-nz-bare",
                                                 "t-overloaded", "t-still-infra"]
    assert all(set(t) == TASK_FIELDS | {"missing"} and t["missing"] == 1 for t in doc["tasks"])
    v = tmp_path / "v.yaml"
    v.write_text("verdicts:\n  t-still-infra:\n    outcome: errored\n    reason: accepted after 2 attempts\n")
    r = run_cli("retry-targets", "--jobs-dir", mixed, "--job-name", "fx", "--verdicts", v)
    lines = r.stdout.splitlines()
    assert [line.split("\t")[0] for line in lines] == ["t-cancel", "t-corrupt", "t-crash-only", "t-nz-apt",
                                                      "t-nz-bare", "t-overloaded"]
    assert lines[0] == f"t-cancel\terrored\tCancelledError\t{mixed / 'fx' / trial_name('t-cancel', 'fx')}"


def test_cli_policy_queries():
    r = run_cli("policy", "infra-types")
    assert r.exit_code == 0
    assert r.stdout.splitlines() == list(tally_policy.load_policy().infra_types)
    assert r.stdout.splitlines()[0] == "SandboxError"
    r = run_cli("policy", "check")
    assert r.exit_code == 0 and "OK (" in r.stdout


def test_cli_job_dirs(mixed):
    r = run_cli("job-dirs", "--jobs-dir", mixed, "--job-name", "fx")
    assert r.stdout.splitlines() == [str(mixed / "fx"), str(mixed / "fx-retry-1"), str(mixed / "jobs" / "fx-retry-2")]
    r = run_cli("job-dirs", "--jobs-dir", mixed, "--job-name", "fx", "--next-retry")
    assert r.stdout == "fx-retry-3\n"


def test_cli_missing_jobs_dir(tmp_path):
    r = run_cli("tally", "--jobs-dir", tmp_path / "gone", "--job-name", "fx")
    assert r.exit_code == 1
    assert f"Error: jobs dir not found: {tmp_path / 'gone'} (pass the --jobs-dir" in r.stderr


def test_cli_no_job_dir_for_the_name(mixed):
    r = run_cli("tally", "--jobs-dir", mixed, "--job-name", "typo")
    assert r.exit_code == 1
    assert f"Error: no job dir for job name 'typo' under {mixed} (looked for typo, typo-shard-<i> and " \
           f"typo-retry-<N>, flat and under jobs/): check JOB_NAME/JOBS_DIR in the run file" in r.stderr


def test_cli_missing_explicit_job_dir_and_trial_dir(mixed, tmp_path):
    r = run_cli("tally", tmp_path / "nope")
    assert r.exit_code == 1 and f"job dir not found: {tmp_path / 'nope'}" in r.stderr
    trial = mixed / "fx" / trial_name("t-pass", "fx")
    r = run_cli("tally", trial)
    assert r.exit_code == 1 and f"is a trial dir, not a job dir: pass its parent {mixed / 'fx'}" in r.stderr


def test_cli_usage_errors():
    r = run_cli("tally")
    assert r.exit_code == 1 and "no job dirs given" in r.stderr
    r = run_cli("tally", "--jobs-dir", "x")
    assert r.exit_code == 1 and "--jobs-dir and --job-name go together" in r.stderr
    r = run_cli("tally", "--bogus")
    assert r.exit_code == 2


def test_cli_bad_policy_and_verdicts_files(mixed, tmp_path):
    r = run_cli("tally", "--jobs-dir", mixed, "--job-name", "fx", "--policy", tmp_path / "none.yaml")
    assert r.exit_code == 1 and "file not found" in r.stderr and "none.yaml" in r.stderr
    r = run_cli("tally", "--jobs-dir", mixed, "--job-name", "fx", "--verdicts", tmp_path / "none.yaml")
    assert r.exit_code == 1 and "check the --verdicts path" in r.stderr


def test_cli_empty_run_says_so(tmp_path):
    (tmp_path / "jobs" / "e").mkdir(parents=True)
    (tmp_path / "jobs" / "e" / "config.json").write_text("{}")
    r = run_cli("tally", "--jobs-dir", tmp_path / "jobs", "--job-name", "e")
    assert r.exit_code == 3
    assert "EMPTY RUN: the job dirs hold no trial dirs yet" in r.stdout
    assert "| Outcome | Count | % of 0 |" in r.stdout
    assert "Pass rate excluding infra errors: n/a (0 scored tasks)" in r.stdout
    assert "tally: empty run: no trial dirs in" in r.stderr
    r = run_cli("tally", "--jobs-dir", tmp_path / "jobs", "--job-name", "e", "--json")
    assert r.exit_code == 3 and json.loads(r.stdout)["tasks"] == 0 and json.loads(r.stdout)["pass_rate"] is None


def test_max_task_retries_default_is_the_settings_catalogues():
    # The tools' default (a tally run without the setting) and env/defaults.env's must be one value.
    line = next(line for line in (REPO / "env" / "defaults.env").read_text().splitlines()
                if line.startswith("MAX_TASK_RETRIES="))
    assert int(line.split("=", 1)[1].split()[0]) == tally_core.DEFAULT_MAX_TASK_RETRIES
