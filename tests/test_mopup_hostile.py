"""Mop-up against hostile files, a kill at any instant, a full disk and a live harbor.

One real `harbor run` of tests/datasets/mopup (as tests/test_mopup.py runs it) is shared by the
whole module; each test gets a private copy of its job dir in a fresh scratch tree, breaks
what it needs, and runs tools/mopup/mopup.py: as a subprocess where a hang or a SIGKILL is the
point (bounded by a timeout that kills the whole process group), through click's CliRunner
where a monkeypatched failure is. Kills are real: MOPUP_TEST_KILL_AT makes mop-up SIGKILL
itself at a named point (tools/mopup/mopup_archive.py), so "killed right after the rename" is exact.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from tests.test_mopup import (DEFAULT_PLAN, INFRA, JOB, MODEL, SCORED, FakeServer, Tree,
                              assert_mopup_kept_everything, report_line, sha256, wasted_work)
from tools.mopup import mopup
from tools.mopup import mopup_archive
from tools import safe_read

REPO = Path(__file__).resolve().parents[1]
TOOLS = REPO / "tools"

assert report_line  # a fixture, used by name
# One worker runs this module when the suite runs in parallel: its tests share one real bench
# (the benched fixture), which each worker would otherwise run again.
pytestmark = pytest.mark.xdist_group("mopup_hostile")
RUN = "mopup-test"  # the run of tests/test_mopup.py's Tree
SAFE = "a retry job is safe (it leaves this job as it is)"
NO_SERVER = SimpleNamespace(base="http://127.0.0.1:9/v1")  # plan and prepare never call the model


@pytest.fixture(scope="module")
def benched(tmp_path_factory):
    """One real harbor run, shared read-only: 4 infra-errored and 5 scored tasks."""
    tmp = tmp_path_factory.mktemp("bench")
    server = FakeServer(tmp, MODEL)
    try:
        tree = Tree(tmp, DEFAULT_PLAN, server)
        tree.bench()
    finally:
        server.stop()
    return tree


@pytest.fixture
def tree(tmp_path, benched, monkeypatch):
    """A fresh scratch tree holding a copy of the benched job; the cwd is its root, as in mop-up."""
    t = Tree(tmp_path, DEFAULT_PLAN, NO_SERVER)
    shutil.copytree(benched.root / "jobs", t.root / "jobs")
    shutil.copy(benched.log, t.log)
    shutil.copy(t.job_dir / "config.json", t.root / "current-config.json")
    monkeypatch.chdir(t.root)
    monkeypatch.delenv(mopup_archive.KILL_ENV, raising=False)
    return t


def env(**extra: str) -> dict:
    out = {k: v for k, v in os.environ.items() if k not in (mopup_archive.KILL_ENV, "RUN")}
    out.update(PYTHONPATH=str(REPO / "tests" / "harbor_env"), LITELLM_LOCAL_MODEL_COST_MAP="True",
               HF_HUB_OFFLINE="1", **extra)
    return out


def run_tool(t: Tree, *args: str, timeout: float = 90, **extra_env: str) -> subprocess.CompletedProcess:
    """tools/mopup/mopup.py in its own process group; on a hang, the whole group is killed (the tally too)."""
    proc = subprocess.Popen([sys.executable, "-m", "tools.mopup.mopup", *args], cwd=t.root, env=env(**extra_env),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"mopup.py {args[0]} hung for {timeout}s")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def plan(t: Tree, mode: str = "auto", n_concurrent: int = 3, timeout: float = 90) -> subprocess.CompletedProcess:
    return run_tool(t, "plan", "--jobs-dir", "jobs", "--job-name", JOB, "--run", RUN, "--state-dir", f"state/{RUN}",
                    "--mode", mode, "--n-concurrent", str(n_concurrent), "--current-config", "current-config.json",
                    "--out", "mopup-plan.json", timeout=timeout)


def planned(t: Tree, **kwargs) -> dict:
    proc = plan(t, **kwargs)
    assert proc.returncode == 0, proc.stderr
    return json.loads((t.root / "mopup-plan.json").read_text())


def invoke(*args: str):
    return CliRunner().invoke(mopup.cli, list(args))


def prepare_args() -> list[str]:
    return ["prepare", "--plan", "mopup-plan.json", "--state-dir", f"state/{RUN}"]


def trial(t: Tree, task: str) -> Path:
    (found,) = t.job_dir.glob(f"{task}__*")
    return found


def snapshot(*roots: Path) -> dict[str, str]:
    """Every path under roots with its content hash ('dir', 'special' for the rest): what changed?"""
    out = {}
    for root in roots:
        for path in sorted(root.rglob("*")) if root.exists() else []:
            mode = path.lstat().st_mode
            out[str(path)] = sha256(path) if stat.S_ISREG(mode) else "dir" if stat.S_ISDIR(mode) else "special"
    return out


def break_file(path: Path, kind: str) -> None:
    original = path.read_bytes() if path.is_file() else b""
    path.unlink(missing_ok=True)
    if kind == "array":
        path.write_text("[]")
    elif kind == "null":
        path.write_text("null")
    elif kind == "truncated":
        path.write_bytes(original[: len(original) // 2])
    elif kind == "not-utf8":
        path.write_bytes(b'\xff\xfe{"n_concurrent_trials": 3}')
    elif kind == "dir":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        assert kind == "missing"


def job_file(t: Tree, where: str) -> Path:
    """'config.json' (the job's) or 't-pass/config.json' (that task's trial)."""
    task, _, name = where.rpartition("/")
    return (trial(t, task) if task else t.job_dir) / name


def stderr_lines(proc) -> list[str]:
    return proc.stderr.splitlines()


# --- 1. hostile and missing files -------------------------------------------------------------

FALLBACKS = [
    ("config.json", "array", "is not a JSON object (it holds an array): mop-up cannot resume this job"),
    ("config.json", "null", "is not a JSON object (it holds null): mop-up cannot resume this job"),
    ("config.json", "truncated", "is not valid JSON (truncated?): mop-up cannot resume this job"),
    ("config.json", "not-utf8", "is not UTF-8 text (corrupt?): mop-up cannot resume this job"),
    ("config.json", "dir", "is a directory, not a file: mop-up cannot resume this job"),
    ("config.json", "missing", "is missing: mop-up cannot resume this job"),
    ("lock.json", "array", "is not a JSON object (it holds an array): harbor refuses to resume a job whose "
                           "lock.json it cannot read"),
    ("lock.json", "null", "is not a JSON object (it holds null): harbor refuses to resume a job whose "
                          "lock.json it cannot read"),
    ("lock.json", "truncated", "is not valid JSON (truncated?): harbor refuses to resume a job whose lock.json "
                               "it cannot read"),
    ("lock.json", "not-utf8", "is not UTF-8 text (corrupt?): harbor refuses to resume a job whose lock.json "
                              "it cannot read"),
    ("lock.json", "dir", "is a directory, not a file: harbor refuses to resume a job whose lock.json it "
                         "cannot read"),
    ("lock.json", "fifo", "is a FIFO, not a file: harbor would hang reading it"),
    ("lock.json", "missing", "is missing: mop-up cannot check the job's tasks and harbor version against it, "
                             "so it does not resume"),
    ("t-pass/config.json", "array", "is not a JSON object (it holds an array): harbor's resume would stop on "
                                    "this finished trial"),
    ("t-pass/config.json", "truncated", "is not valid JSON (truncated?): harbor's resume would stop on this "
                                        "finished trial"),
    ("t-pass/config.json", "missing", "is missing: harbor's resume would stop on this finished trial"),
    ("t-pass/config.json", "dir", "is a directory, not a file: harbor's resume would stop on this finished trial"),
    ("t-pass/config.json", "fifo", "is a FIFO, not a file: harbor's resume would hang reading it"),
]


@pytest.mark.e2e
@pytest.mark.parametrize("where, kind, why", FALLBACKS, ids=[f"{w}-{k}" for w, k, _ in FALLBACKS])
def test_a_file_harbor_cannot_resume_with_makes_a_retry_job(tree, where, kind, why):
    path = job_file(tree, where)
    break_file(path, kind)
    before = snapshot(tree.root / "jobs")
    proc = plan(tree)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"  - {mopup_archive.shown(path)} {why}; {SAFE}" in stderr_lines(proc)
    assert "mechanism: a standalone retry job, because resuming the job in place cannot work:" in proc.stderr
    p = json.loads((tree.root / "mopup-plan.json").read_text())
    assert (p["mode"], p["retry_job_name"], p["archive"]) == ("retry-job", f"{JOB}-retry-1", [])
    assert {t["task"] for t in p["tasks"]} == INFRA  # never a scored task
    assert snapshot(tree.root / "jobs") == before and not tree.state.exists()


@pytest.mark.e2e
def test_forced_resume_names_the_broken_file_and_changes_nothing(tree):
    break_file(tree.job_dir / "config.json", "truncated")
    before = snapshot(tree.root / "jobs")
    proc = plan(tree, mode="resume")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert stderr_lines(proc) == [
        "Error: MOPUP_MODE=resume, but resuming the job in place cannot work:",
        f"  - jobs/{JOB}/config.json is not valid JSON (truncated?): mop-up cannot resume this job; {SAFE}",
        "Run with MOPUP_MODE=auto (or retry-job) for a standalone retry job instead."]
    assert snapshot(tree.root / "jobs") == before and not (tree.root / "mopup-plan.json").exists()


@pytest.mark.e2e
@pytest.mark.parametrize("task, kind", [("t-pass", "array"), ("t-pass", "null"), ("t-sandbox", "array"),
                                        ("t-sandbox", "not-utf8")])
def test_an_unreadable_trial_result_is_archived_and_rerun(tree, task, kind):
    # The tally calls such a task unfinished, so it is retried; its dir leaves the job first.
    broken = trial(tree, task)
    break_file(broken / "result.json", kind)
    p = planned(tree)
    assert p["mode"] == "resume"
    assert {t["task"] for t in p["tasks"]} == INFRA | {task}
    assert {(a["task"], a["src"]) for a in p["archive"]} >= {(task, str(broken))}
    assert len(p["archive"]) == len(INFRA | {task})


@pytest.mark.e2e
def test_an_errored_trial_without_any_readable_file_still_leaves_the_job(tree):
    # Its task comes from the dir's name, as the tally reads it: harbor must not keep it.
    broken = trial(tree, "t-sandbox")
    break_file(broken / "result.json", "array")
    break_file(broken / "config.json", "missing")
    p = planned(tree)
    assert ("t-sandbox", str(broken)) in {(a["task"], a["src"]) for a in p["archive"]}


SPECIALS = [
    ("config.json", {}),
    ("result.json", {}),
    ("t-pass/result.json", {}),
    ("t-sandbox/config.json", {"t-sandbox/result.json": "array"}),  # the tally falls back to config.json
]


@pytest.mark.e2e
@pytest.mark.parametrize("where, also", SPECIALS, ids=[w for w, _ in SPECIALS])
def test_a_fifo_the_tally_would_open_stops_mopup_without_hanging(tree, where, also):
    for other, kind in also.items():
        break_file(job_file(tree, other), kind)
    path = job_file(tree, where)
    break_file(path, "fifo")
    before = snapshot(tree.root / "jobs")
    proc = plan(tree, timeout=30)
    assert proc.returncode == 1
    assert proc.stderr == (f"Error: {path.relative_to(tree.root)} is a FIFO, not a file: make tally would hang "
                           "reading it (mop-up never opens it). Move it out of the job (harbor never writes one), "
                           "then run make mopup again\n")
    assert snapshot(tree.root / "jobs") == before
    assert not (tree.root / "mopup-plan.json").exists() and not tree.state.exists()


@pytest.mark.e2e
def test_a_broken_job_config_is_mopped_up_by_a_retry_job_with_no_wasted_work(tree, report_line):
    server = FakeServer(tree.root.parent, MODEL)
    try:
        tree.server = server
        break_file(tree.job_dir / "config.json", "truncated")
        broken = (tree.job_dir / "config.json").read_bytes()
        hashes, before_dirs = tree.scored_hashes(), tree.trial_dirs()
        proc = tree.mopup()
    finally:
        server.stop()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"  - jobs/{JOB}/config.json is not valid JSON (truncated?): mop-up cannot resume this job; {SAFE}" \
        in stderr_lines(proc)
    assert sorted(r["task"] for r in tree.executed("mopup")) == sorted(INFRA)
    assert {r["job"] for r in tree.executed("mopup")} == {f"{JOB}-retry-1"}
    assert wasted_work(tree.executed("mopup"), SCORED, report_line) == 0
    assert_mopup_kept_everything(tree, before_dirs, hashes)
    assert (tree.job_dir / "config.json").read_bytes() == broken  # left as it was
    assert "re-ran 4 of 4 planned trials" in proc.stdout + proc.stderr


# --- 2. never archive a trial dir a live process is writing ----------------------------------


def spawn(argv: list[str], cwd: Path, ready) -> subprocess.Popen:
    """A child that lives at most 60 s; returns once `ready(fds, cmdline, comm)` holds for it in /proc.

    The predicate must name what the child does after its exec (a file it opened, its own comm):
    between fork and exec /proc shows the parent's command line, and a path given as an argument
    is on the command line before the file is open, which once let the check run too early."""
    child = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 15
    while True:
        proc = Path(f"/proc/{child.pid}")
        try:
            fds = [os.readlink(proc / "fd" / fd) for fd in os.listdir(proc / "fd")]
            cmdline = (proc / "cmdline").read_bytes().decode().replace("\0", " ")
            shown = ready(fds, cmdline, (proc / "comm").read_text().strip())
        except OSError:
            shown = False
        if shown:
            return child
        assert child.poll() is None and time.monotonic() < deadline, f"child never became ready: {argv}"
        time.sleep(0.05)


def comm(pid: int) -> str:
    return Path(f"/proc/{pid}/comm").read_text().strip()


@pytest.fixture
def children():
    started: list[subprocess.Popen] = []
    yield started
    for child in started:
        child.kill()
        child.wait(timeout=10)


needs_proc = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs Linux /proc")


@pytest.mark.e2e
@needs_proc
def test_prepare_refuses_while_a_process_holds_a_file_in_a_trial_dir(tree, children):
    planned(tree)
    held = trial(tree, "t-cancel") / "trial.log"
    children.append(spawn([sys.executable, "-c", "import sys, time; f = open(sys.argv[1], 'a'); time.sleep(60)",
                           str(held)], tree.root, lambda fds, cmdline, comm: str(held) in fds))
    pid = children[0].pid
    before = snapshot(tree.root / "jobs")
    result = invoke(*prepare_args())
    assert result.exit_code == 1
    assert result.output == (f"Error: nothing moved: pid {pid} ({comm(pid)}) is still using "
                             f"jobs/{JOB}/{held.parent.name}. Wait for it to finish (or stop it), "
                             "then run make mopup again\n")
    assert snapshot(tree.root / "jobs") == before and tree.manifest() == []

    children[0].kill()
    children[0].wait(timeout=10)
    again = invoke(*prepare_args())
    assert again.exit_code == 0, again.output
    assert len(tree.archived()) == len(INFRA)


@pytest.mark.e2e
@needs_proc
def test_prepare_refuses_while_harbor_works_on_the_job(tree, children, tmp_path):
    planned(tree)
    # Not harbor: a shell sitting in the job dir (outside any trial dir) is no reason to wait.
    children.append(spawn(["sleep", "60"], tree.job_dir, lambda fds, cmdline, comm: comm == "sleep"))
    # A harbor started by hand on this job: its command line names the job, nothing else does.
    fake = tmp_path / "bin" / "harbor"
    fake.parent.mkdir()
    fake.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(60)\n")
    fake.chmod(0o755)
    children.append(spawn([str(fake), "run", "--jobs-dir", "jobs", "--job-name", JOB, "-y"], tree.root,
                          lambda fds, cmdline, comm: f"--job-name {JOB}" in cmdline and str(fake) in cmdline))
    harbor = children[1].pid
    result = invoke(*prepare_args())
    assert result.exit_code == 1
    assert result.output == (f"Error: nothing moved: pid {harbor} ({comm(harbor)}) is still using jobs/{JOB}. "
                             "Wait for it to finish (or stop it), then run make mopup again\n")
    assert tree.manifest() == []
    # The same for a harbor whose cwd is the job dir, with another job's name on its command line.
    children[1].kill()
    children[1].wait(timeout=10)
    children.append(spawn(["bash", "-c", "exec -a harbor sleep 60"], tree.job_dir,
                          lambda fds, cmdline, comm: comm == "sleep"))
    result = invoke(*prepare_args())
    assert result.exit_code == 1 and f"pid {children[2].pid} (sleep) is still using jobs/{JOB}. " in result.output


@pytest.mark.e2e
def test_without_proc_prepare_notes_it_cannot_check_and_goes_on(tree, monkeypatch, tmp_path):
    planned(tree)
    monkeypatch.setattr(mopup_archive, "PROC", tmp_path / "no-proc")
    result = invoke(*prepare_args())
    assert result.exit_code == 0, result.output
    assert (f"note: cannot check that no process is still writing jobs/{JOB} ({tmp_path / 'no-proc'} is not "
            "available on this system); make sure no harbor of this run is running") in result.output.splitlines()
    assert len(tree.archived()) == len(INFRA)


# --- 3. a SIGKILL at any instant: the archive is read from the disk too ----------------------


def killed_prepare(t: Tree, point: str) -> subprocess.CompletedProcess:
    proc = run_tool(t, *prepare_args(), **{mopup_archive.KILL_ENV: point})
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    return proc


@pytest.mark.e2e
def test_a_dir_moved_by_a_mopup_killed_before_its_record_is_listed_and_restorable(tree):
    p = planned(tree)
    first = Path(p["archive"][0]["src"])
    result_before = sha256(first / "result.json")
    killed_prepare(tree, "after-rename")
    dest = tree.state / "archive" / p["batch"] / JOB / first.name
    assert not first.exists() and dest.is_dir()
    assert tree.archived() == set()  # the manifest says "moving", never "moved"

    listing = invoke("archive", "--state-dir", f"state/{RUN}")
    assert listing.exit_code == 0
    assert listing.output == (f"archived  {p['batch']}  {JOB}/{first.name}  task={p['archive'][0]['task']}  "
                              f"from {first}  (not in manifest: moved by an interrupted mop-up)\n")
    restored = invoke("restore", "--state-dir", f"state/{RUN}", first.name)
    assert restored.exit_code == 0, restored.output
    assert restored.output == f"restored {first}\n"
    assert sha256(first / "result.json") == result_before and not dest.exists()
    assert invoke("archive", "--state-dir", f"state/{RUN}").output.startswith("restored  ")


@pytest.mark.e2e
def test_rerunning_a_killed_prepare_finishes_it_and_completes_the_manifest(tree):
    p = planned(tree)
    killed_prepare(tree, "after-rename#2")  # two dirs moved, the second without its record
    again = invoke(*prepare_args())
    assert again.exit_code == 0, again.output
    assert tree.archived() == {a["src"] for a in p["archive"]}
    recovered = [r for r in tree.manifest() if r.get("why", "").startswith("recorded by a rerun")]
    assert [r["src"] for r in recovered] == [p["archive"][1]["src"]]
    lines = invoke("archive", "--state-dir", f"state/{RUN}").output.splitlines()
    assert len(lines) == len(INFRA) and all(line.startswith("archived  ") and "not in manifest" not in line
                                            for line in lines)


@pytest.mark.e2e
def test_a_kill_before_the_rename_moves_nothing(tree):
    p = planned(tree)
    before = snapshot(tree.root / "jobs")
    killed_prepare(tree, "after-moving-record")
    assert snapshot(tree.root / "jobs") == before
    listing = invoke("archive", "--state-dir", f"state/{RUN}")
    assert listing.output == f"the archive of run {RUN} is empty: mop-up has moved nothing out of its jobs\n"
    assert invoke(*prepare_args()).exit_code == 0
    assert tree.archived() == {a["src"] for a in p["archive"]}


@pytest.mark.e2e
def test_a_manifest_record_whose_dir_is_gone_is_listed_missing(tree, tmp_path):
    p = planned(tree)
    assert invoke(*prepare_args()).exit_code == 0
    gone = Path(p["archive"][0]["src"])
    elsewhere = tmp_path / "moved-by-someone"
    (tree.state / "archive" / p["batch"] / JOB / gone.name).rename(elsewhere)  # kept, just not where it was
    lines = invoke("archive", "--state-dir", f"state/{RUN}").output.splitlines()
    assert lines[0] == (f"MISSING   {p['batch']}  {JOB}/{gone.name}  task={p['archive'][0]['task']}  from {gone}  "
                        "(in the manifest, but neither in the archive nor back in its job)")
    assert len(lines) == len(INFRA) and all(line.startswith("archived  ") for line in lines[1:])
    named = invoke("restore", "--state-dir", f"state/{RUN}", gone.name)
    assert named.exit_code == 1
    assert named.output == (f"Error: {gone.name} is neither in the archive "
                            f"(state/{RUN}/archive/{p['batch']}/{JOB}/{gone.name}) nor back in its job\n")
    everything = invoke("restore", "--state-dir", f"state/{RUN}", "all")
    assert everything.exit_code == 0
    assert sum(line.startswith("restored ") for line in everything.output.splitlines()) == len(INFRA) - 1


def test_a_dir_in_the_archive_with_no_record_at_all(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    state = tmp_path / "state" / "r"
    stray = state / "archive" / "B1" / "j" / "t-x__abc1234"
    stray.mkdir(parents=True)
    listing = invoke("archive", "--state-dir", str(state))
    assert listing.output == ("archived  B1  j/t-x__abc1234  task=?  from ?  "
                              "(not in manifest: moved by an interrupted mop-up)\n")
    refused = invoke("restore", "--state-dir", str(state), "t-x__abc1234")
    assert refused.exit_code == 1
    assert refused.output == ("Error: no record says which job state/r/archive/B1/j/t-x__abc1234 came from: "
                              "move it back into its job dir by hand\n")
    # The batch's saved plan (scripts/mopup.sh keeps it) says where it came from.
    (state / "mopup-plans").mkdir()
    src = tmp_path / "jobs" / "j" / "t-x__abc1234"
    (state / "mopup-plans" / "B1.json").write_text(json.dumps(
        {"archive": [{"src": str(src), "job": "j", "task": "t-x", "finished": False}]}))
    assert invoke("restore", "--state-dir", str(state), "all").output == f"restored {src}\n"
    assert src.is_dir() and not stray.exists()


def test_a_manifest_line_cut_short_by_a_kill_is_skipped_and_never_glued_to_the_next(tmp_path):
    state = tmp_path / "state" / "r"
    state.mkdir(parents=True)
    (state / "manifest.jsonl").write_text('{"event": "bench"}\n{"event": "archive", "sta')
    mopup_archive.append_manifest(state, {"event": "concurrency", "to": 1})
    records, broken = mopup_archive.read_manifest_lines(state)
    assert [r["event"] for r in records] == ["bench", "concurrency"] and broken == 1


# --- 4. no stray temp files ---------------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.parametrize("nth, where", [(1, "backup"), (3, "job")])
def test_a_temp_file_left_by_a_kill_is_removed_by_the_next_prepare_and_nothing_else(tree, nth, where):
    p = planned(tree, n_concurrent=1)  # a concurrency patch: two backups, then two files rewritten
    # Files of the same suffix that mop-up never writes: they stay, byte for byte.
    decoys = [tree.job_dir / "notes.mopup-tmp", trial(tree, "t-pass") / "config.json.mopup-tmp",
              tree.state / "archive" / "config.json.mopup-tmp"]
    for decoy in decoys:
        decoy.parent.mkdir(parents=True, exist_ok=True)
        decoy.write_text("not mop-up's")
    original = {n: (tree.job_dir / n).read_bytes() for n in ("config.json", "lock.json")}
    killed_prepare(tree, f"after-temp-write#{nth}")  # the 1st temp is config.json's backup, the 3rd its new text
    job_files = tree.state / "archive" / p["batch"] / f"{JOB}.job-files"
    left = (job_files if where == "backup" else tree.job_dir) / "config.json.mopup-tmp"
    assert left.is_file()
    assert {n: (tree.job_dir / n).read_bytes() for n in original} == original
    before = snapshot(tree.root / "jobs", tree.state)

    again = invoke(*prepare_args())
    assert again.exit_code == 0, again.output
    assert f"removed {mopup_archive.shown(left)}, a temp file of an interrupted mop-up" in again.output.splitlines()
    ours = [x for x in (tree.root / "jobs").rglob("*.mopup-tmp")] + list(tree.state.rglob("*.mopup-tmp"))
    assert sorted(ours) == sorted(decoys) and all(d.read_text() == "not mop-up's" for d in decoys)
    assert {n: json.loads((tree.job_dir / n).read_text())["n_concurrent_trials"] for n in original} == \
        {"config.json": 1, "lock.json": 1}
    assert {n: (job_files / n).read_bytes() for n in original} == original  # the backups hold the originals
    # Nothing else changed: the differences are the patched files, the moved dirs, the backups, the manifest.
    after = snapshot(tree.root / "jobs", tree.state)
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    moved = {a["src"] for a in p["archive"]}
    expected_roots = moved | {str(tree.state / "archive" / p["batch"] / JOB), str(job_files),
                              str(tree.job_dir / "config.json"), str(tree.job_dir / "lock.json"),
                              str(tree.state / "manifest.jsonl"), str(left)}
    assert all(any(k == r or k.startswith(r + os.sep) for r in expected_roots) for k in changed), changed


# --- 5. a full disk -----------------------------------------------------------------------------


def no_space(*_args, **_kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.mark.e2e
def test_a_full_disk_at_the_first_record_moves_nothing(tree, monkeypatch):
    planned(tree)
    before = snapshot(tree.root / "jobs")
    monkeypatch.setattr(mopup_archive, "_append_line", no_space)
    result = invoke(*prepare_args())
    assert result.exit_code == 1
    assert result.output == (f"Error: no space left on device while writing state/{RUN}/manifest.jsonl: "
                             "free space and run make mopup again; nothing was moved\n")
    assert snapshot(tree.root / "jobs") == before


@pytest.mark.e2e
def test_a_full_disk_mid_archive_says_what_was_moved_and_where_it_is_recorded(tree, monkeypatch):
    p = planned(tree)
    real_rename, calls = os.rename, []

    def rename_then_fill_up(src, dest):
        calls.append(src)
        if len(calls) == 2:
            no_space()
        real_rename(src, dest)

    monkeypatch.setattr(mopup_archive, "_rename", rename_then_fill_up)
    result = invoke(*prepare_args())
    assert result.exit_code == 1
    second = Path(p["archive"][1]["src"])
    assert result.output == (
        f"Error: no space left on device while moving jobs/{JOB}/{second.name} to "
        f"state/{RUN}/archive/{p['batch']}/{JOB}/{second.name}: free space and run make mopup again; "
        f"1 trial dir(s) were moved to the archive before that, each recorded in state/{RUN}/manifest.jsonl "
        "(make mopup-archive lists them)\n")
    assert tree.archived() == {p["archive"][0]["src"]} and second.is_dir()


@pytest.mark.e2e
def test_a_full_disk_while_patching_the_concurrency_leaves_the_files_as_they_were(tree, monkeypatch):
    p = planned(tree, n_concurrent=1)
    original = {n: (tree.job_dir / n).read_bytes() for n in ("config.json", "lock.json")}
    real_write = safe_read._write_temp

    def fill_up_on_the_job_files(fd, tmp, data):
        if Path(tmp).parent == tree.job_dir:
            real_write(fd, tmp, data[:10])  # half written, then the disk is full
            no_space()
        real_write(fd, tmp, data)

    monkeypatch.setattr(safe_read, "_write_temp", fill_up_on_the_job_files)
    result = invoke(*prepare_args())
    assert result.exit_code == 1
    assert result.output == (
        f"Error: no space left on device while writing jobs/{JOB}/config.json: free space and run make mopup "
        f"again; {len(p['archive'])} trial dir(s) were moved to the archive before that, each recorded in "
        f"state/{RUN}/manifest.jsonl (make mopup-archive lists them)\n")
    assert {n: (tree.job_dir / n).read_bytes() for n in original} == original
    assert not list(tree.job_dir.glob("*.mopup-tmp"))


@pytest.mark.e2e
def test_a_full_disk_while_writing_the_plan(tree, monkeypatch):
    monkeypatch.setattr(safe_read, "_write_temp", no_space)
    result = invoke("plan", "--jobs-dir", "jobs", "--job-name", JOB, "--run", RUN, "--state-dir", f"state/{RUN}",
                    "--n-concurrent", "3", "--current-config", "current-config.json", "--out", "mopup-plan.json")
    assert result.exit_code == 1
    assert result.output == ("Error: no space left on device while writing mopup-plan.json: free space and run "
                             "make mopup again; nothing was moved\n")
    assert not (tree.root / "mopup-plan.json").exists() and not (tree.root / "mopup-plan.json.mopup-tmp").exists()


# --- 6. an empty archive --------------------------------------------------------------------------


@pytest.mark.parametrize("manifest", [None, '{"event": "bench", "role": "bench"}\n'])
def test_an_empty_archive_says_so_and_changes_nothing(tmp_path, monkeypatch, manifest):
    monkeypatch.chdir(tmp_path)
    state = tmp_path / "state" / "r"
    if manifest is not None:
        state.mkdir(parents=True)
        (state / "manifest.jsonl").write_text(manifest)
    before = snapshot(tmp_path)
    restored = invoke("restore", "--state-dir", str(state), "all")
    assert (restored.exit_code, restored.output) == (0, "the archive of run r is empty: nothing to restore\n")
    listed = invoke("archive", "--state-dir", str(state))
    assert (listed.exit_code, listed.output) == (
        0, "the archive of run r is empty: mop-up has moved nothing out of its jobs\n")
    assert snapshot(tmp_path) == before


# --- 7. never invite a concurrent run ---------------------------------------------------------------


def test_the_report_asks_for_another_mopup_only_once_this_one_has_finished(tmp_path):
    jobs = tmp_path / "jobs"
    (jobs / "j" / "t-a__1111111").mkdir(parents=True)
    (jobs / "j" / "t-a__1111111" / "result.json").write_text(json.dumps({"task_name": "t-a"}))
    (tmp_path / "plan.json").write_text(json.dumps({"jobs_dir": str(jobs), "job_name": "j", "trial_dirs_before": [],
                                                    "tasks": [{"task": "t-a"}, {"task": "t-b"}]}))
    result = invoke("report", "--plan", str(tmp_path / "plan.json"))
    assert result.output.splitlines() == ["re-ran 1 of 2 planned trials",
                                          "not re-run (yet): t-b: run make mopup again once this one has finished"]


def test_every_message_that_suggests_another_mopup_says_when():
    # "Run it again" must never read as "now, in another terminal": each says once what.
    conditional = ("once this one has finished", "then run make mopup again", "free space and run",
                   "fix that and run")
    for path in sorted((TOOLS / "mopup").glob("mopup*.py")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            assert "another terminal" not in line, f"{path.name}:{number}"
            if re.search(r"\bagain\b", line) and not line.lstrip().startswith("#"):
                assert any(c in line for c in conditional), f"{path.name}:{number}: {line.strip()}"
