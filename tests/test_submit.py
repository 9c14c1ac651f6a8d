"""make submit: make submission, then the REAL `harbor upload` of each job dir, then the leaderboard.

Every upload is the real harbor 0.26.0 CLI talking to tests/fakes/fake_harbor_hub.py, a
loopback fake of the Harbor Hub's Supabase endpoints: harbor takes its base URL from
HARBOR_SUPABASE_URL and allows http:// for 127.0.0.1 only (harbor/auth/constants.py). The run's
two job dirs (the job and a retry job, k = 5 each) are written once by the real `harbor run`
on tests/harbor_env/scripted_env.py (docs/harbor.md §9), with an ATIF trajectory added to each
passing trial, as the leaderboard requires. Asserted: the exact files of every counted trial
reach the fake (each trial's tar.gz, listed member by member), each job id harbor printed is
recorded in state/<run>/submit.json and the manifest, the exact `harbor leaderboard submit`
command is printed (0.26.0 has none) or, with a harbor that has one (a wrapper in front of the
real CLI), run with the exact argv; the API key is in no argv (a /proc watcher) and no file (the
fake records its sha256 only; the exchange's body is the one place harbor sends it). DRY_RUN=1
and a missing credential write nothing (those two read the bundled k = 5 example's job dirs and
run no harbor job, so make check runs them; the rest are e2e).
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest

from tests.fixtures import hostile
from tests.fixtures import scratch
from tests.test_no_secret_in_argv import ArgvWatcher, files_holding

REPO = Path(__file__).resolve().parents[1]
RUN = "submit-test"
JOB = "submit-test-job"
JOBS = [JOB, f"{JOB}-retry-1"]
LEADERBOARD = "terminal-bench/terminal-bench-2-1/main"  # HUB_LEADERBOARD: org/package/name
PACKAGE = "terminal-bench/terminal-bench-2-1"
DEST_REL = Path("submissions/terminal-bench/2.1/Oracle__fake-model")
PUBLISHABLE = "sb_publishable_fake"


def run_file(jobs_dir: Path) -> str:
    return f"""\
# Written by tests/test_submit.py: two real harbor jobs of oracle on the scripted environment.
SERVER=qwen3.8-27b-fp8-sglang-h200
MODEL=fake-org/fake-model
JOB_NAME={JOB}
JOBS_DIR={jobs_dir}
AGENT=oracle
DATASET_PATH=dataset
ENV_TYPE=scripted_env:ScriptedEnv
AGENT_TIMEOUT_MULTIPLIER=1
N_ATTEMPTS=5
LEADERBOARD_VERSION=2.1
AGENT_DISPLAY_NAME=Oracle
AGENT_ORG_DISPLAY_NAME=Terminal-Bench
AGENT_URL=https://github.com/harbor-framework/harbor
"""


def wait_for(predicate, what: str, seconds: float = 30) -> None:
    """Wait for an event (a file appearing), bounded: never a fixed sleep."""
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def jobs_dir(tmp_path_factory) -> Path:
    """The run's job dirs, written by the real harbor: t-pass in the job, t-fail in a retry job."""
    tmp = tmp_path_factory.mktemp("submit-jobs")
    dataset = tmp / "dataset"
    for task in ("t-pass", "t-fail"):
        shutil.copytree(REPO / "tests/datasets/mopup" / task, dataset / task)
    plan = tmp / "plan.json"
    plan.write_text(json.dumps({"t-fail": ["fail"]}))
    env = {**os.environ, "PYTHONPATH": str(REPO / "tests/harbor_env"), "SCRIPTED_ENV_PLAN": str(plan),
           "SCRIPTED_ENV_LOG": str(tmp / "executed.jsonl"), "HOME": str(tmp), "HARBOR_TELEMETRY": "0",
           "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    jobs = tmp / "jobs"
    procs = [subprocess.Popen([str(REPO / ".venv/bin/harbor"), "run", "-a", "oracle", "-p", str(dataset),
                               "--include-task-name", task, "--env", "scripted_env:ScriptedEnv", "-k", "5",
                               "--agent-timeout-multiplier", "1", "--jobs-dir", str(jobs), "--job-name", job,
                               "-n", "5", "-y"], cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
             for job, task in zip(JOBS, ("t-pass", "t-fail"))]
    for proc in procs:
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, out.decode(errors="replace")
    write_trajectories(jobs)
    return jobs


# The bundled k = 5 examples: one make submission refuses (an open slot), and the same run after
# mop-up, which it builds; each job dir of theirs under this run's job names.
REFUSED_EXAMPLE = ("example-leaderboard-tb21", "example-leaderboard-tb21-retry-1")
COMPLETE_EXAMPLE = ("example-leaderboard-complete-tb21", "example-leaderboard-complete-tb21-retry-1",
                    "example-leaderboard-complete-tb21-retry-2")


def copy_example(tmp_path: Path, sources: tuple[str, ...]) -> Path:
    """For the tests that upload nothing: a bundled k = 5 example's job dirs under this run's
    job name (harbor's files, no harbor run needed)."""
    jobs = tmp_path / "example-jobs"
    for i, src in enumerate(sources):
        job = f"{JOB}-retry-{i}" if i else JOB
        shutil.copytree(REPO / "examples" / "jobs" / src, jobs / job, symlinks=True)
        # As harbor writes a job of this run: its config.json names the job its dir is, and the run's model.
        config = json.loads((jobs / job / "config.json").read_text())
        agents = [dict(agent, model_name="openai/fake-org/fake-model") for agent in config["agents"]]
        (jobs / job / "config.json").write_text(json.dumps(dict(config, job_name=job, agents=agents), indent=4))
    return jobs


@pytest.fixture
def example_jobs(tmp_path) -> Path:
    return copy_example(tmp_path, COMPLETE_EXAMPLE)


def write_trajectories(jobs: Path) -> None:
    """An ATIF trajectory for each passing trial (oracle writes none), with harbor's own model."""
    from harbor.models.trajectories.agent import Agent
    from harbor.models.trajectories.step import Step
    from harbor.models.trajectories.trajectory import Trajectory

    for result in jobs.glob("*/*/result.json"):
        data = json.loads(result.read_text())
        if (data.get("verifier_result") or {}).get("rewards", {}).get("reward") == 1.0:
            traj = Trajectory(session_id=data["trial_name"], agent=Agent(name="oracle", version="1.0.0"),
                              steps=[Step(step_id=1, source="agent", message="ran solution/solve.sh")])
            (result.parent / "agent" / "trajectory.json").write_text(traj.model_dump_json(exclude_none=True))


class Hub:
    """tests/fakes/fake_harbor_hub.py on a free loopback port, accepting one API key (by its sha256)."""

    def __init__(self, tmp: Path, key: str, leaderboard: dict | None = None):
        self.record = tmp / "hub-requests.jsonl"
        port_file = tmp / "hub-port"
        board = []
        if leaderboard is not None:
            (tmp / "leaderboard.json").write_text(json.dumps(leaderboard))
            board = ["--leaderboard", str(tmp / "leaderboard.json")]
        self.proc = subprocess.Popen(
            [sys.executable, str(REPO / "tests/fakes/fake_harbor_hub.py"), "--record", str(self.record),
             "--port-file", str(port_file), "--api-key-sha256", hashlib.sha256(key.encode()).hexdigest(),
             *board, "--max-lifetime", "300"], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: port_file.exists() and port_file.read_text().strip(), "the fake Harbor Hub's port")
        self.url = f"http://127.0.0.1:{port_file.read_text().strip()}"

    def requests(self) -> list[dict]:
        if not self.record.exists():
            return []
        return [json.loads(line) for line in self.record.read_text().splitlines()]

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def new_key() -> str:
    """A fresh key in harbor's own format, sk-harbor-<key_id>_<secret>."""
    return f"sk-harbor-{secrets.token_hex(4)}_{secrets.token_hex(20)}"


class Tree:
    """A scratch checkout: the real code by symlink, its own runs/, state/, and a HOME."""

    def __init__(self, tmp: Path, jobs: Path):
        self.root = scratch.checkout(tmp / "repo", makefile=True, dataset=False)
        (self.root / "runs" / f"{RUN}.env").write_text(run_file(jobs))
        self.home = tmp / "home"
        self.home.mkdir()
        self.state = self.root / "state" / RUN
        self.dest = self.state / "submission" / DEST_REL

    def make(self, *args: str, env_extra: dict | None = None, path_prefix: Path | None = None):
        drop = ("RUN", "DRY_RUN", "OUT", "MAKEFLAGS", "MFLAGS", "STATE_ROOT", "HARBOR_API_KEY", "HUB_ORG")
        env = {k: v for k, v in os.environ.items() if k not in drop}
        # The tree's own .venv/bin (lib.sh puts it first unless it is on PATH already): a
        # path_prefix in front of it is seen first.
        path = f"{self.root / '.venv/bin'}:{env['PATH']}"
        env.update(HOME=str(self.home), HARBOR_TELEMETRY="0", HARBOR_SUPABASE_PUBLISHABLE_KEY=PUBLISHABLE,
                   PATH=f"{path_prefix}:{path}" if path_prefix else path)
        env.update(env_extra or {})
        return subprocess.run(["make", "-C", str(self.root), "--no-print-directory", "submit", f"RUN={RUN}", *args],
                              capture_output=True, text=True, env=env, timeout=300)

    def manifest(self) -> list[dict]:
        path = self.state / "manifest.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def job_id(jobs: Path, job: str) -> str:
    return json.loads((jobs / job / "result.json").read_text())["id"]


def counted_trials(dest: Path) -> dict[str, Path]:
    """Every trial dir of the built tree, by its result.json id."""
    return {json.loads(r.read_text())["id"]: r.parent for r in dest.glob("*/*/result.json")}


def entries(trial: Path) -> list[str]:
    """Every file and dir under a trial dir, as a tar lists them (dirs end in '/')."""
    return sorted(str(p.relative_to(trial)) + ("/" if p.is_dir() else "") for p in trial.rglob("*"))


# make submit's warning when a submission names more than one job id (docs/submission.md §4).
SEVERAL_IDS = ("submit: warning: this submission names {n} job ids, one --job-id each: whether the Hub's leaderboard "
               "accepts several in one submission is not verified")


def leaderboard_line(dest: Path, ids: list[str]) -> str:
    words = ["harbor", "leaderboard", "submit", "--leaderboard", LEADERBOARD]
    for i in ids:
        words += ["--job-id", i]
    return " ".join([*words, "--metadata", f"{dest}/metadata.yaml"])


@pytest.mark.e2e
def test_submit_uploads_every_counted_trial_records_the_ids_and_prints_the_submit_command(tmp_path, jobs_dir):
    key = new_key()
    hub = Hub(tmp_path, key)
    tree = Tree(tmp_path, jobs_dir)
    try:
        with ArgvWatcher(key) as watcher:
            proc = tree.make(env_extra={"HARBOR_API_KEY": key, "HARBOR_SUPABASE_URL": hub.url})
    finally:
        hub.stop()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ids = [job_id(jobs_dir, job) for job in JOBS]

    # Each job dir of the tree went up, the job first: harbor printed each id, it is recorded.
    state = json.loads((tree.state / "submit.json").read_text())
    assert [(u["job"], u["job_id"]) for u in state["uploads"]] == list(zip(JOBS, ids))
    assert state["submission"] == str(tree.dest)
    assert state["leaderboard"] == {"name": LEADERBOARD, "status": "pending",
                                    "argv": leaderboard_line(tree.dest, ids).split(" ")}
    events = {e["event"]: e for e in tree.manifest()}
    assert [(j["job"], j["job_id"]) for j in events["submit-upload"]["jobs"]] == list(zip(JOBS, ids))
    assert events["submit"]["status"] == "pending"
    assert events["submit"]["argv"] == leaderboard_line(tree.dest, ids).split(" ")

    # harbor 0.26.0 has no leaderboard submit: the exact command, with the recorded ids.
    assert proc.stdout.splitlines()[-1] == leaderboard_line(tree.dest, ids)
    assert "harbor 0.26.0 has no 'harbor leaderboard submit' yet" in proc.stderr
    # Two job ids: whether the Hub's leaderboard takes several is not known, and make submit says so.
    assert SEVERAL_IDS.format(n=2) in proc.stderr

    # The fake got exactly the counted trials, each trial's every file, and both job archives.
    objects = {r["name"]: r for r in hub.requests() if r.get("event") == "object"}
    trials = counted_trials(tree.dest)
    assert len(trials) == 10
    assert {n for n in objects if n.endswith("/trial.tar.gz")} == {f"trials/{t}/trial.tar.gz" for t in trials}
    for tid, trial in trials.items():
        assert objects[f"trials/{tid}/trial.tar.gz"]["members"] == entries(trial), trial
    passing = {tid for tid, t in trials.items() if (t / "agent" / "trajectory.json").exists()}
    assert len(passing) == 5
    assert {n for n in objects if n.endswith("/trajectory.json")} == {f"trials/{t}/trajectory.json" for t in passing}
    # harbor 0.26.0 names each job's archive by its trials (upload/uploader.py upload_job: the sha256 of
    # the sorted trial ids), so a re-upload with other trials writes a new one beside the old.
    held = {json.loads((tree.dest / job / "result.json").read_text())["id"]:
            sorted(json.loads(r.read_text())["id"] for r in (tree.dest / job).glob("*/result.json")) for job in JOBS}
    assert {n for n in objects if n.startswith("jobs/") and n.endswith(".tar.gz")} == {
        f"jobs/{i}/job-{hashlib.sha256(','.join(held[i]).encode()).hexdigest()}.tar.gz" for i in ids}
    # The trial rows: one per counted trial, under the job it belongs to.
    inserted = [r for r in hub.requests() if r.get("path") == "/rest/v1/trial" and r["method"] == "POST"]
    assert sorted(r["body"]["id"] for r in inserted) == sorted(trials)

    # The key: sent once per harbor process to the exchange (its body), every other call carries
    # the exchanged JWT; no argv ever held it, and no file does.
    requests = [r for r in hub.requests() if "method" in r]
    exchanges = [r for r in requests if r["path"] == "/functions/v1/api-key-exchange"]
    # each harbor upload, each Hub check (before the uploads, after them), and the metadata check's read of the board
    assert len(exchanges) == 5
    assert all(r["body"] == {"api_key_sha256": hashlib.sha256(key.encode()).hexdigest()} for r in exchanges)
    assert all(r["auth"] == "jwt" for r in requests if r not in exchanges)
    assert watcher.leaks == []
    # (harbor is a Python console script: argv[0] is python, argv[1] .../harbor)
    assert any("upload" in s.argv and any(a.endswith("harbor") for a in s.argv[:2])
               for s in watcher.seen.values()), "the watcher never saw harbor upload"
    assert files_holding(tmp_path, key) == []
    assert key not in proc.stdout + proc.stderr


def harbor_with_leaderboard_submit(tmp: Path) -> tuple[Path, Path]:
    """A harbor that has `leaderboard submit`: a wrapper in front of the real CLI recording that
    command's argv (NUL-separated), everything else handed to the real harbor."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    record = tmp / "leaderboard-argv"
    wrapper = bin_dir / "harbor"
    wrapper.write_text(f"""#!/usr/bin/env bash
if [[ "${{1:-}} ${{2:-}}" == "leaderboard submit" ]]; then
  [[ "${{3:-}}" == --help ]] && exit 0
  printf '%s\\0' "$@" >{record}
  exit 0
fi
exec {REPO / '.venv/bin/harbor'} "$@"
""")
    wrapper.chmod(0o755)
    return bin_dir, record


@pytest.mark.e2e
def test_a_harbor_with_leaderboard_submit_gets_the_exact_argv_and_a_login_file_is_the_credential(tmp_path, jobs_dir):
    key = new_key()
    hub = Hub(tmp_path, key)
    tree = Tree(tmp_path, jobs_dir)
    # `harbor auth login` writes the key here (harbor/auth/credentials.py); no HARBOR_API_KEY.
    (tree.home / ".harbor").mkdir()
    (tree.home / ".harbor" / "credentials.json").write_text(json.dumps({"api_key": key}))
    bin_dir, record = harbor_with_leaderboard_submit(tmp_path)
    try:
        proc = tree.make(env_extra={"HARBOR_SUPABASE_URL": hub.url}, path_prefix=bin_dir)
    finally:
        hub.stop()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Harbor Hub credential: ~/.harbor/credentials.json (harbor auth login)" in proc.stderr
    ids = [job_id(jobs_dir, job) for job in JOBS]
    argv = record.read_text().split("\0")[:-1]
    assert argv == leaderboard_line(tree.dest, ids).split(" ")[1:]
    state = json.loads((tree.state / "submit.json").read_text())
    assert state["leaderboard"]["status"] == "submitted"
    submit = [e for e in tree.manifest() if e["event"] == "submit"]
    assert [(e["status"], e["exit"]) for e in submit] == [("submitted", 0)]
    assert f"submitted run {RUN} to {LEADERBOARD}" in proc.stderr


# What a harbor that colours its output prints (rich with FORCE_COLOR, a newer harbor, a wrapper):
# each line dimmed, "View at" bold and the URL an OSC 8 hyperlink, underlined in cyan. The job dir
# named by DROP_VIEW_OF loses its View line instead, as an output harbor changed would.
COLOURING_FILTER = r"""
import re, sys
job, drop = sys.argv[1], sys.argv[2]
for line in sys.stdin:
    view = re.match(r"View at (\S+)$", line.rstrip("\n"))
    if view and job == drop:
        continue
    if view:
        url = view.group(1)
        sys.stdout.write(f"\x1b[1mView at\x1b[0m \x1b]8;;{url}\x1b\\\x1b[4;36m{url}\x1b[0m\x1b]8;;\x1b\\\r\n")
    else:
        sys.stdout.write(f"\x1b[2m{line.rstrip(chr(10))}\x1b[0m\n")
"""


def colouring_harbor(tmp: Path) -> Path:
    """A bin dir whose harbor is the real one with its upload output coloured (COLOURING_FILTER)."""
    bin_dir = tmp / "colour-bin"
    bin_dir.mkdir()
    (tmp / "colour.py").write_text(COLOURING_FILTER)
    wrapper = bin_dir / "harbor"
    wrapper.write_text(f"""#!/usr/bin/env bash
set -o pipefail
[[ "${{1:-}}" == upload ]] || exec {REPO / '.venv/bin/harbor'} "$@"
{REPO / '.venv/bin/harbor'} "$@" 2>&1 | {sys.executable} {tmp / 'colour.py'} "${{2##*/}}" "${{DROP_VIEW_OF:-}}"
""")
    wrapper.chmod(0o755)
    return bin_dir


@pytest.mark.e2e
def test_a_coloured_view_line_is_read_and_an_upload_whose_id_cannot_be_read_is_still_recorded(tmp_path, jobs_dir):
    key = new_key()
    hub = Hub(tmp_path, key)
    tree = Tree(tmp_path, jobs_dir)
    bin_dir = colouring_harbor(tmp_path)
    env = {"HARBOR_API_KEY": key, "HARBOR_SUPABASE_URL": hub.url}
    ids = [job_id(jobs_dir, job) for job in JOBS]
    try:
        # The retry job goes up but its View line is lost: the job's id is recorded, the retry
        # job named as uploaded without an id, and the way on said.
        first = tree.make(env_extra={**env, "DROP_VIEW_OF": JOBS[1]}, path_prefix=bin_dir)
        assert first.returncode != 0
        assert (f"submit: harbor upload of {JOBS[1]} went up, but its job id could not be read from its output "
                f"(above; kept in state/{RUN}/submit-logs/{JOBS[1]}.upload.log), so it is recorded as id_not_read "
                f"in the manifest. Uploads are idempotent: run make submit RUN={RUN} again to upload what is "
                "missing and record every id") in first.stderr
        state = json.loads((tree.state / "submit.json").read_text())
        assert [(u["job"], u["job_id"]) for u in state["uploads"]] == [(JOBS[0], ids[0])]
        assert state["leaderboard"]["status"] == "uploading"
        assert [(e["event"], [(j["job"], j["job_id"]) for j in e["jobs"]], e.get("id_not_read"))
                for e in tree.manifest()] == [("submit-upload", [(JOBS[0], ids[0])], JOBS[1])]
        # Run again, every View line coloured: each id is read through the escapes and recorded.
        second = tree.make(env_extra=env, path_prefix=bin_dir)
    finally:
        hub.stop()
    assert second.returncode == 0, second.stdout + second.stderr
    assert "\x1b]8;;" in (tree.state / "submit-logs" / f"{JOBS[0]}.upload.log").read_text()  # it was coloured
    state = json.loads((tree.state / "submit.json").read_text())
    assert [(u["job"], u["job_id"]) for u in state["uploads"]] == list(zip(JOBS, ids))
    assert state["leaderboard"]["status"] == "pending"
    events = [e for e in tree.manifest() if e["event"] == "submit-upload"]
    assert [(j["job"], j["job_id"]) for j in events[-1]["jobs"]] == list(zip(JOBS, ids))
    assert "id_not_read" not in events[-1]
    assert second.stdout.splitlines()[-1] == leaderboard_line(tree.dest, ids)


def test_dry_run_shows_the_submission_and_every_call_and_writes_nothing(tmp_path, example_jobs):
    tree = Tree(tmp_path, example_jobs)
    proc = tree.make("DRY_RUN=1", "HUB_ORG=alice")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # make submission's own dry run, with the tree's real counts, then the Hub check, each upload, then
    # the leaderboard step.
    jobs = [JOB, f"{JOB}-retry-1", f"{JOB}-retry-2"]
    lines = proc.stdout.splitlines()
    assert f"would create {tree.dest}/" in lines
    assert "would submit 30 trial dirs: 6 tasks × 5 attempts" in lines
    assert (f"would check that Harbor Hub holds no trial under the job ids of {' '.join(jobs)} that the tree does not "
            f"(tools/hub/submit.py hub-check), before the uploads and again after them") in lines
    for job in jobs:
        assert f"would run: harbor upload {tree.dest / job} --org alice" in lines
    ids = [f"'<job id of {job}>'" for job in jobs]
    assert (f"would print, for later (harbor 0.26.0 has no leaderboard submit): "
            f"{leaderboard_line(tree.dest, ids)}") in lines
    assert "no Harbor Hub credential yet" in proc.stderr
    assert SEVERAL_IDS.format(n=3) in proc.stderr
    assert not (tree.root / "state").exists()


@pytest.mark.parametrize("existing_tree", [False, True])
def test_a_dry_run_of_a_refused_submission_exits_as_make_submission_refuses_it(tmp_path, existing_tree):
    """The bundled example with an open slot: make submission refuses it, so make submit's dry run
    exits non-zero too, lists no upload, and counts the tree's real trial dirs (28 of 30 slots). Also
    over the tree an earlier make submit left (which a real one removes and builds again)."""
    tree = Tree(tmp_path, copy_example(tmp_path, REFUSED_EXAMPLE))
    if existing_tree:
        tree.dest.mkdir(parents=True)
        (tree.dest / "metadata.yaml").write_text("an earlier make submit's tree\n")
    proc = tree.make("DRY_RUN=1")
    assert proc.returncode == 2, proc.stdout + proc.stderr  # make's own code for a recipe that failed
    lines = proc.stdout.splitlines()
    assert "would submit 28 trial dirs of 6 tasks (2 of their 6 × 5 = 30 attempt slots hold no trial)" in lines
    assert any(line.startswith("  - 1 of 6 tasks has open attempt slots (2 of 30 slots have no settled trial)")
               for line in lines)
    assert not any(line.startswith(("would run:", "would print", "would check that Harbor Hub")) for line in lines)
    assert ("submit: make submission would refuse the run (above): a real make submit stops there, uploading "
            "nothing") in proc.stderr.splitlines()
    # Only the tree the test made, untouched.
    assert [p.relative_to(tree.root) for p in (tree.root / "state").rglob("*") if p.is_file()] == (
        [(tree.dest / "metadata.yaml").relative_to(tree.root)] if existing_tree else [])


def test_no_credential_is_refused_with_the_fix_and_nothing_is_written(tmp_path, example_jobs):
    tree = Tree(tmp_path, example_jobs)
    proc = tree.make()
    assert proc.returncode != 0
    assert ("submit: no Harbor Hub credential: run 'harbor auth login', or export HARBOR_API_KEY=<your key> "
            "in your shell (never on make's command line). Nothing was built or uploaded") in proc.stderr
    assert not (tree.root / "state").exists()


def shared_id_refusal(first: Path, second: Path, jid: str, done: str) -> str:
    return (f"Error: job dirs {first} and {second} hold one job id, {jid} (their result.json), so harbor upload would "
            "put both under that one job on Harbor Hub, which never deletes a trial uploaded under a job id. harbor "
            "gives each job its own id, so one is a copy of the other: move the copy out of the run's jobs dir and "
            f"run make submit again; {done}")


def test_two_job_dirs_of_one_job_id_are_refused_before_anything_is_built_or_uploaded(tmp_path):
    """A job dir copied under the run's next retry name (its config.json made to name it, so make
    submission takes it): both would go up under the one job id, the Hub check passing each (the Hub
    holds neither yet), and the Hub keeps both for good. Refused in one line naming both dirs, the
    dry run as the real one: the fake Hub is never called, and nothing is written."""
    jobs = copy_example(tmp_path, COMPLETE_EXAMPLE)
    original, copy = jobs / f"{JOB}-retry-1", jobs / f"{JOB}-retry-3"
    shutil.copytree(original, copy, symlinks=True)
    config = json.loads((copy / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps(dict(config, job_name=copy.name), indent=4))
    refusal = shared_id_refusal(original, copy, job_id(jobs, original.name), "nothing was built, uploaded or written")
    key = new_key()
    hub = Hub(tmp_path, key)
    tree = Tree(tmp_path, jobs)
    try:
        proc = tree.make(env_extra={"HARBOR_API_KEY": key, "HARBOR_SUPABASE_URL": hub.url})
        dry = tree.make("DRY_RUN=1", env_extra={"HARBOR_API_KEY": key, "HARBOR_SUPABASE_URL": hub.url})
    finally:
        hub.stop()
    assert proc.returncode == 2, proc.stdout + proc.stderr  # make's own code for a recipe that failed
    assert proc.stdout == ""
    assert proc.stderr.splitlines()[:2] == ["submit: Harbor Hub credential: HARBOR_API_KEY", refusal]
    assert (dry.returncode, dry.stdout, dry.stderr.splitlines()[0]) == (2, "", refusal)
    assert hub.requests() == []
    assert not (tree.root / "state").exists()


@pytest.mark.e2e
def test_a_rejected_key_stops_at_the_hub_check_and_records_no_id(tmp_path, jobs_dir):
    hub = Hub(tmp_path, new_key())
    tree = Tree(tmp_path, jobs_dir)
    try:
        proc = tree.make(env_extra={"HARBOR_API_KEY": new_key(), "HARBOR_SUPABASE_URL": hub.url})
    finally:
        hub.stop()
    assert proc.returncode != 0
    # The Hub cannot be read with it, so nothing is checked, and nothing goes up unchecked.
    assert (f"Error: cannot read what Harbor Hub holds under job {job_id(jobs_dir, JOB)} ({JOB}): ") in proc.stderr
    assert "submit: stopped at the Harbor Hub check (above): nothing was uploaded or submitted" in proc.stderr
    assert not [r for r in hub.requests() if r.get("event") == "object"]
    assert not (tree.state / "submit.json").exists()
    assert not any(e["event"].startswith("submit") for e in tree.manifest())


@pytest.mark.e2e
def test_a_second_submit_rebuilds_its_tree_and_the_hub_keeps_the_same_jobs(tmp_path, jobs_dir):
    """Uploads are idempotent (harbor uploads what the Hub lacks): a second make submit rebuilds
    its own tree under state/<run>/submission and records the same ids, uploading no trial again."""
    key = new_key()
    hub = Hub(tmp_path, key)
    tree = Tree(tmp_path, jobs_dir)
    env = {"HARBOR_API_KEY": key, "HARBOR_SUPABASE_URL": hub.url}
    try:
        first = tree.make(env_extra=env)
        assert first.returncode == 0, first.stdout + first.stderr
        uploaded_once = [r for r in hub.requests() if r.get("event") == "object"]
        second = tree.make(env_extra=env)
    finally:
        hub.stop()
    assert second.returncode == 0, second.stdout + second.stderr
    assert f"removing {tree.state / 'submission'} (the tree of an earlier make submit) to build it again" in second.stderr
    assert [r for r in hub.requests() if r.get("event") == "object"] == uploaded_once
    assert "Note: job already existed" in second.stderr
    ids = [job_id(jobs_dir, job) for job in JOBS]
    state = json.loads((tree.state / "submit.json").read_text())
    assert [u["job_id"] for u in state["uploads"]] == ids
    assert [e["event"] for e in tree.manifest()] == ["submit-upload", "submit", "submit-upload", "submit"]


def add_errored_trial(job_dir: Path) -> tuple[str, str]:
    """An infra-errored attempt in the job (as harbor writes one: a copy of a trial under a new name and
    id, a SandboxError, no reward): the tally leaves it out of the submission. (its name, its id)"""
    import uuid
    from datetime import timedelta

    from harbor.models.trial.result import ExceptionInfo, TrialResult

    src = next(p for p in sorted(job_dir.iterdir()) if (p / "result.json").exists())
    result = TrialResult.model_validate_json((src / "result.json").read_text())
    name = f"{result.task_name}__errored"
    errored = result.model_copy(update={
        "id": uuid.uuid4(), "trial_name": name, "verifier_result": None,
        "finished_at": result.started_at + timedelta(seconds=5),
        "exception_info": ExceptionInfo(exception_type="SandboxError", exception_message="Sandbox API error (503)",
                                        exception_traceback="", occurred_at=result.started_at)})
    dest = job_dir / name
    shutil.copytree(src, dest)
    shutil.rmtree(dest / "agent")
    (dest / "agent").mkdir()
    (dest / "result.json").write_text(errored.model_dump_json(indent=4))
    return name, str(errored.id)


@pytest.mark.e2e
def test_a_job_id_whose_hub_copy_holds_a_trial_the_tree_does_not_is_refused_before_any_upload(tmp_path, jobs_dir):
    """The raw job dir was uploaded once (harbor upload jobs/<job>), errored attempt and all: the Hub keeps
    it under the job id for good, so make submit refuses, naming it and the way out, and uploads nothing."""
    jobs = tmp_path / "jobs"
    shutil.copytree(jobs_dir, jobs, symlinks=True)
    name, trial_id = add_errored_trial(jobs / JOB)
    key = new_key()
    hub = Hub(tmp_path, key)
    tree = Tree(tmp_path, jobs)
    env = {"HARBOR_API_KEY": key, "HARBOR_SUPABASE_URL": hub.url}
    try:
        raw = subprocess.run([str(REPO / ".venv/bin/harbor"), "upload", str(jobs / JOB)], capture_output=True, text=True,
                             timeout=120, env={**os.environ, **env, "HOME": str(tree.home), "HARBOR_TELEMETRY": "0",
                                               "HARBOR_SUPABASE_PUBLISHABLE_KEY": PUBLISHABLE})
        assert raw.returncode == 0, raw.stdout + raw.stderr
        uploaded_raw = len([r for r in hub.requests() if r.get("event") == "object"])
        proc = tree.make(env_extra=env)
    finally:
        hub.stop()
    assert proc.returncode != 0
    job = job_id(jobs, JOB)
    assert (f"Error: job {job} ({JOB}) holds 1 trial(s) on Harbor Hub that the submission does not: "
            f"{name} ({trial_id}). The Hub never deletes a trial uploaded under a job id") in proc.stderr
    assert "The way out is a fresh job id: re-upload the curated job under a new job" in proc.stderr
    assert "submit: stopped at the Harbor Hub check (above): nothing was uploaded or submitted" in proc.stderr
    # The tree left the errored trial out, and nothing of it went up: no upload, no id recorded.
    assert not (tree.dest / JOB / name).exists()
    assert len([r for r in hub.requests() if r.get("event") == "object"]) == uploaded_raw
    assert not (tree.state / "submit.json").exists()
    # What it read: the Hub's trial rows of the job, with harbor's own client.
    assert any(r.get("path") == "/rest/v1/trial" and r["method"] == "GET" and r["query"].get("job_id") == [f"eq.{job}"]
               for r in hub.requests() if "method" in r)


METADATA = """\
agent_url: https://github.com/harbor-framework/harbor
agent_display_name: Oracle
agent_org_display_name: Terminal-Bench
models:
- model_name: fake-org/fake-model
  model_provider: openai
  model_display_name: fake-model
  model_org_display_name: fake-org
"""


def metadata_check(tmp_path: Path, hub: Hub, key: str, text: str = METADATA) -> subprocess.CompletedProcess:
    (tmp_path / "metadata.yaml").write_text(text)
    env = {**os.environ, "HARBOR_API_KEY": key, "HARBOR_SUPABASE_URL": hub.url, "HOME": str(tmp_path),
           "HARBOR_SUPABASE_PUBLISHABLE_KEY": PUBLISHABLE, "HARBOR_TELEMETRY": "0"}
    return subprocess.run([str(REPO / ".venv/bin/python"), "-m", "tools.hub.submit", "metadata-check", "--leaderboard",
                           LEADERBOARD, "--metadata", str(tmp_path / "metadata.yaml")],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=120)


@pytest.mark.parametrize("ref", ["terminal-bench/terminal-bench-2-1/main", "0a1b2c3d-0000-4000-8000-00000000abcd",
                                 "0A1B2C3D00004000800000000000ABCD", "terminal-bench/terminal-bench-2-1", "a//c",
                                 "a/b/c/d", "main", ""])
def test_hub_leaderboard_is_split_as_harbors_own_cli_splits_a_leaderboard(ref):
    """HUB_LEADERBOARD names a board exactly as harbor 0.26.0's hub leaderboard commands read one
    (cli/hub_leaderboards.py _parse_ref): the same selector for every reference it takes, refused
    where harbor refuses (a package alone, as the old default was, names no board)."""
    from harbor.cli.hub_leaderboards import _parse_ref

    from tools.hub import submit

    try:
        theirs = _parse_ref(ref)
    except SystemExit:
        theirs = None
    try:
        ours = submit.board_ref(ref)
    except click.ClickException as e:
        assert e.message == (f"HUB_LEADERBOARD={ref} names no leaderboard: harbor finds one by its UUID or an "
                             "org/package/name slug (terminal-bench/terminal-bench-2-1/main)")
        ours = None
    assert ours == theirs


def test_metadata_is_checked_against_the_boards_own_schema_when_harbor_gives_it(tmp_path):
    """The board's metadata_schema, as harbor's leaderboard-read client reads it (what `harbor hub leaderboard
    show --json` prints), decides; the leaderboard's read is the one request made for it."""
    schema = {"type": "object", "required": ["agent_display_name", "models", "agent_url"],
              "properties": {"agent_display_name": {"type": "string", "maxLength": 40},
                             "agent_url": {"type": "string", "pattern": "^https://"},
                             "models": {"type": "array", "minItems": 1,
                                        "items": {"type": "object", "required": ["model_name", "model_provider"]}}}}
    key = new_key()
    hub = Hub(tmp_path, key, leaderboard={"leaderboard": {"id": "lb1", "name": "main", "package": PACKAGE,
                                                          "metadata_schema": schema}, "rows": []})
    try:
        good = metadata_check(tmp_path, hub, key)
        bad = metadata_check(tmp_path, hub, key, METADATA.replace("agent_url: https://", "agent_url: http://")
                             .replace("  model_provider: openai\n", ""))
    finally:
        hub.stop()
    assert good.returncode == 0, good.stderr
    assert good.stderr == (f"submit: metadata.yaml meets the leaderboard {LEADERBOARD}'s metadata_schema "
                           "(harbor hub leaderboard show)\n")
    assert bad.returncode == 1
    assert (f"metadata.yaml does not meet the leaderboard {LEADERBOARD}'s metadata_schema (harbor hub leaderboard "
            "show): agent_url: 'http://github.com/harbor-framework/harbor' does not match '^https://'; models/0: "
            "'model_provider' is a required property.") in bad.stderr
    reads = [r for r in hub.requests() if r.get("path") == "/functions/v1/leaderboard-read"]
    # The board is asked for by its package and name, as harbor's own CLI splits the slug.
    assert len(reads) == 2 and reads[0]["body"] == {"package": PACKAGE, "name": "main"}


def test_metadata_falls_back_to_the_documented_fields_when_the_board_gives_no_schema(tmp_path):
    key = new_key()
    hub = Hub(tmp_path, key)  # no leaderboard: its read answers 404
    try:
        good = metadata_check(tmp_path, hub, key)
        bad = metadata_check(tmp_path, hub, key, METADATA.replace("agent_display_name: Oracle\n", "") + "extra: 1\n")
    finally:
        hub.stop()
    against = (f"the fields the leaderboard documents (the leaderboard {LEADERBOARD} could not be read (leaderboard "
               "not found))")
    assert (good.returncode, good.stderr) == (0, f"submit: metadata.yaml meets {against}\n")
    assert bad.returncode == 1
    assert f"does not meet {against}: agent_display_name is missing or empty; extra is not a documented field." in bad.stderr


def test_hub_check_says_what_the_hub_holds_and_refuses_on_an_extra_trial(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from tools.hub import submit

    job = tmp_path / "job"
    for trial, tid in (("t__a", "1a"), ("t__b", "1b")):
        (job / trial).mkdir(parents=True)
        (job / trial / "result.json").write_text(json.dumps({"id": tid}))
    (job / "result.json").write_text(json.dumps({"id": "0000"}))
    hub = {"0000": [{"id": "1a", "trial_name": "t__a"}, {"id": "1B", "trial_name": "t__b"}]}
    monkeypatch.setattr(submit, "hub_trials", lambda job_id: hub.get(job_id))
    result = CliRunner().invoke(submit.cli, ["hub-check", "--run", "r", str(job)])
    assert result.exit_code == 0
    assert result.output == "submit: Harbor Hub holds 2 trial(s) under job 0000 (job), every one of the tree's 2\n"
    hub["0000"].append({"id": "1c", "trial_name": "t__c\x1b[2J"})
    result = CliRunner().invoke(submit.cli, ["hub-check", "--run", "r", str(job)])
    assert result.exit_code == 1
    assert "job 0000 (job) holds 1 trial(s) on Harbor Hub that the submission does not: t__c\\x1b[2J (1c)" in result.output
    # As many trials on the Hub as in the tree, one of them not the tree's: the ids decide, not the counts.
    hub["0000"] = [{"id": "1a", "trial_name": "t__a"}, {"id": "1d", "trial_name": "t__d"}]
    result = CliRunner().invoke(submit.cli, ["hub-check", "--run", "r", str(job)])
    assert result.exit_code == 1
    assert result.output.startswith("Error: job 0000 (job) holds 1 trial(s) on Harbor Hub that the submission does "
                                    "not: t__d (1d). The Hub never deletes a trial uploaded under a job id")
    hub.clear()
    result = CliRunner().invoke(submit.cli, ["hub-check", "--run", "r", str(job)])
    assert (result.exit_code, result.output) == (0, "submit: Harbor Hub has no job 0000 (job) yet\n")

    def unreachable(job_id):
        raise ConnectionError("[Errno 111] Connection refused")
    monkeypatch.setattr(submit, "hub_trials", unreachable)
    result = CliRunner().invoke(submit.cli, ["hub-check", "--run", "r", str(job)])
    assert result.exit_code == 1
    assert ("cannot read what Harbor Hub holds under job 0000 (job): [Errno 111] Connection refused; nothing is "
            "submitted until it can be checked") in result.output


# --- tools/hub/submit.py on its own ------------------------------------------------------------------


def test_job_id_is_the_view_line_checked_against_the_jobs_result(tmp_path):
    from click.testing import CliRunner

    from tools.hub import submit

    job = tmp_path / "job"
    job.mkdir()
    jid = "d9fda20d-e564-4f94-a8ed-bcc3496f8aec"
    (job / "result.json").write_text(json.dumps({"id": jid}))
    log = tmp_path / "upload.log"
    runner = CliRunner()
    log.write_text(f"Uploaded 5 trial(s) in 0.94s (visibility: private)\nView at https://hub.example/jobs/{jid}\n")
    result = runner.invoke(submit.cli, ["job-id", "--log", str(log), "--job-dir", str(job)])
    assert (result.exit_code, result.output) == (0, f"{jid}\n")
    other = "00000000-0000-4000-8000-000000000000"
    log.write_text(f"View at https://hub.example/jobs/{other}\n")
    result = runner.invoke(submit.cli, ["job-id", "--log", str(log), "--job-dir", str(job)])
    assert result.exit_code == 1
    assert f"harbor upload printed job id {other} for {job}, but its result.json says {jid}" in result.output
    # Coloured, as a terminal-minded harbor prints it: bold, cyan, the URL an OSC 8 hyperlink
    # (ended by ST or by BEL), a progress line's carriage return, 8-bit CSI.
    for view in (f"\x1b[1mView at\x1b[0m \x1b]8;;https://hub.example/jobs/{jid}\x1b\\"
                 f"\x1b[4;36mhttps://hub.example/jobs/{jid}\x1b[0m\x1b]8;;\x1b\\",
                 f"\x1b[32mView at https://hub.example/jobs/{jid}\x1b[39m\x1b[K",
                 f"uploading 5/5\rView at \x1b]8;id=1;https://hub.example/jobs/{jid}\x07"
                 f"https://hub.example/jobs/{jid}\x1b]8;;\x07",
                 f"\x9b1mView at\x9b0m https://hub.example/jobs/{jid}\x1b(B"):
        log.write_text(f"\x1b[2mUploaded 5 trial(s)\x1b[0m\n{view}\r\n")
        result = runner.invoke(submit.cli, ["job-id", "--log", str(log), "--job-dir", str(job)])
        assert (result.exit_code, result.output) == (0, f"{jid}\n"), repr(view)
    log.write_text("Error: Claim your Harbor username first: https://hub.example/onboarding/username\n")
    result = runner.invoke(submit.cli, ["job-id", "--log", str(log), "--job-dir", str(job)])
    assert result.exit_code == 1
    assert "harbor upload printed no 'View at <url>/<job id>' line" in result.output


@pytest.mark.parametrize("kind", hostile.KINDS)
def test_job_id_refuses_a_result_json_that_is_no_regular_file_or_too_big(tmp_path, kind):
    from click.testing import CliRunner

    from tools.hub import submit

    job = tmp_path / "job"
    job.mkdir()
    reason = hostile.make(job / "result.json", kind, 64 * hostile.MiB, "a result.json")
    log = tmp_path / "upload.log"
    log.write_text("View at https://hub.example/jobs/d9fda20d-e564-4f94-a8ed-bcc3496f8aec\n")
    result = CliRunner().invoke(submit.cli, ["job-id", "--log", str(log), "--job-dir", str(job)])
    assert result.exit_code == 1
    assert f"cannot read the job id from {job}/result.json: {reason}" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job", "upload.log"]


def test_job_id_reads_the_end_of_harbor_upload_s_output_within_limits(tmp_path):
    """harbor upload's output is read from its end, at most a MiB: a long upload's progress before
    the "View at" line is skipped, never read whole; a FIFO or directory in its place is named."""
    from click.testing import CliRunner

    from tools import safe_read
    from tools.hub import submit

    job = tmp_path / "job"
    job.mkdir()
    jid = "d9fda20d-e564-4f94-a8ed-bcc3496f8aec"
    (job / "result.json").write_text(json.dumps({"id": jid}))
    log = tmp_path / "upload.log"
    progress = "uploading trial 1/1 (a line of progress, as harbor prints while it uploads)\n"
    log.write_text(progress * (2 * safe_read.LOG_TAIL_CAP // len(progress)) + f"View at https://hub.example/jobs/{jid}\n")
    assert log.stat().st_size > 2 * safe_read.LOG_TAIL_CAP - len(progress)
    result = CliRunner().invoke(submit.cli, ["job-id", "--log", str(log), "--job-dir", str(job)])
    assert (result.exit_code, result.output) == (0, f"{jid}\n")
    # The View line before the last MiB is not looked for: it is not where harbor prints it.
    log.write_text(f"View at https://hub.example/jobs/{jid}\n" + progress * (2 * safe_read.LOG_TAIL_CAP // len(progress)))
    result = CliRunner().invoke(submit.cli, ["job-id", "--log", str(log), "--job-dir", str(job)])
    assert result.exit_code == 1
    assert "harbor upload printed no 'View at <url>/<job id>' line" in result.output
    for kind in ("fifo", "directory"):
        bad = tmp_path / f"upload-{kind}.log"
        reason = hostile.make(bad, kind, safe_read.LOG_TAIL_CAP, "harbor upload's output")
        result = CliRunner().invoke(submit.cli, ["job-id", "--log", str(bad), "--job-dir", str(job)])
        assert result.exit_code == 1
        assert f"cannot read harbor upload's output {bad}: {reason}" in result.output
    result = CliRunner().invoke(submit.cli, ["job-id", "--log", str(tmp_path / "none.log"), "--job-dir", str(job)])
    assert result.exit_code == 1
    assert f"cannot read harbor upload's output {tmp_path / 'none.log'}: it is not there" in result.output


def test_record_writes_submit_json_whole_and_prints_it_as_one_line(tmp_path):
    from click.testing import CliRunner

    from tools.hub import submit

    state = tmp_path / "state" / "r" / "submit.json"
    result = CliRunner().invoke(submit.cli, [
        "record", "--state", str(state), "--run", "r", "--dest", "/t/d", "--leaderboard", LEADERBOARD,
        "--upload", "/t/d/j", "id-1", "--status", "pending", "--", "harbor", "leaderboard", "submit"])
    assert result.exit_code == 0, result.output
    data = json.loads(state.read_text())
    assert json.loads(result.output) == data
    assert data["uploads"] == [{"job": "j", "job_dir": "/t/d/j", "job_id": "id-1"}]
    assert data["leaderboard"] == {"name": LEADERBOARD, "status": "pending", "argv": ["harbor", "leaderboard", "submit"]}
    assert [p.name for p in state.parent.iterdir()] == ["submit.json"]  # no temp file left


@pytest.mark.parametrize("run, pull, want", [
    ("qwen-t2-leaderboard", "", "all"),         # N_ATTEMPTS=5: the submission uploads trajectories
    ("qwen-t2", "", "results"),                 # N_ATTEMPTS=1: the json files only
    ("qwen-t2-leaderboard", "results", "results"),  # an explicit PULL wins
    ("qwen-t2", "all", "all"),
])
def test_make_pull_takes_everything_by_default_for_a_run_of_several_attempts(run, pull, want):
    env = {k: v for k, v in os.environ.items() if k not in ("CLI_SETTINGS", "MAKEFLAGS")}
    env.update(RUN=run, PULL=pull, BUCKET="alice/tb", DRY_RUN="1")
    proc = subprocess.run([str(REPO / "scripts/pull.sh")], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    # results: nothing below a trial dir, json only; all: every file of the run's jobs.
    assert ("--exclude '[!.]*/*/*/*'" in proc.stdout) == (want == "results")
    assert ("/*.json'" in proc.stdout) == (want == "results")


def test_submit_refuses_while_another_operation_holds_the_runs_lock(tmp_path, example_jobs):
    tree = Tree(tmp_path, example_jobs)
    holder = subprocess.Popen(
        ["bash", "-c", 'source scripts/lib.sh; source scripts/lib-run.sh; hold_run_lock "make mopup"; exec sleep 600'],
        cwd=tree.root, env={**{k: v for k, v in os.environ.items() if k not in ("STATE_ROOT", "CLI_SETTINGS")},
                            "RUN": RUN}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: (tree.state / "lock.json").exists(), "the holder's lock")
        proc = tree.make(env_extra={"HARBOR_API_KEY": new_key()})
    finally:
        holder.kill()
        holder.wait()
    assert proc.returncode != 0
    assert f"submit: run '{RUN}' is busy: make mopup (pid " in proc.stderr
    assert not (tree.state / "submission").exists()
    assert not (tree.state / "submit.json").exists()


def plan_built(out: Path, jobs: Path):
    """`python -m tools.hub.submit plan --built` on the tree built under OUT, for the run's JOBS."""
    from click.testing import CliRunner

    from tools.hub import submit

    return CliRunner().invoke(submit.cli, [
        "plan", "--built", "--out", str(out), "--jobs-dir", str(jobs), "--job-name", JOB, "--agent", "oracle",
        "--model", "fake-org/fake-model", "--version", "2.1", "--agent-display-name", "Oracle",
        "--agent-org-display-name", "Terminal-Bench", "--agent-url", "https://example.org"])


def test_plan_leaves_out_a_built_job_dir_that_holds_no_counted_trial(tmp_path):
    jobs = tmp_path / "jobs"
    for job in JOBS:
        (jobs / job).mkdir(parents=True)
    out = tmp_path / "out"
    dest = out / DEST_REL
    for job in JOBS:
        (dest / job).mkdir(parents=True)
        for name in ("config.json", "result.json"):
            (dest / job / name).write_text("{}")
    (dest / JOBS[0] / "t-pass__abc").mkdir()
    (dest / JOBS[0] / "t-pass__abc" / "result.json").write_text("{}")
    result = plan_built(out, jobs)
    assert result.exit_code == 0, result.output
    assert result.stdout.split("\0")[:-1] == [str(dest), str(dest / JOBS[0])]
    assert (f"submit: left out {JOBS[1]}: it holds no counted trial, so there is nothing of it to upload"
            in result.stderr)


def test_plan_refuses_two_built_job_dirs_of_one_job_id(tmp_path):
    """The built tree checked again before its Hub check: two of its job dirs of one id are refused, named."""
    jobs = tmp_path / "jobs"
    for job in JOBS:
        (jobs / job).mkdir(parents=True)
    out = tmp_path / "out"
    dest = out / DEST_REL
    jid = "d9fda20d-e564-4f94-a8ed-bcc3496f8aec"
    for job in JOBS:
        (dest / job / "t-pass__abc").mkdir(parents=True)
        (dest / job / "config.json").write_text("{}")
        (dest / job / "t-pass__abc" / "result.json").write_text("{}")
    (dest / JOBS[0] / "result.json").write_text(json.dumps({"id": jid}))
    (dest / JOBS[1] / "result.json").write_text(json.dumps({"id": jid.upper()}))  # a UUID's case is not its own
    result = plan_built(out, jobs)
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == shared_id_refusal(dest / JOBS[0], dest / JOBS[1], jid, "nothing was uploaded") + "\n"
