"""make submission: the leaderboard's layout, metadata.yaml, the counted trials of every job dir, the check.

The bundled examples go through make itself: example-terminus2 and example-leaderboard are
refused (open slots, trajectories, a ×4 multiplier) with nothing written; the finished
example-leaderboard-complete is built with exactly its 6 tasks × 5 counted trial dirs (worked out
here from the result.json files), metadata.yaml word for word, every copied file byte-identical
to the run's, and check-submission's verdict printed and in the exit code. The run's own job
dirs are hashed before and after. A job dir that meets the rules is built and accepted.
Refusals change nothing. The slot rules on fixtures: tests/test_submission_slots.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from tools.hub import submission
from tools.hub import submission_meta

REPO = Path(__file__).resolve().parent.parent
EXAMPLE_JOBS = REPO / "examples" / "jobs"
EXAMPLE_JOB_DIRS = ["example-terminus2-tb21", "example-terminus2-tb21-retry-1"]
SUBMISSION = Path("submissions/terminal-bench/2.1/Terminus-2__Qwen3.8-27B-FP8")
EXPECTED_METADATA = """\
# Terminal-Bench leaderboard metadata (format: https://huggingface.co/datasets/harborframework/terminal-bench-2-leaderboard, README).
# Written by make submission from the run's settings.
agent_url: https://github.com/harbor-framework/harbor
agent_display_name: Terminus 2
agent_org_display_name: Terminal-Bench
models:
- model_name: Qwen/Qwen3.8-27B-FP8
  model_provider: openai
  model_display_name: Qwen3.8-27B-FP8
  model_org_display_name: Qwen
"""


def tree_hash(root: Path) -> dict[str, str]:
    """Every entry under root: a file's sha256, a link's target, a dir's mode and mtime."""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(dirpath, name)
            st = p.lstat()
            if p.is_symlink():
                out[str(p)] = "link:" + os.readlink(p)
            elif p.is_dir():
                out[str(p)] = f"dir:{st.st_mode}:{st.st_mtime_ns}"
            else:
                out[str(p)] = f"{hashlib.sha256(p.read_bytes()).hexdigest()}:{st.st_mode}:{st.st_mtime_ns}"
    return out


def make(*args: str, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("RUN", "DRY_RUN", "OUT", "MAKEFLAGS", "MFLAGS")}
    env.update(env_extra or {})
    return subprocess.run(["make", "-C", str(REPO), "--no-print-directory", *args], capture_output=True,
                          text=True, env=env, timeout=120)


def test_the_example_is_refused_and_nothing_is_written(tmp_path):
    """example-terminus2 (k = 1, a ×4 multiplier, slots still open, non-ATIF trajectories): refused
    before anything is written, each problem named with its fix; the run's dirs untouched."""
    sources = [EXAMPLE_JOBS / job for job in EXAMPLE_JOB_DIRS]
    before = [tree_hash(src) for src in sources]
    out = tmp_path / "out"
    proc = make("submission", "RUN=example-terminus2", f"OUT={out}", f"STATE_ROOT={tmp_path / 'state'}")
    assert proc.returncode != 0, proc.stdout + proc.stderr
    # The verdict on stdout, word for word make check-submission's; why nothing was written on stderr.
    check = make("check-submission", "RUN=example-terminus2")
    assert proc.stdout == check.stdout[check.stdout.index("run example-terminus2:"):]
    lines = proc.stdout.splitlines()
    assert lines[0] == "run example-terminus2: does NOT meet the Terminal-Bench leaderboard rules (6 problems):"
    assert lines[1] == ("  - 4 of 13 tasks have open attempt slots (4 of 13 slots have no settled trial): "
                        "feal-linear-cryptanalysis (0 of 1 settled), qemu-startup (0 of 1 settled), query-optimize "
                        "(0 of 1 settled), schemelike-metacircular-eval (0 of 1 settled); fill them with make mopup "
                        "RUN=<your run> (run example-terminus2 is a bundled example, never mopped up: make submission "
                        "RUN=example-leaderboard-complete shows a bundled run with every slot filled)")
    assert lines[2].startswith("  - 4 passing trials lack a valid ATIF agent/trajectory.json")
    assert ("examples/jobs/example-terminus2-tb21/fix-git__dafc564/ (not ATIF: Field required at agent, and 1 more)"
            in lines[2])
    assert ("  - examples/jobs/example-terminus2-tb21/config.json: agent_timeout_multiplier is 4; the "
            "leaderboard requires 1.0 (set AGENT_TIMEOUT_MULTIPLIER=1 in runs/example-terminus2.env)") in lines
    assert ("  - 9 submitted trials' config.json (e.g. examples/jobs/example-terminus2-tb21/"
            "build-pov-ray__cfaa0cf/config.json): agent_timeout_multiplier is 4; the leaderboard requires 1.0 "
            "(set AGENT_TIMEOUT_MULTIPLIER=1 in runs/example-terminus2.env)") in lines
    assert lines[-1].startswith("  - 13 of 13 tasks have fewer than 5 valid trials: build-pov-ray (1), ")
    assert proc.stderr.splitlines()[:3] == [
        "submission: refused, nothing was written: the leaderboard's resolution rate is passed over every trial "
        "submitted, so each task must hold exactly its 1 slot-filling trial, as the rules want them",
        "submission: the run covers 13 of 13 tasks of its dataset (as examples/jobs/example-terminus2-tb21/"
        "lock.json lists them)",
        "submission: make submission RUN=example-terminus2 DRY_RUN=1 lists every trial dir it would submit or leave "
        "out, and why",
    ]
    assert not out.exists()
    assert [tree_hash(src) for src in sources] == before


def test_the_leaderboard_example_is_refused_while_mopup_has_slots_to_fill(tmp_path):
    """The bundled k = 5 run: cobol-modernization has two errored slots, so nothing is written."""
    sources = [EXAMPLE_JOBS / job for job in ("example-leaderboard-tb21", "example-leaderboard-tb21-retry-1")]
    before = [tree_hash(src) for src in sources]
    out = tmp_path / "out"
    proc = make("submission", "RUN=example-leaderboard", f"OUT={out}", f"STATE_ROOT={tmp_path / 'state'}")
    assert proc.returncode != 0, proc.stdout + proc.stderr
    # Refused for its open slots alone, the refusal it is built to show.
    assert proc.stdout.splitlines() == [
        "run example-leaderboard: does NOT meet the Terminal-Bench leaderboard rules (1 problem):",
        "  - 1 of 6 tasks has open attempt slots (2 of 30 slots have no settled trial): cobol-modernization "
        "(3 of 5 settled); fill them with make mopup RUN=<your run> (run example-leaderboard is a bundled example, "
        "never mopped up: make submission RUN=example-leaderboard-complete shows a bundled run with every slot filled)"]
    assert ("submission: the dataset's coverage cannot be checked: no job dir records the dataset's whole task "
            "list (a lock.json of a job that ran it unfiltered); the run has 6 tasks") in proc.stderr.splitlines()
    assert not out.exists()
    assert [tree_hash(src) for src in sources] == before


COMPLETE_JOBS = ["example-leaderboard-complete-tb21", "example-leaderboard-complete-tb21-retry-1",
                 "example-leaderboard-complete-tb21-retry-2"]


def counted_by_hand(jobs: list[Path], k: int = 5) -> tuple[set[Path], set[Path]]:
    """(the trial dirs a submission holds, those it leaves out), worked out from the result.json
    files alone: an infra exception (the example's SandboxError and ReadTimeout) or no result.json
    is unsettled; per task the latest k settled by finished_at count, older ones are re-rolls."""
    settled: dict[str, list[tuple[str, Path]]] = {}
    every = set()
    for job in jobs:
        for trial in (t for t in job.iterdir() if t.is_dir()):
            every.add(trial)
            if not (trial / "result.json").exists():
                continue
            res = json.loads((trial / "result.json").read_text())
            if (res.get("exception_info") or {}).get("exception_type") in ("SandboxError", "ReadTimeout"):
                continue
            settled.setdefault(res["task_name"], []).append((res["finished_at"], trial))
    counted = {t for group in settled.values() for _, t in sorted(group)[-k:]}
    return counted, every - counted


def test_the_complete_example_is_accepted_with_exactly_its_counted_trials(tmp_path):
    sources = [EXAMPLE_JOBS / job for job in COMPLETE_JOBS]
    before = [tree_hash(src) for src in sources]
    out = tmp_path / "out"
    proc = make("submission", "RUN=example-leaderboard-complete", f"OUT={out}", f"STATE_ROOT={tmp_path / 'state'}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    dest = out / SUBMISSION
    assert proc.stdout == (f"submission {dest}: meets the Terminal-Bench leaderboard rules "
                           "(6 tasks, 30 trials, at least 5 valid trials per task).\n")
    counted, left_out = counted_by_hand(sources)
    assert len(counted) == 6 * 5 and len(left_out) == 5
    submitted = {EXAMPLE_JOBS / t.parent.name / t.name for job in COMPLETE_JOBS for t in (dest / job).iterdir()
                 if t.is_dir()}
    assert submitted == counted
    assert sorted(p.name for p in dest.iterdir()) == sorted(["metadata.yaml", *COMPLETE_JOBS])
    # Each job's own files and each counted trial's files, byte for byte; nothing else.
    for job in COMPLETE_JOBS:
        src, dst = EXAMPLE_JOBS / job, dest / job
        want = sorted(str(p.relative_to(src)) for p in src.rglob("*")
                      if p.is_file() and not any(t in p.parents for t in left_out))
        assert want == sorted(str(p.relative_to(dst)) for p in dst.rglob("*") if p.is_file())
        for rel in want:
            assert (src / rel).read_bytes() == (dst / rel).read_bytes(), rel
    assert (dest / "metadata.yaml").read_text() == EXPECTED_METADATA
    # One line per left-out trial, each with why.
    said = [line for line in proc.stderr.splitlines() if line.startswith("submission: left out ")]
    assert sorted(line.split(" ", 3)[3].split("/: ")[0] for line in said) == sorted(
        str(t.relative_to(REPO)) for t in left_out)
    assert (f"submission: built {dest}/ (metadata.yaml, 3 job dirs, 30 trial dirs: 6 tasks × 5 attempts)"
            in proc.stderr.splitlines())
    assert ("submission: the run covers 6 of 6 tasks of its dataset (as examples/jobs/"
            "example-leaderboard-complete-tb21/lock.json lists them)") in proc.stderr.splitlines()
    # The headline is the board's own figure over what the tree holds: passed / (tasks × k), exactly.
    passed = sum(json.loads((t / "result.json").read_text())["verifier_result"]["rewards"]["reward"] == 1.0
                 for t in counted)
    assert (f"submission: Leaderboard resolution rate: {100 * passed / 30:.2f}% ({passed} passed of 30 trials = "
            f"6 tasks × 5; errored and open slots count as not passed), 95% interval ") in proc.stderr
    assert "PROVISIONAL" not in proc.stderr
    assert [tree_hash(src) for src in sources] == before


def test_a_job_of_another_model_under_the_run_s_name_is_refused_and_nothing_is_written(tmp_path):
    """The complete example served with another MODEL (a run file copied from it, its JOB_NAME kept):
    its job dirs are another run's, so none is submitted as this one's, dry run or not."""
    sources = [EXAMPLE_JOBS / job for job in COMPLETE_JOBS]
    before = [tree_hash(src) for src in sources]
    out = tmp_path / "out"
    for dry in ("DRY_RUN=0", "DRY_RUN=1"):
        proc = make("submission", "RUN=example-leaderboard-complete", "MODEL=Other/Model-7B", f"OUT={out}", dry,
                    f"STATE_ROOT={tmp_path / 'state'}")
        assert proc.returncode == 2, proc.stdout + proc.stderr  # make's, for the script's exit 1
        assert proc.stderr.startswith(
            f"Error: examples/jobs/{COMPLETE_JOBS[0]} ran model 'openai/Qwen/Qwen3.8-27B-FP8' (its config.json), "
            f"not the run's MODEL Other/Model-7B; ")
        assert ("another run's job under this run's job name, so its trials are not this run's. Give this run its "
                "own JOB_NAME") in proc.stderr
        assert not out.exists() and not (tmp_path / "state").exists()
    assert [tree_hash(src) for src in sources] == before


def test_dry_run_lists_what_it_would_write_and_writes_nothing(tmp_path):
    out = tmp_path / "out"
    dest = out / SUBMISSION
    proc = make("submission", "RUN=example-leaderboard-complete", f"OUT={out}", "DRY_RUN=1",
                f"STATE_ROOT={tmp_path / 'state'}")
    assert proc.returncode == 0, proc.stderr
    assert f"would create {dest}/" in proc.stdout
    assert "    agent_display_name: Terminus 2" in proc.stdout
    lines = proc.stdout.splitlines()
    for job, n in zip(COMPLETE_JOBS, (25, 3, 2)):
        assert f"would copy examples/jobs/{job}/ to {dest / job}/ ({n} trial dirs and the job's own files)" in lines
    assert "would submit 30 trial dirs: 6 tasks × 5 attempts" in lines
    assert sum(line.startswith("left out ") for line in lines) == 5
    assert not out.exists()
    assert not (tmp_path / "state").exists()


def test_a_dry_run_of_a_refused_run_prints_the_refusal_and_exits_0(tmp_path):
    """A dry run was asked what would happen: it says, writes nothing, and exits 0 (tests/dry-run.bats)."""
    out = tmp_path / "out"
    proc = make("submission", "RUN=example-leaderboard", f"OUT={out}", "DRY_RUN=1", f"STATE_ROOT={tmp_path / 'state'}")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert ("would be refused, writing nothing: the leaderboard's resolution rate is passed over every trial "
            "submitted, so each task must hold exactly its 5 slot-filling trials, as the rules want them") in lines
    assert ("  - 1 of 6 tasks has open attempt slots (2 of 30 slots have no settled trial): cobol-modernization "
            "(3 of 5 settled); fill them with make mopup RUN=<your run> (run example-leaderboard is a bundled "
            "example, never mopped up: make submission RUN=example-leaderboard-complete shows a bundled run with "
            "every slot filled)") in lines
    assert not any(line.startswith("would build it") for line in lines)
    assert not out.exists()


def valid_job(root: Path, name: str = "good-job", trials: int = 5) -> Path:
    """A job dir that meets the rules: multiplier 1, k = `trials`, one task with `trials` valid
    results (each a copy of a passing trial of the finished bundled example, harbor's own files,
    its ATIF trajectory included)."""
    src = EXAMPLE_JOBS / "example-leaderboard-complete-tb21" / "fix-git__baaab07"
    job = root / name
    job.mkdir(parents=True)
    (job / "config.json").write_text(json.dumps({"job_name": name, "n_attempts": trials,
                                                 "agent_timeout_multiplier": 1.0}))
    for i in range(trials):
        shutil.copytree(src, job / f"fix-git__{i:07x}")
    return job


def build_args(jobs_dir: Path, job_name: str, out: Path, *extra: str) -> list[str]:
    return ["build", "--jobs-dir", str(jobs_dir), "--job-name", job_name, "--out", str(out),
            "--agent", "terminus-2", "--model", "Qwen/Qwen3.8-27B-FP8",
            "--dataset-repo", "https://huggingface.co/datasets/harborframework/terminal-bench-2.0", *extra]


def test_a_run_that_meets_the_rules_is_accepted(tmp_path):
    valid_job(tmp_path / "jobs")
    result = CliRunner().invoke(submission.cli, build_args(tmp_path / "jobs", "good-job", tmp_path / "out"))
    assert result.exit_code == 0, result.output
    dest = tmp_path / "out/submissions/terminal-bench/2.0/Terminus-2__Qwen3.8-27B-FP8"
    assert "meets the Terminal-Bench leaderboard rules (1 task, 5 trials" in result.output
    assert sorted(p.name for p in (dest / "good-job").iterdir()) == ["config.json"] + [f"fix-git__{i:07x}" for i in range(5)]


def test_four_trials_are_built_and_rejected(tmp_path):
    valid_job(tmp_path / "jobs", trials=4)
    result = CliRunner().invoke(submission.cli, build_args(tmp_path / "jobs", "good-job", tmp_path / "out"))
    assert result.exit_code == 1
    assert "fix-git (4)" in result.output
    assert (tmp_path / "out/submissions/terminal-bench/2.0/Terminus-2__Qwen3.8-27B-FP8/good-job").is_dir()


def test_settings_win_over_what_is_derived(tmp_path):
    valid_job(tmp_path / "jobs")
    result = CliRunner().invoke(submission.cli, build_args(
        tmp_path / "jobs", "good-job", tmp_path / "out", "--agent-display-name", "My Agent: v2",
        "--agent-org-display-name", "Us", "--agent-url", "https://example.org/agent",
        "--model-display-name", "Qwen 3.8", "--model-org-display-name", "Alibaba", "--model-provider", "hf",
        "--version", "2.0"))
    assert result.exit_code == 0, result.output
    meta = (tmp_path / "out/submissions/terminal-bench/2.0/My-Agent-v2__Qwen-3.8/metadata.yaml").read_text()
    import yaml
    assert yaml.safe_load(meta) == {
        "agent_url": "https://example.org/agent", "agent_display_name": "My Agent: v2",
        "agent_org_display_name": "Us", "models": [{"model_name": "Qwen/Qwen3.8-27B-FP8", "model_provider": "hf",
                                                    "model_display_name": "Qwen 3.8", "model_org_display_name": "Alibaba"}]}


def record_provider(job: Path, providers: list) -> None:
    """Rewrite each trial's agent_info.model_info.provider, in trial order, as harbor records it."""
    for trial, provider in zip(sorted(p for p in job.iterdir() if p.is_dir()), providers, strict=True):
        result = json.loads((trial / "result.json").read_text())
        result["agent_info"]["model_info"]["provider"] = provider
        (trial / "result.json").write_text(json.dumps(result))


def built_metadata(tmp_path: Path, dir_name: str) -> dict:
    import yaml
    return yaml.safe_load((tmp_path / "out/submissions/terminal-bench/2.0" / dir_name / "metadata.yaml").read_text())


def test_a_claude_code_run_s_metadata_says_what_its_trials_record(tmp_path):
    """claude-code calls the model through the engine's Anthropic route, so harbor records provider
    anthropic in every trial: metadata.yaml says so, and names the agent as its authors do."""
    record_provider(valid_job(tmp_path / "jobs"), ["anthropic"] * 5)
    args = build_args(tmp_path / "jobs", "good-job", tmp_path / "out")
    args[args.index("terminus-2")] = "claude-code"
    result = CliRunner().invoke(submission.cli, args)
    assert result.exit_code == 0, result.output
    assert built_metadata(tmp_path, "Claude-Code__Qwen3.8-27B-FP8") == {
        "agent_url": "https://github.com/anthropics/claude-code", "agent_display_name": "Claude Code",
        "agent_org_display_name": "Anthropic", "models": [{"model_name": "Qwen/Qwen3.8-27B-FP8",
                                                           "model_provider": "anthropic",
                                                           "model_display_name": "Qwen3.8-27B-FP8",
                                                           "model_org_display_name": "Qwen"}]}


@pytest.mark.parametrize("providers, expected", [
    ([None] * 5, "openai"),                            # no trial records one: the default
    (["openai", None, None, None, None], "openai"),    # one that does is enough
])
def test_the_provider_falls_back_to_openai_only_when_no_trial_records_one(tmp_path, providers, expected):
    record_provider(valid_job(tmp_path / "jobs"), providers)
    result = CliRunner().invoke(submission.cli, build_args(tmp_path / "jobs", "good-job", tmp_path / "out"))
    assert result.exit_code == 0, result.output
    assert built_metadata(tmp_path, "Terminus-2__Qwen3.8-27B-FP8")["models"][0]["model_provider"] == expected


@pytest.mark.parametrize("providers, why, then", [
    (["openai", "anthropic", "openai", "openai", "openai"],
     "the run's trials record different model providers: anthropic ({job}/fix-git__0000001), "
     "openai ({job}/fix-git__0000000); set MODEL_PROVIDER to the one metadata.yaml should say", 0),
    (["openai", "open\nai", "openai", "openai", "openai"],
     "{job}/fix-git__0000001/result.json records model provider 'open\\nai', not a provider's name: "
     "set MODEL_PROVIDER", 0),
    # Not a string: harbor's own TrialResult refuses that trial too, so the tree built is rejected.
    (["openai", 7, "openai", "openai", "openai"],
     "{job}/fix-git__0000001/result.json records model provider 7, not a provider's name: set MODEL_PROVIDER", 1),
])
def test_trials_that_disagree_on_the_provider_are_refused_unless_it_is_set(tmp_path, providers, why, then):
    job = valid_job(tmp_path / "jobs")
    record_provider(job, providers)
    result = CliRunner().invoke(submission.cli, build_args(tmp_path / "jobs", "good-job", tmp_path / "out"))
    assert result.exit_code == 1
    assert why.format(job=job) in result.output
    assert not (tmp_path / "out").exists()
    # MODEL_PROVIDER says which: the trials are not asked.
    result = CliRunner().invoke(submission.cli, build_args(tmp_path / "jobs", "good-job", tmp_path / "out",
                                                           "--model-provider", "openai"))
    assert result.exit_code == then, result.output
    assert built_metadata(tmp_path, "Terminus-2__Qwen3.8-27B-FP8")["models"][0]["model_provider"] == "openai"


def test_an_existing_submission_is_refused_and_left_as_it_is(tmp_path):
    valid_job(tmp_path / "jobs")
    out = tmp_path / "my out; touch pwned"  # the advice is pasted into a shell: it must stay one word
    dest = out / "submissions/terminal-bench/2.0/Terminus-2__Qwen3.8-27B-FP8"
    dest.mkdir(parents=True)
    (dest / "mine.txt").write_text("keep me")
    result = CliRunner().invoke(submission.cli, build_args(tmp_path / "jobs", "good-job", out))
    assert result.exit_code == 1
    assert f"already exists; nothing was changed. Remove it (rm -r -- '{dest}')" in result.output
    assert [p.name for p in dest.iterdir()] == ["mine.txt"]


def test_an_unknown_agent_without_display_settings_is_refused_naming_them(tmp_path):
    valid_job(tmp_path / "jobs")
    args = build_args(tmp_path / "jobs", "good-job", tmp_path / "out")
    args[args.index("terminus-2")] = "my-agent"
    result = CliRunner().invoke(submission.cli, args)
    assert result.exit_code == 1
    assert "AGENT_URL" in result.output and "AGENT_DISPLAY_NAME" in result.output
    assert not (tmp_path / "out").exists()


def test_out_inside_the_run_s_job_dir_is_refused(tmp_path):
    job = valid_job(tmp_path / "jobs")
    result = CliRunner().invoke(submission.cli, build_args(tmp_path / "jobs", "good-job", job / "inside"))
    assert result.exit_code == 1
    assert "overlaps the run's job dir" in result.output
    assert not (job / "inside").exists()


@pytest.mark.parametrize("repo, version", [
    ("https://huggingface.co/datasets/harborframework/terminal-bench-2.1", "2.1"),
    ("https://github.com/laude-institute/terminal-bench-2.0.git", "2.0"),
])
def test_version_of_the_dataset(repo, version):
    assert submission_meta.version_of(repo) == version


def test_a_symlink_in_a_job_is_copied_as_a_link_only_when_it_stays_in_the_job(tmp_path):
    job = valid_job(tmp_path / "jobs")
    (tmp_path / "outside.txt").write_text("secret")
    agent = job / "fix-git__0000000" / "agent"
    os.symlink(tmp_path / "outside.txt", agent / "absolute.txt")  # to the HF token, to /etc/passwd
    os.symlink("../../../outside.txt", agent / "climbing.txt")
    (agent / "log.txt").write_text("a log\n")
    os.symlink("log.txt", agent / "inside.txt")
    os.link(tmp_path / "outside.txt", agent / "hard.txt")  # a second name of a file outside
    result = CliRunner().invoke(submission.cli, build_args(tmp_path / "jobs", "good-job", tmp_path / "out"))
    copied = tmp_path / "out/submissions/terminal-bench/2.0/Terminus-2__Qwen3.8-27B-FP8/good-job/fix-git__0000000/agent"
    assert (copied / "inside.txt").is_symlink() and os.readlink(copied / "inside.txt") == "log.txt", result.output
    for name in ("absolute.txt", "climbing.txt", "hard.txt"):
        assert not os.path.lexists(copied / name), name
    assert f"submission: left out {agent / 'absolute.txt'}: a symlink to {tmp_path / 'outside.txt'}, out of the job dir" \
        in result.output
    assert f"submission: left out {agent / 'climbing.txt'}: a symlink to ../../../outside.txt, out of the job dir" \
        in result.output
    assert f"submission: left out {agent / 'hard.txt'}: a hard link: its other name may be outside the run" \
        in result.output
    assert (tmp_path / "outside.txt").read_text() == "secret" and os.path.islink(agent / "absolute.txt")  # untouched


@pytest.mark.parametrize("out, why", [("/proc", "a system directory"), ("/dev/null", "a system directory"),
                                      ("/", "the filesystem root")])
def test_an_out_that_is_not_a_directory_of_ones_own_is_refused(tmp_path, out, why):
    valid_job(tmp_path / "jobs")
    result = CliRunner().invoke(submission.cli, build_args(tmp_path / "jobs", "good-job", Path(out)))
    assert result.exit_code == 1, result.output
    assert f"OUT={out} is {why}: give a directory of your own" in result.output
    assert not os.path.exists("/submissions")
    (tmp_path / "a-file").write_text("")
    result = CliRunner().invoke(submission.cli, build_args(tmp_path / "jobs", "good-job", tmp_path / "a-file"))
    assert result.exit_code == 1
    assert f"OUT={tmp_path / 'a-file'} exists and is not a directory" in result.output


def test_a_credential_in_the_run_refuses_the_submission_before_anything_is_written(tmp_path):
    job = valid_job(tmp_path / "jobs")
    leaked = job / "fix-git__0000000" / "agent" / "trajectory.json"
    # A valid ATIF trajectory (harbor's model), one line, that echoed a key in a step.
    traj = json.loads(leaked.read_text())
    # The key's shape is built here, so that no key-shaped string is tracked (a remote job's copy
    # of the checkout is scanned as this trajectory is).
    traj["steps"][0]["message"] = "export OPENAI_API_KEY=" + "sk-" + "proj-Ab3dEfGhIjKlMnOpQrStUvWxYz0123456789"
    leaked.write_text(json.dumps(traj) + "\n")
    result = CliRunner().invoke(submission.cli, build_args(tmp_path / "jobs", "good-job", tmp_path / "out"))
    assert result.exit_code == 1
    assert (f"make submission refused: a credential may be in the files it would upload: {leaked}:1: what looks like "
            f"an OpenAI or Anthropic key (sk-p…6789). Nothing was written.") in result.output
    assert not (tmp_path / "out").exists()


# --- one verdict: make check-submission RUN=r and make submission RUN=r DRY_RUN=1 ------------------------

BUNDLED = sorted(p.stem for p in (REPO / "runs").glob("example-*.env"))


@pytest.mark.parametrize("run", BUNDLED)
def test_check_submission_and_a_dry_run_of_submission_give_one_verdict(tmp_path, run):
    """The same trials (each task's k slot-filling ones), the same rules, the same words: check-submission
    says what the submission would leave out and why, and its verdict, as the dry run does; a trial dir
    the submission leaves out is never a problem, and no line tells anyone to delete one."""
    check = make("check-submission", f"RUN={run}", f"STATE_ROOT={tmp_path / 'state'}")
    dry = make("submission", f"RUN={run}", f"OUT={tmp_path / 'out'}", "DRY_RUN=1", f"STATE_ROOT={tmp_path / 'state'}")
    assert dry.returncode == 0, dry.stderr
    said = [line for line in dry.stdout.splitlines() if not line.startswith(("would ", "    "))]
    assert check.stdout.splitlines() == said
    verdict = [line for line in said if line.startswith(f"run {run}: ")]
    assert len(verdict) == 1
    assert (check.returncode == 0) == verdict[0].startswith(f"run {run}: meets the Terminal-Bench leaderboard rules")
    assert "remove it from the submission" not in check.stdout + dry.stdout
    left_out = [line.split("/: ", 1)[0].removeprefix("left out ") for line in said if line.startswith("left out ")]
    problems = [line for line in said if line.startswith("  - ")]
    assert not [(d, p) for d in left_out for p in problems if f"{d}/" in p or f"{d}:" in p]


def test_the_complete_example_meets_the_rules_by_both_checks(tmp_path):
    """Its crashed path-tracing attempt (no result.json) is left out, said with why, and is no problem."""
    check = make("check-submission", "RUN=example-leaderboard-complete")
    assert check.returncode == 0, check.stdout + check.stderr
    lines = check.stdout.splitlines()
    assert ("left out examples/jobs/example-leaderboard-complete-tb21/path-tracing__fdbe48f/: no result.json "
            "(a trial harbor never finished)") in lines
    assert lines[-1] == ("run example-leaderboard-complete: meets the Terminal-Bench leaderboard rules (6 tasks, "
                         "30 trials, at least 5 valid trials per task).")


def test_a_built_tree_is_still_checked_dir_by_dir(tmp_path):
    """check-submission of a job dir by path (a built submission's) checks every dir in it: a trial dir
    without result.json put into a tree is a problem, fixed by building the tree with make submission."""
    job = valid_job(tmp_path)
    (job / "fix-git__crashed").mkdir()
    (job / "fix-git__crashed" / "config.json").write_text(json.dumps({"task": {"path": "tasks/fix-git"}}))
    from tools.report import report
    result = CliRunner().invoke(report.cli, ["check-submission", str(job)])
    assert result.exit_code == 1
    assert result.output == (
        f"{job}: does NOT meet the Terminal-Bench leaderboard rules (1 problem):\n"
        f"  - {job}/fix-git__crashed: no result.json (an unfinished or crashed trial), which the leaderboard cannot "
        f"count; make submission RUN=<run> leaves it out of the tree it builds\n")


def test_counts_are_singular_when_one():
    from tools.hub import report_submission
    one = {"ok": False, "problems": ["p"]}
    assert report_submission.submission_markdown("run r", one) == (
        "run r: does NOT meet the Terminal-Bench leaderboard rules (1 problem):\n  - p\n")
    two = {"ok": False, "problems": ["p", "q"]}
    assert report_submission.submission_markdown("run r", two).startswith(
        "run r: does NOT meet the Terminal-Bench leaderboard rules (2 problems):\n")
    ok = {"ok": True, "tasks": 1, "trials": 1, "min_valid_trials_per_task": 1, "problems": []}
    assert report_submission.submission_markdown("run r", ok) == (
        "run r: meets the Terminal-Bench leaderboard rules (1 task, 1 trial, at least 1 valid trial per task).\n")


@pytest.mark.parametrize("verb, fix", [
    ("submission", "run make bench RUN=qwen-t2 first, or make pull RUN=qwen-t2 for a run benched as an HF Job"),
    ("check-submission", "run make bench RUN=qwen-t2 first, or make pull RUN=qwen-t2 for a run benched as an HF Job"),
    ("watch", "nothing to watch until make bench RUN=qwen-t2 (or make reproduce RUN=qwen-t2) starts it"),
])
def test_a_run_not_benched_yet_is_said_in_make_s_terms(tmp_path, verb, fix):
    """No jobs dir at all (a fresh checkout): where it looked (JOBS_DIR/JOB_NAME) and the make verb to run,
    never a harbor flag."""
    jobs = tmp_path / "jobs"
    proc = make(verb, "RUN=qwen-t2", f"JOBS_DIR={jobs}", "ONCE=1", f"STATE_ROOT={tmp_path / 'state'}")
    assert proc.returncode == 2, proc.stdout + proc.stderr  # make's, for the script's exit 1
    assert proc.stderr.splitlines()[0] == (
        f"Error: run qwen-t2 has no job dir yet (looked for JOBS_DIR/JOB_NAME, {jobs}/qwen3_8-27b-fp8-terminus2-tb21-"
        f"full-v2, and its -shard-N and -retry-N jobs): {fix}")
    assert "--jobs-dir" not in proc.stderr
    assert not jobs.exists() and not (tmp_path / "state").exists()
