"""make submission: the leaderboard's layout, metadata.yaml, a copy of every job dir, the check.

The bundled example (runs/example-terminus2.env) is built through make itself: its tree, its
metadata.yaml word for word, every file byte-identical to the run's, the run's own job dirs
unchanged (hashed before and after), and check-submission's verdict printed and in the exit
code. A job dir that meets the rules is built and accepted. Refusals change nothing.
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

from tools import submission as S

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


def test_the_example_is_built_copied_unchanged_and_rejected_with_the_verdict(tmp_path):
    sources = [EXAMPLE_JOBS / job for job in EXAMPLE_JOB_DIRS]
    before = [tree_hash(src) for src in sources]
    out = tmp_path / "out"
    proc = make("submission", "RUN=example-terminus2", f"OUT={out}", f"STATE_ROOT={tmp_path / 'state'}")
    # check-submission rejects it (×4 multiplier, one attempt, a crashed trial): the exit says so.
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "does NOT meet the Terminal-Bench leaderboard rules" in proc.stdout
    assert "agent_timeout_multiplier is 4" in proc.stdout
    assert "fewer than 5 valid trials" in proc.stdout
    # ...and the tree is there to look at: metadata.yaml and both job dirs, retry job included.
    dest = out / SUBMISSION
    assert sorted(p.name for p in dest.iterdir()) == sorted(["metadata.yaml", *EXAMPLE_JOB_DIRS])
    assert (dest / "metadata.yaml").read_text() == EXPECTED_METADATA
    # Every file as harbor wrote it, but the one trial harbor never finished (no result.json).
    crashed = [t for job in EXAMPLE_JOB_DIRS for t in sorted((EXAMPLE_JOBS / job).iterdir())
               if (t / "config.json").is_file() and t.name != "config.json" and not (t / "result.json").exists()]
    assert [t.name for t in crashed] == ["schemelike-metacircular-eval__aebd692"]
    for job in EXAMPLE_JOB_DIRS:
        src, dst = EXAMPLE_JOBS / job, dest / job
        src_files = sorted(str(p.relative_to(src)) for p in src.rglob("*")
                           if p.is_file() and not any(t in p.parents for t in crashed))
        assert src_files == sorted(str(p.relative_to(dst)) for p in dst.rglob("*") if p.is_file())
        for rel in src_files:
            assert (src / rel).read_bytes() == (dst / rel).read_bytes(), rel
    assert not (dest / crashed[0].parent.name / crashed[0].name).exists()
    # The run's own dirs: not one byte, mode or mtime changed.
    assert [tree_hash(src) for src in sources] == before
    assert f"built {out / SUBMISSION}/" in proc.stderr
    assert (f"submission: left out examples/jobs/{crashed[0].parent.name}/{crashed[0].name}/: no result.json "
            "(a trial harbor never finished; its attempt slot is for mop-up to fill)") in proc.stderr.splitlines()


def test_the_leaderboard_example_is_accepted(tmp_path):
    """The bundled k = 5 run: its crashed attempt is left out, its slot filled by the retry job."""
    out = tmp_path / "out"
    proc = make("submission", "RUN=example-leaderboard", f"OUT={out}", f"STATE_ROOT={tmp_path / 'state'}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    dest = out / "submissions" / "terminal-bench" / "2.1" / "Terminus-2__Qwen3.8-27B-FP8"
    assert proc.stdout == (f"submission {dest}: meets the Terminal-Bench leaderboard rules "
                           "(6 tasks, 32 trials, at least 5 valid trials per task).\n")
    assert not (dest / "example-leaderboard-tb21" / "path-tracing__ddaf886").exists()
    assert (dest / "example-leaderboard-tb21-retry-1" / "path-tracing__aeea562" / "result.json").is_file()


def test_dry_run_lists_what_it_would_write_and_writes_nothing(tmp_path):
    out = tmp_path / "out"
    proc = make("submission", "RUN=example-terminus2", f"OUT={out}", "DRY_RUN=1", f"STATE_ROOT={tmp_path / 'state'}")
    assert proc.returncode == 0, proc.stderr
    assert f"would create {out / SUBMISSION}/" in proc.stdout
    assert "    agent_display_name: Terminus 2" in proc.stdout
    for job in EXAMPLE_JOB_DIRS:
        assert f"would copy examples/jobs/{job}/ to {out / SUBMISSION / job}/" in proc.stdout
    assert not out.exists()
    assert not (tmp_path / "state").exists()


def valid_job(root: Path, name: str = "good-job", trials: int = 5) -> Path:
    """A job dir that meets the rules: multiplier 1, one task with `trials` valid results
    (each a copy of a finished trial of the bundled example, harbor's own files)."""
    src = EXAMPLE_JOBS / "example-terminus2-tb21" / "fix-git__dafc564"
    job = root / name
    job.mkdir(parents=True)
    (job / "config.json").write_text(json.dumps({"job_name": name, "agent_timeout_multiplier": 1.0}))
    for i in range(trials):
        shutil.copytree(src, job / f"fix-git__{i:07x}")
    return job


def build_args(jobs_dir: Path, job_name: str, out: Path, *extra: str) -> list[str]:
    return ["build", "--jobs-dir", str(jobs_dir), "--job-name", job_name, "--out", str(out),
            "--agent", "terminus-2", "--model", "Qwen/Qwen3.8-27B-FP8",
            "--dataset-repo", "https://huggingface.co/datasets/harborframework/terminal-bench-2.0", *extra]


def test_a_run_that_meets_the_rules_is_accepted(tmp_path):
    valid_job(tmp_path / "jobs")
    result = CliRunner().invoke(S.cli, build_args(tmp_path / "jobs", "good-job", tmp_path / "out"))
    assert result.exit_code == 0, result.output
    dest = tmp_path / "out/submissions/terminal-bench/2.0/Terminus-2__Qwen3.8-27B-FP8"
    assert "meets the Terminal-Bench leaderboard rules (1 tasks, 5 trials" in result.output
    assert sorted(p.name for p in (dest / "good-job").iterdir()) == ["config.json"] + [f"fix-git__{i:07x}" for i in range(5)]


def test_four_trials_are_built_and_rejected(tmp_path):
    valid_job(tmp_path / "jobs", trials=4)
    result = CliRunner().invoke(S.cli, build_args(tmp_path / "jobs", "good-job", tmp_path / "out"))
    assert result.exit_code == 1
    assert "fix-git (4)" in result.output
    assert (tmp_path / "out/submissions/terminal-bench/2.0/Terminus-2__Qwen3.8-27B-FP8/good-job").is_dir()


def test_settings_win_over_what_is_derived(tmp_path):
    valid_job(tmp_path / "jobs")
    result = CliRunner().invoke(S.cli, build_args(
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


def test_an_existing_submission_is_refused_and_left_as_it_is(tmp_path):
    valid_job(tmp_path / "jobs")
    out = tmp_path / "my out; touch pwned"  # the advice is pasted into a shell: it must stay one word
    dest = out / "submissions/terminal-bench/2.0/Terminus-2__Qwen3.8-27B-FP8"
    dest.mkdir(parents=True)
    (dest / "mine.txt").write_text("keep me")
    result = CliRunner().invoke(S.cli, build_args(tmp_path / "jobs", "good-job", out))
    assert result.exit_code == 1
    assert f"already exists; nothing was changed. Remove it (rm -r -- '{dest}')" in result.output
    assert [p.name for p in dest.iterdir()] == ["mine.txt"]


def test_an_unknown_agent_without_display_settings_is_refused_naming_them(tmp_path):
    valid_job(tmp_path / "jobs")
    args = build_args(tmp_path / "jobs", "good-job", tmp_path / "out")
    args[args.index("terminus-2")] = "my-agent"
    result = CliRunner().invoke(S.cli, args)
    assert result.exit_code == 1
    assert "AGENT_URL" in result.output and "AGENT_DISPLAY_NAME" in result.output
    assert not (tmp_path / "out").exists()


def test_out_inside_the_run_s_job_dir_is_refused(tmp_path):
    job = valid_job(tmp_path / "jobs")
    result = CliRunner().invoke(S.cli, build_args(tmp_path / "jobs", "good-job", job / "inside"))
    assert result.exit_code == 1
    assert "overlaps the run's job dir" in result.output
    assert not (job / "inside").exists()


@pytest.mark.parametrize("repo, version", [
    ("https://huggingface.co/datasets/harborframework/terminal-bench-2.1", "2.1"),
    ("https://github.com/laude-institute/terminal-bench-2.0.git", "2.0"),
])
def test_version_of_the_dataset(repo, version):
    assert S.version_of(repo) == version


def test_a_symlink_in_a_job_is_copied_as_a_link_only_when_it_stays_in_the_job(tmp_path):
    job = valid_job(tmp_path / "jobs")
    (tmp_path / "outside.txt").write_text("secret")
    agent = job / "fix-git__0000000" / "agent"
    os.symlink(tmp_path / "outside.txt", agent / "absolute.txt")  # to the HF token, to /etc/passwd
    os.symlink("../../../outside.txt", agent / "climbing.txt")
    (agent / "log.txt").write_text("a log\n")
    os.symlink("log.txt", agent / "inside.txt")
    os.link(tmp_path / "outside.txt", agent / "hard.txt")  # a second name of a file outside
    result = CliRunner().invoke(S.cli, build_args(tmp_path / "jobs", "good-job", tmp_path / "out"))
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
    result = CliRunner().invoke(S.cli, build_args(tmp_path / "jobs", "good-job", Path(out)))
    assert result.exit_code == 1, result.output
    assert f"OUT={out} is {why}: give a directory of your own" in result.output
    assert not os.path.exists("/submissions")
    (tmp_path / "a-file").write_text("")
    result = CliRunner().invoke(S.cli, build_args(tmp_path / "jobs", "good-job", tmp_path / "a-file"))
    assert result.exit_code == 1
    assert f"OUT={tmp_path / 'a-file'} exists and is not a directory" in result.output


def test_a_credential_in_the_run_refuses_the_submission_before_anything_is_written(tmp_path):
    job = valid_job(tmp_path / "jobs")
    leaked = job / "fix-git__0000000" / "agent" / "trajectory.json"
    leaked.write_text('{"observation": "export OPENAI_API_KEY=sk-proj-Ab3dEfGhIjKlMnOpQrStUvWxYz0123456789"}\n')
    result = CliRunner().invoke(S.cli, build_args(tmp_path / "jobs", "good-job", tmp_path / "out"))
    assert result.exit_code == 1
    assert (f"make submission refused: a credential may be in the files it would upload: {leaked}:1: what looks like "
            f"an OpenAI or Anthropic key (sk-p…6789). Nothing was written.") in result.output
    assert not (tmp_path / "out").exists()
