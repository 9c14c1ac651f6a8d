"""tools/run/harbor_guard.py: harbor is ended when it lingers after its job has finished.

Every scenario runs real processes: the watchdog, and as its child either a fake "harbor"
(FAKE_HARBOR below, written into tmp, which writes its job's result.json with harbor's own
JobResult model, so the format is harbor's) or the real harbor 0.25.0 on the local dataset
tests/datasets/mopup with tests/harbor_env/scripted_env.py playing the sandbox.

Wall-clock bounds here are generous (they only keep a broken watchdog from hanging the
suite); what is asserted is the event file, the exit code and the fake's own records.
"""

from __future__ import annotations

import inspect
import json
import os
import select
import shutil
import signal
import subprocess
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from uuid import uuid4

import pytest
from harbor import job as harbor_job
from harbor.cli import jobs as harbor_cli_jobs
from harbor.job import Job
from harbor.models.job.result import JobResult, JobStats
from harbor.models.trial.paths import TrialPaths
from harbor.models.trial.result import ExceptionInfo, TrialResult
from harbor.trial.trial import Trial

from tests.fixtures.harbor_jobs import TrialSpec, rewrite_result, trial_name, write_job
from tools.run import harbor_guard
from tools.run import harbor_guard_job
from tools.run import harbor_guard_signals
from tools.run import harbor_guard_words

REPO = Path(__file__).resolve().parents[1]
PYTHON = str(REPO / ".venv" / "bin" / "python")
WATCH = "tools.run.harbor_guard"  # run as a module, as scripts/lib-run.sh runs it
BOUND_S = 60

# A stand-in for harbor. argv: MODE JOB_DIR MARKS_DIR. It records what happened to it as
# files in MARKS_DIR ("working", "finished", and "signals": one line per signal received).
FAKE_HARBOR = r'''
import os, shutil, signal, sys, time
from datetime import datetime
from pathlib import Path
from uuid import uuid4
from harbor.models.job.result import JobResult, JobStats

mode, job_dir, marks = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])

def mark(name):
    (marks / name).write_text("")

def write_result(finished):
    # As harbor's Job does: the JobResult without trial_results, finished_at set only at the end.
    now = datetime.now()
    result = JobResult(id=uuid4(), started_at=now, updated_at=now, finished_at=now if finished else None,
                       n_total_trials=2, stats=JobStats(n_completed_trials=2 if finished else 1))
    job_dir.mkdir(parents=True, exist_ok=True)
    (job_dir / "result.json").write_text(result.model_dump_json(indent=4, exclude={"trial_results"}))

def trial(name, finished):
    path = job_dir / name
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text("{}")
    if finished:
        (path / "result.json").write_text("{}")

def start_looking():
    # An inotify watch on the job dir for the opens of its result.json from now on (IN_OPEN on a
    # directory reports each file opened in it, by name, so it works before result.json exists):
    # started before harbor writes what the watch reacts to, no look can come before it.
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    job_dir.mkdir(parents=True, exist_ok=True)
    fd = libc.inotify_init1(os.O_CLOEXEC)
    assert fd >= 0 and libc.inotify_add_watch(fd, str(job_dir).encode(), 0x20) >= 0  # IN_OPEN
    return fd

def watch_looked(times, since=None):
    # Blocks until the watch has opened the job's result.json `times` times from now (inotify
    # IN_OPEN; it opens it once a poll), or since `since` (a start_looking() watch): what the file
    # and the trial dirs held meanwhile, the watch has seen, however loaded the machine. Bounded:
    # 60 s without a look and it goes on.
    import ctypes, select, struct
    if since is None:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.inotify_init1(os.O_CLOEXEC)
        assert fd >= 0 and libc.inotify_add_watch(fd, str(job_dir / "result.json").encode(), 0x20) >= 0
    else:
        fd = since
    seen, deadline = 0, time.monotonic() + 60
    while seen < times and select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
        data, offset = os.read(fd, 4096), 0
        while offset < len(data):
            size = struct.unpack_from("iIII", data, offset)[3]
            name = data[offset + 16:offset + 16 + size].rstrip(b"\0")
            offset += 16 + size
            seen += name in (b"", b"result.json")  # the file's own watch names nothing
    os.close(fd)

# Looks of the watch that span more than the tests' grace (1 s at --poll 0.1).
PAST_THE_GRACE = 15

def linger():
    for _ in range(1200):  # bounded: gone by itself after 120 s
        time.sleep(0.1)
    sys.exit(0)

def exit_soon(looks, since):
    # Harbor's last second after its job ended (closing its sessions), within any grace: once the
    # watch has seen the end (`looks` opens of result.json since `since`, a start_looking() made
    # before the end was written: a watch that saw the end at once looks no more), it exits by
    # itself, 0, unless a signal ends it first (then recorded, and the exit is 128 + N).
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda signum, frame: (on_signal(signum, frame), sys.exit(128 + signum)))
    watch_looked(looks, since)
    time.sleep(1)
    sys.exit(0)

def on_signal(signum, _frame):
    with (marks / "signals").open("a") as out:
        out.write(signal.Signals(signum).name + "\n")

if mode == "resume":
    watch_looked(2)                # harbor resolving its dataset: the stale result is still there
    mark("working")
    write_result(finished=False)   # Job.run rewrites result.json as soon as it starts
    watch_looked(2)
if mode == "ignore-term":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
if mode in ("ignore-int", "ignore-int-term"):
    # An interrupted harbor that does not exit: its SIGINT (or INT and TERM) recorded, nothing more.
    def stubborn(signum, _frame):
        on_signal(signum, _frame)
        if signum == signal.SIGTERM and mode == "ignore-int":
            sys.exit(7)
    signal.signal(signal.SIGINT, stubborn)
    signal.signal(signal.SIGTERM, stubborn)
    (marks / "pid").write_text(str(os.getpid()))
    mark("ready")
    linger()
if mode in ("interrupted", "interrupted-exit-soon", "cancel-then-go-on", "resumed"):
    # Trial dirs written by harbor's own models (PROTO, made by the test): copied in as harbor
    # would write them. PROTO's job result.json has finished_at null, as an interrupted harbor leaves it.
    proto = Path(os.environ["PROTO"])
    def copy_trial(name, finished=True):
        shutil.copytree(proto / name, job_dir / name, ignore=None if finished else shutil.ignore_patterns("result.json"))
    if mode == "resumed":
        watch_looked(PAST_THE_GRACE)  # resolving the dataset: the earlier run's cancellation is all there is
        copy_trial(os.environ["PASSED"])
        write_result(finished=True)
        mark("finished")
        sys.exit(0)
    job_dir.mkdir(parents=True, exist_ok=True)
    looking = start_looking() if mode == "interrupted-exit-soon" else None
    shutil.copy(proto / "result.json", job_dir / "result.json")
    copy_trial(os.environ["PASSED"])
    copy_trial(os.environ["CANCELLED"])
    if mode == "interrupted":
        (marks / "pid").write_text(str(os.getpid()))
        mark("ready")
        linger()                   # interrupted, every trial written, and alive: the linger after an interrupt
    if mode == "interrupted-exit-soon":
        exit_soon(2, looking)
    watch_looked(2)                # a trial's own CancelledError; harbor goes on with the next trial
    copy_trial(os.environ["NEXT"], finished=False)
    watch_looked(PAST_THE_GRACE)
    shutil.copy(proto / os.environ["NEXT"] / "result.json", job_dir / os.environ["NEXT"] / "result.json")
    write_result(finished=True)
    mark("finished")
    sys.exit(0)
if mode == "count-signals":
    # Every INT and TERM recorded, none obeyed: what ends it is the watch's own escalation (TERM,
    # then KILL, --term-wait apart), so every copy of a signal the watch passed on is on record.
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    mark("ready")
    linger()
if mode == "exit-on-signal":
    # The first INT or TERM recorded, then gone, 0: a harbor that obeys at once.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda signum, frame: (on_signal(signum, frame), sys.exit(0)))
    mark("ready")
    linger()
looking = start_looking() if mode == "exit-soon" else None
trial("t-a__aaaaaaa", finished=True)
trial("t-b__bbbbbbb", finished=mode != "ignore-term")
write_result(finished=True)
mark("finished")
if mode == "exit3":
    sys.exit(3)
if mode == "exit-soon":
    exit_soon(1, looking)
linger()
'''

# Makes the process that runs it the leader of a new session whose controlling terminal is
# the pty slave named by argv[1], then runs argv[2:]: a terminal where Ctrl-C can be typed.
PTY_LAUNCHER = r'''
import fcntl, os, sys, termios
os.setsid()
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.ioctl(fd, termios.TIOCSCTTY, 0)
for n in (0, 1, 2):
    os.dup2(fd, n)
os.execv(sys.argv[2], sys.argv[2:])
'''


class Scene:
    """A tmp dir with a job dir, the fake harbor, its marks and the event file."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.job_dir = tmp / "jobs" / "job"
        self.marks = tmp / "marks"
        self.marks.mkdir()
        self.events = tmp / "events.jsonl"
        self.fake = tmp / "fake_harbor.py"
        self.fake.write_text(FAKE_HARBOR)

    def argv(self, mode: str, grace: float = 1, term_wait: float = 5, poll: float = 0.2) -> list[str]:
        return [PYTHON, "-m", WATCH, "run", "--job-dir", str(self.job_dir), "--grace", str(grace),
                "--term-wait", str(term_wait), "--poll", str(poll), "--event-file", str(self.events),
                "--", PYTHON, str(self.fake), mode, str(self.job_dir), str(self.marks)]

    def run(self, mode: str, env: dict | None = None, **timing) -> subprocess.CompletedProcess:
        proc = self.start(mode, env, **timing)
        try:
            out, err = proc.communicate(timeout=BOUND_S)
        finally:
            stop_session(proc)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    def start(self, mode: str, env: dict | None = None, **timing) -> subprocess.Popen:
        # Its own session, so a test can end the watchdog and its harbor together; and no
        # controlling terminal: a signal sent to it came from kill, not from Ctrl-C.
        return subprocess.Popen(self.argv(mode, **timing), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True,
                                env=None if env is None else {**os.environ, **env})

    def event_lines(self) -> list[dict]:
        return [json.loads(line) for line in self.events.read_text().splitlines()] if self.events.exists() else []

    def finished_at(self) -> str:
        return json.loads((self.job_dir / "result.json").read_text())["finished_at"]

    def signals(self) -> list[str]:
        path = self.marks / "signals"
        return path.read_text().split() if path.exists() else []

    def wait_for_mark(self, name: str, proc: subprocess.Popen) -> None:
        deadline = time.monotonic() + BOUND_S
        while not (self.marks / name).exists():
            assert proc.poll() is None and time.monotonic() < deadline, f"the fake harbor never marked {name}"
            time.sleep(0.05)


def stop_session(proc: subprocess.Popen) -> None:
    """A watchdog that outlived its test, with whatever it started: gone.

    Only while it still runs (unreaped, its pid can name no other group); a fake harbor it
    left behind ends by itself within two minutes.
    """
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=BOUND_S)


@pytest.fixture
def scene(tmp_path):
    return Scene(tmp_path)


def harbor_job_result(finished: bool) -> str:
    now = datetime.now()
    result = JobResult(id=uuid4(), started_at=now - timedelta(hours=1), updated_at=now,
                       finished_at=now if finished else None, n_total_trials=2, stats=JobStats())
    return result.model_dump_json(indent=4, exclude={"trial_results"})


def assert_event(event: dict, scene: Scene, signal_name: str, grace) -> None:
    assert set(event) == {"event", "job_dir", "finished_at", "grace_s", "signal", "at"}
    assert event["event"] == "harbor-lingered"
    assert event["job_dir"] == str(scene.job_dir)
    assert event["finished_at"] == scene.finished_at()
    assert event["grace_s"] == grace
    assert event["signal"] == signal_name
    datetime.strptime(event["at"], "%Y-%m-%dT%H:%M:%SZ")


# --------------------------------------------------------------------------- harbor's own model


def test_the_fields_relied_on_exist_on_harbors_own_model():
    # A harbor upgrade that renames or moves any of these must fail here, not in a 12 h run.
    assert {"finished_at", "n_total_trials", "stats"} <= set(JobResult.model_fields)
    assert "n_completed_trials" in JobStats.model_fields
    assert '"result.json"' in inspect.getsource(Job._job_result_path.fget)
    run_source = inspect.getsource(Job.run)
    assert "self._job_result.finished_at = finished_at" in run_source
    # ...and only Job.run's success path persists it (the except branch keeps it in memory).
    assert inspect.getsource(Job).count(".finished_at = ") == 2
    assert "persisted result keeps finished_at unset" in run_source


def test_what_an_interrupted_harbor_does_and_writes_is_as_relied_on():
    # TERM is Ctrl-C to `harbor run` (harbor/cli/jobs.py: _execute_job installs _handle_sigterm,
    # which raises KeyboardInterrupt): the stop of a harbor started with SIGINT ignored.
    assert "raise KeyboardInterrupt" in inspect.getsource(harbor_cli_jobs._handle_sigterm)
    assert "signal.signal(signal.SIGTERM, _handle_sigterm)" in inspect.getsource(harbor_cli_jobs._execute_job)
    # A cancelled trial still writes its result.json, with exception_type "CancelledError"
    # (harbor/trial/trial.py, harbor/models/trial/result.py, harbor/models/trial/paths.py)...
    run = inspect.getsource(Trial.run)
    assert "except asyncio.CancelledError as exc:" in run and "self._record_exception(exc)" in run
    assert "exception_type=type(e).__name__" in inspect.getsource(ExceptionInfo.from_exception)
    assert "self.paths.result_path.write_text(" in inspect.getsource(Trial._finalize)
    assert '"result.json"' in inspect.getsource(TrialPaths.result_path.fget)
    assert {"exception_info", "finished_at"} <= set(TrialResult.model_fields)
    assert "exception_type" in ExceptionInfo.model_fields
    assert harbor_job.CANCELLED_ERROR_TYPE == harbor_guard_job.CANCELLED == "CancelledError"
    # ...while the job's finished_at is never written (test_the_fields_relied_on_exist_on_harbors_own_model).


def test_a_finish_is_read_from_harbors_own_json(tmp_path):
    path = tmp_path / "result.json"
    path.write_text(harbor_job_result(finished=False))
    assert harbor_guard_job.finished_at(harbor_guard_job.read_job_result(str(path))) is None
    path.write_text(harbor_job_result(finished=True))
    done = json.loads(path.read_text())["finished_at"]
    assert harbor_guard_job.finished_at(harbor_guard_job.read_job_result(str(path))) == done
    assert harbor_guard_job.new_finish(harbor_guard_job.read_job_result(str(path)), baseline=None) == done
    assert harbor_guard_job.new_finish(harbor_guard_job.read_job_result(str(path)), baseline=done) is None  # the stale one of a resume
    assert harbor_guard_job.new_finish(harbor_guard_job.read_job_result(str(path)), baseline="2020-01-01T00:00:00") == done


def test_bad_reads_are_no_answer_and_never_block(tmp_path, monkeypatch):
    path = tmp_path / "result.json"
    assert harbor_guard_job.read_job_result(str(path)) is None                      # not written yet
    full = harbor_job_result(finished=True)
    path.write_text(full[: len(full) // 2])                           # caught mid-rewrite
    assert harbor_guard_job.read_job_result(str(path)) is None
    path.write_text("[1, 2]")                                         # JSON, but not a job result
    assert harbor_guard_job.read_job_result(str(path)) is None
    path.write_bytes(b'{"finished_at": "\xff"}')                      # not UTF-8
    assert harbor_guard_job.read_job_result(str(path)) is None
    path.write_text(full)
    monkeypatch.setattr(harbor_guard_job, "RESULT_CAP", len(full) - 1)              # over the size cap
    assert harbor_guard_job.read_job_result(str(path)) is None
    monkeypatch.undo()
    link = tmp_path / "link" / "result.json"
    link.parent.mkdir()
    link.symlink_to(path)                                             # only regular files
    assert harbor_guard_job.read_job_result(str(link)) is None
    fifo = tmp_path / "fifo" / "result.json"
    fifo.parent.mkdir()
    os.mkfifo(fifo)                                                   # no writer: a plain open would block
    assert harbor_guard_job.read_job_result(str(fifo)) is None
    (tmp_path / "dir" / "result.json").mkdir(parents=True)
    assert harbor_guard_job.read_job_result(str(tmp_path / "dir" / "result.json")) is None


def test_exit_codes():
    assert harbor_guard.exit_code(harbor_guard.Outcome(3), None) == 3
    assert harbor_guard.exit_code(harbor_guard.Outcome(-9), None) == 137             # harbor killed by someone else
    assert harbor_guard.exit_code(harbor_guard.Outcome(-15, "t", "TERM"), None) == 0  # ended by us after the job finished
    assert harbor_guard.exit_code(harbor_guard.Outcome(None, "t", "KILL", survived=True), None) == 0
    assert harbor_guard.exit_code(harbor_guard.Outcome(0), signal.SIGINT) == 130
    assert harbor_guard.exit_code(harbor_guard.Outcome(1), signal.SIGTERM) == 143


# --------------------------------------------------------------------------- a fake harbor


def test_lingering_harbor_is_terminated_and_recorded(scene):
    started = time.monotonic()
    proc = scene.run("linger", grace=1, term_wait=5, poll=0.2)
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - started < BOUND_S
    [event] = scene.event_lines()
    assert_event(event, scene, "TERM", 1)
    [line] = proc.stderr.splitlines()
    assert line == (f"harbor_guard: harbor's job finished at {scene.finished_at()} but harbor was still running "
                    f"1 s later; terminated it (TERM). Every trial had its result.json; nothing was lost.")


def test_harbor_ignoring_term_is_killed(scene):
    proc = scene.run("ignore-term", grace=0.5, term_wait=1, poll=0.2)
    assert proc.returncode == 0, proc.stderr
    [event] = scene.event_lines()
    assert_event(event, scene, "KILL", 0.5)
    [line] = proc.stderr.splitlines()
    assert "terminated it (KILL: it was still running 1 s after TERM)" in line
    assert line.endswith("1 trial dir(s) had no result.json (t-b__bbbbbbb): make tally lists them as "
                         "unfinished and make mopup re-runs them.")


@pytest.mark.parametrize("mode", ["exit-soon", "interrupted-exit-soon"])
def test_harbor_exiting_within_the_grace_is_left_alone(scene, tmp_path, mode):
    # Harbor takes 2 s to exit after its job finished (or after it was interrupted and wrote every
    # trial): within the grace, so it gets no signal and its own exit stands. The grace is the
    # bound (BOUND_S), so no load makes 2 s reach it.
    env = cancelled_job(tmp_path)[1] if mode.startswith("interrupted") else None
    proc = scene.run(mode, env=env, grace=BOUND_S, term_wait=5, poll=0.05)
    assert (proc.returncode, proc.stderr, scene.signals(), scene.event_lines()) == (0, "", [], [])


def test_harbor_exiting_by_itself_keeps_its_exit_code(scene):
    proc = scene.run("exit3", grace=5, term_wait=5, poll=0.2)
    assert proc.returncode == 3
    assert (scene.marks / "finished").exists()
    assert not scene.events.exists()
    assert proc.stderr == ""


def test_a_stale_finished_result_of_a_resume_does_not_count(scene):
    # A finished result.json from the run before: `harbor job resume` starts from it.
    scene.job_dir.mkdir(parents=True)
    (scene.job_dir / "result.json").write_text(harbor_job_result(finished=True))
    stale = scene.finished_at()
    proc = scene.run("resume", grace=0.5, term_wait=5, poll=0.1)
    assert proc.returncode == 0, proc.stderr
    # Not ended while it was still working: it got to rewrite result.json and to finish...
    assert (scene.marks / "working").exists() and (scene.marks / "finished").exists()
    # ...and ended after its own finish, not the stale one.
    [event] = scene.event_lines()
    assert_event(event, scene, "TERM", 0.5)
    assert event["finished_at"] != stale


@pytest.mark.parametrize("sig, escalation", [(signal.SIGINT, ["TERM", "KILL"]), (signal.SIGTERM, ["KILL"])],
                         ids=["SIGINT", "SIGTERM"])
def test_a_signal_to_the_watchdog_is_passed_on_once(scene, sig, escalation):
    # The fake harbor records every INT and TERM and obeys none: the watch's own escalation ends it,
    # so whatever the watch passed on before is on record. The second signal is sent once harbor
    # has the first: a copy of it, passed on, would be a second line.
    term_wait = 2
    proc = scene.start("count-signals", term_wait=term_wait)
    try:
        scene.wait_for_mark("ready", proc)
        os.kill(proc.pid, sig)
        scene.wait_for_mark("signals", proc)
        os.kill(proc.pid, sig)  # a second one is not passed on
        _, err = proc.communicate(timeout=BOUND_S)
    finally:
        stop_session(proc)
    assert scene.signals() == [sig.name] + [f"SIG{name}" for name in escalation if name != "KILL"]
    assert proc.returncode == 128 + sig
    [event] = scene.event_lines()
    assert_interrupted_event(event, scene, sig.name[3:], [sig.name[3:], *escalation], grace=term_wait, returncode=-9)
    assert len(err.splitlines()) == 1 and err.startswith(f"harbor_guard: interrupted by {sig.name}; passed it on to "
                                                         f"harbor once; "), err


def assert_interrupted_event(event: dict, scene: Scene, received: str, sent: list[str], grace, returncode) -> None:
    assert set(event) == {"event", "job_dir", "received", "signals", "grace_s", "exited", "returncode", "at"}
    assert (event["event"], event["job_dir"], event["received"]) == ("harbor-interrupted", str(scene.job_dir), received)
    assert [s["signal"] for s in event["signals"]] == sent
    assert (event["grace_s"], event["exited"], event["returncode"]) == (grace, True, returncode)
    for when in [event["at"], *(s["at"] for s in event["signals"])]:
        datetime.strptime(when, "%Y-%m-%dT%H:%M:%SZ")


def test_ctrl_c_at_the_terminal_reaches_harbor_once(scene):
    master, slave = os.openpty()
    launcher = scene.tmp / "pty_launcher.py"
    launcher.write_text(PTY_LAUNCHER)
    proc = subprocess.Popen([PYTHON, str(launcher), os.ttyname(slave), *scene.argv("count-signals", term_wait=1)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(slave)
    output = b""
    try:
        scene.wait_for_mark("ready", proc)
        os.write(master, b"\x03")  # Ctrl-C: the terminal signals its whole foreground group
        deadline = time.monotonic() + BOUND_S
        while proc.poll() is None and time.monotonic() < deadline:
            if select.select([master], [], [], 0.1)[0]:
                try:
                    output += os.read(master, 4096)
                except OSError:  # the slave side closed (Linux: EIO)
                    break
        proc.wait(timeout=BOUND_S)
    finally:
        stop_session(proc)  # the launcher made its own session: its pid is the group's
        os.close(master)
    # SIGINT from the terminal only (the watchdog did not add a second), then the watch's TERM and
    # KILL to a harbor that obeys neither (the fake's, which records them).
    assert scene.signals() == ["SIGINT", "SIGTERM"]
    assert proc.returncode == 130
    assert b"interrupted by SIGINT; Ctrl-C at the terminal reached harbor directly; " in output, output
    [event] = scene.event_lines()
    assert_interrupted_event(event, scene, "INT", ["TERM", "KILL"], grace=1, returncode=-9)


@pytest.mark.parametrize("mode, received, sent, returncode", [
    ("ignore-int", signal.SIGINT, ["INT", "TERM"], 7),                    # ends at TERM, as harbor 0.25 does
    ("ignore-int-term", signal.SIGINT, ["INT", "TERM", "KILL"], -9),      # ends at nothing but KILL
    ("ignore-int-term", signal.SIGTERM, ["TERM", "KILL"], -9),            # the stop of a watch with SIGINT ignored
], ids=["INT-ignored", "INT-and-TERM-ignored", "TERM-ignored"])
def test_an_interrupted_harbor_that_does_not_exit_gets_term_then_kill_after_the_grace(scene, mode, received, sent,
                                                                                      returncode):
    # The wait after an interrupt is bounded: a harbor whose cancellation never ends (or that never
    # saw the signal) gets TERM, then KILL, each --term-wait seconds (STOP_GRACE) after the last.
    grace = 0.5
    proc = scene.start(mode, term_wait=grace)
    try:
        scene.wait_for_mark("ready", proc)
        harbor = int((scene.marks / "pid").read_text())
        started = time.monotonic()
        os.kill(proc.pid, received)
        _, err = proc.communicate(timeout=BOUND_S)
        took = time.monotonic() - started
    finally:
        stop_session(proc)
    assert proc.returncode == 128 + received
    assert scene.signals() == [f"SIG{name}" for name in sent if name != "KILL"]
    assert not Path(f"/proc/{harbor}").exists()  # gone, and reaped by the watch
    assert took >= grace * (len(sent) - 1)          # each signal had its grace...
    assert took < grace * (len(sent) - 1) + BOUND_S / 2  # ...and no wait was unbounded
    [event] = scene.event_lines()
    assert_interrupted_event(event, scene, received.name[3:], sent, grace=grace, returncode=returncode)
    then = ", then ".join(sent[1:])
    assert err.splitlines() == [f"harbor_guard: interrupted by {received.name}; passed it on to harbor once; harbor "
                                f"was still running 0.5 s later, so it was sent {then}; harbor exited with "
                                f"{returncode}."]


def cancelled_job(tmp: Path) -> tuple[Path, dict[str, str]]:
    """harbor's own files of an interrupted job (tests/fixtures/harbor_jobs.py, harbor's models): a
    passed trial, then a cancelled one (CancelledError), a next one that passed after it, and the
    job's result.json with finished_at null."""
    now = datetime.now(timezone.utc)
    job = write_job(tmp / "proto", "job", [TrialSpec("t-pass", reward=1.0, finished=now - timedelta(minutes=2)),
                                           TrialSpec("t-cancel", exc="CancelledError", finished=now - timedelta(minutes=1)),
                                           TrialSpec("t-next", reward=1.0, finished=now)])
    rewrite_result(job / "result.json", finished_at=None)
    names = {task: trial_name(task, "job") for task in ("t-pass", "t-cancel", "t-next")}
    assert json.loads((job / names["t-cancel"] / "result.json").read_text())["exception_info"]["exception_type"] == \
        "CancelledError"
    return job, {"PROTO": str(job), "PASSED": names["t-pass"], "CANCELLED": names["t-cancel"], "NEXT": names["t-next"]}


def test_an_interrupted_harbor_that_lingers_is_ended_after_the_grace(scene, tmp_path):
    # Interrupted from elsewhere (kill -INT of harbor itself): every trial written, the last a
    # CancelledError, the job's finished_at null for ever, and harbor still alive.
    _, env = cancelled_job(tmp_path)
    proc = scene.run("interrupted", env=env, grace=1, term_wait=5, poll=0.1)
    assert proc.returncode == 0, proc.stderr  # the work is done: every trial has its result
    [event] = scene.event_lines()
    assert set(event) == {"event", "job_dir", "finished_at", "grace_s", "signal", "at", "cancelled_trial",
                          "cancelled_at"}
    cancelled = json.loads((scene.job_dir / env["CANCELLED"] / "result.json").read_text())
    assert (event["event"], event["finished_at"], event["grace_s"], event["signal"]) == ("harbor-lingered", None, 1, "TERM")
    assert (event["cancelled_trial"], event["cancelled_at"]) == (env["CANCELLED"], cancelled["finished_at"])
    assert proc.stderr.splitlines() == [
        f"harbor_guard: harbor was interrupted and every trial had ended (the last, {env['CANCELLED']}, in "
        f"CancelledError at {cancelled['finished_at']}; the job's finished_at stays null) but harbor was still "
        f"running 1 s later; terminated it (TERM). Every trial had its result.json; nothing was lost."]


def test_a_trials_own_cancellation_mid_run_is_no_interruption(scene, tmp_path):
    # A CancelledError trial, then harbor starts the next trial within the grace: it goes on, untouched.
    _, env = cancelled_job(tmp_path)
    proc = scene.run("cancel-then-go-on", env=env, grace=1, term_wait=5, poll=0.1)
    assert proc.returncode == 0, proc.stderr
    assert (scene.marks / "finished").exists() and not scene.events.exists() and proc.stderr == ""


def test_a_resumed_jobs_earlier_cancellation_does_not_count(scene, tmp_path):
    # A shard the governor stopped, started again: its job already ends in a CancelledError with
    # finished_at null, before the new harbor has started a trial.
    proto, env = cancelled_job(tmp_path)
    scene.job_dir.mkdir(parents=True)
    shutil.copy(proto / "result.json", scene.job_dir / "result.json")
    shutil.copytree(proto / env["CANCELLED"], scene.job_dir / env["CANCELLED"])
    proc = scene.run("resumed", env=env, grace=1, term_wait=5, poll=0.1)
    assert proc.returncode == 0, proc.stderr
    assert (scene.marks / "finished").exists() and not scene.events.exists() and proc.stderr == ""


def test_harbor_that_cannot_start_is_one_line(scene):
    proc = subprocess.run([PYTHON, "-m", WATCH, "run", "--job-dir", str(scene.job_dir), "--grace", "1", "--",
                           str(scene.tmp / "no-such-harbor"), "run"], capture_output=True, text=True,
                          timeout=BOUND_S)
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [f"Error: cannot start '{scene.tmp / 'no-such-harbor'}': No such file or "
                                        f"directory; is harbor installed in this environment (make setup)?"]
    assert not scene.job_dir.exists()


def test_no_harbor_argv_is_a_usage_error(scene):
    proc = subprocess.run([PYTHON, "-m", WATCH, "run", "--job-dir", str(scene.job_dir), "--grace", "1"],
                          capture_output=True, text=True, timeout=BOUND_S)
    assert proc.returncode == 2
    assert "Missing argument 'HARBOR_ARGV...'" in proc.stderr


# --------------------------------------------------------------------------- the real harbor


@pytest.mark.e2e
def test_real_harbor_that_exits_by_itself_is_left_alone(tmp_path):
    dataset = tmp_path / "dataset"
    shutil.copytree(REPO / "tests" / "datasets" / "mopup", dataset)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"t-pass": ["pass"], "t-fail": ["pass"]}))
    jobs, events = tmp_path / "jobs", tmp_path / "events.jsonl"
    env = dict(os.environ, PYTHONPATH=str(REPO / "tests" / "harbor_env"), SCRIPTED_ENV_PLAN=str(plan),
               SCRIPTED_ENV_LOG=str(tmp_path / "executed.jsonl"), SCRIPTED_ENV_PHASE="watch",
               LITELLM_LOCAL_MODEL_COST_MAP="True", HF_HUB_OFFLINE="1",
               # Offline, harbor's end-of-job telemetry holds its exit ~12 s; a test never phones home.
               HARBOR_TELEMETRY="0")
    harbor = [str(REPO / ".venv" / "bin" / "harbor"), "run", "-a", "oracle", "-p", str(dataset),
              "--include-task-name", "t-pass", "--include-task-name", "t-fail", "--env", "scripted_env:ScriptedEnv",
              "--jobs-dir", str(jobs), "--job-name", "watched", "-n", "2", "-y", "-q"]
    proc = subprocess.run([PYTHON, "-m", WATCH, "run", "--job-dir", str(jobs / "watched"), "--grace", "10",
                           "--poll", "0.5", "--event-file", str(events), "--", *harbor],
                          env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not events.exists()
    assert "harbor_guard:" not in proc.stderr
    # The watchdog would have acted on this file: harbor's real finish, with both trials done.
    result = harbor_guard_job.read_job_result(str(jobs / "watched" / "result.json"))
    assert harbor_guard_job.new_finish(result, baseline=None) == result["finished_at"]
    assert result["n_total_trials"] == 2 and result["stats"]["n_completed_trials"] == 2
    assert harbor_guard_job.trials_without_result(str(jobs / "watched")) == []
    assert len([p for p in (jobs / "watched").iterdir() if (p / "result.json").is_file()]) == 2


@pytest.mark.e2e
def test_real_harbor_interrupted_past_the_watch_that_lingers_is_ended(tmp_path):
    # kill -INT of harbor itself (not of its watch): harbor cancels its trial, writes it, and stays
    # alive (the scripted environment's "linger": a thread that never ends). Its job's finished_at
    # stays null, so only the interrupted-harbor rule can end it.
    dataset = tmp_path / "dataset"
    shutil.copytree(REPO / "tests" / "datasets" / "mopup", dataset)
    plan, log, release = tmp_path / "plan.json", tmp_path / "executed.jsonl", tmp_path / "release"
    plan.write_text(json.dumps({"t-pass": ["linger"]}))
    jobs, events = tmp_path / "jobs", tmp_path / "events.jsonl"
    env = dict(os.environ, PYTHONPATH=str(REPO / "tests" / "harbor_env"), SCRIPTED_ENV_PLAN=str(plan),
               SCRIPTED_ENV_LOG=str(log), SCRIPTED_ENV_PHASE="watch", SCRIPTED_ENV_RELEASE=str(release),
               LITELLM_LOCAL_MODEL_COST_MAP="True", HF_HUB_OFFLINE="1", HARBOR_TELEMETRY="0")
    harbor = [str(REPO / ".venv" / "bin" / "harbor"), "run", "-a", "oracle", "-p", str(dataset),
              "--include-task-name", "t-pass", "--env", "scripted_env:ScriptedEnv",
              "--jobs-dir", str(jobs), "--job-name", "watched", "-n", "1", "-y", "-q"]
    proc = subprocess.Popen([PYTHON, "-m", WATCH, "run", "--job-dir", str(jobs / "watched"), "--grace", "1",
                             "--term-wait", str(BOUND_S), "--poll", "0.2", "--event-file", str(events), "--", *harbor],
                            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not (log.exists() and log.read_text()):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        [child] = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        os.kill(int(child), signal.SIGINT)
        out, err = proc.communicate(timeout=300)
    finally:
        release.touch()
        stop_session(proc)
    assert proc.returncode == 0, out + err  # the work is done: every trial has its result
    [trial] = [p for p in (jobs / "watched").iterdir() if p.is_dir()]
    # What harbor 0.25.0 wrote when interrupted: the trial's CancelledError, and no job finished_at.
    result = json.loads((trial / "result.json").read_text())
    assert result["exception_info"]["exception_type"] == "CancelledError"
    assert json.loads((jobs / "watched" / "result.json").read_text())["finished_at"] is None
    [event] = [json.loads(line) for line in events.read_text().splitlines()]
    assert (event["event"], event["finished_at"], event["cancelled_trial"], event["cancelled_at"], event["grace_s"]) \
        == ("harbor-lingered", None, trial.name, result["finished_at"], 1)
    assert event["signal"] in ("TERM", "KILL")
    assert f"harbor was interrupted and every trial had ended (the last, {trial.name}, in CancelledError" in err


# --------------------------------------------------------------------------- the spending ceiling


STUBBORN = r'''
import signal, sys, time
from pathlib import Path
marks = Path(sys.argv[1])
def record(signum, _frame):
    with (marks / "signals").open("a") as out:
        out.write(signal.Signals(signum).name + "\n")
    if signum == signal.SIGTERM:
        sys.exit(7)
signal.signal(signal.SIGINT, record)   # a harbor whose Ctrl-C does not end it (SIGINT ignored upstream)
signal.signal(signal.SIGTERM, record)
(marks / "ready").write_text("")
for _ in range(600):
    time.sleep(0.1)
'''


def stop_stubborn_at_ceiling(tmp_path: Path, spend, term_wait: float, first: str = "INT"):
    """STUBBORN started, ready for signals, then stopped as at the ceiling: (outcome, its signals)."""
    marks = tmp_path / "marks"
    marks.mkdir()
    (tmp_path / "stubborn.py").write_text(STUBBORN)
    proc = subprocess.Popen([PYTHON, str(tmp_path / "stubborn.py"), str(marks)], start_new_session=True)
    waker = harbor_guard_signals.Waker()
    try:
        deadline = time.monotonic() + BOUND_S
        while not (marks / "ready").exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        outcome = harbor_guard.stop_at_ceiling(proc, spend, term_wait, waker, first)
    finally:
        waker.close()
        stop_session(proc)
    return outcome, (marks / "signals").read_text().split()


def test_a_stop_at_the_ceiling_is_sigint_then_term(tmp_path):
    spend = object()
    outcome, signals = stop_stubborn_at_ceiling(tmp_path, spend, 1)
    assert (outcome.spend, outcome.ceiling_signal, outcome.returncode, outcome.survived) == (spend, "TERM", 7, False)
    assert signals == ["SIGINT", "SIGTERM"]
    assert harbor_guard.exit_code(outcome, None) == harbor_guard_signals.CEILING_EXIT == 75
    assert harbor_guard.exit_code(outcome, signal.SIGTERM) == 143  # the user's own signal wins


def test_a_harbor_started_with_sigint_ignored_is_stopped_at_the_ceiling_with_term_first(tmp_path):
    # nohup make bench & from a script: SIGINT is ignored from the shell down, harbor included,
    # so a SIGINT would only cost term_wait seconds. The check reads how it was started.
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        check = harbor_guard.CeilingCheck(watch=None, poll=60)
    finally:
        signal.signal(signal.SIGINT, before)
    assert check.first_signal == "TERM" and harbor_guard.CeilingCheck(watch=None, poll=60).first_signal == "INT"
    outcome, signals = stop_stubborn_at_ceiling(tmp_path, object(), BOUND_S, check.first_signal)
    assert (outcome.ceiling_signal, outcome.returncode) == ("TERM", 7)
    assert signals == ["SIGTERM"]  # no SIGINT, no wait for it


def test_the_watchdogs_ceiling_exit_is_the_verbs(tmp_path):
    lib = (REPO / "scripts" / "lib-run.sh").read_text()
    assert "readonly CEILING_EXIT=75" in lib
    from tools.money import cost_ceiling
    from tools.run import reproduce_state
    assert harbor_guard_signals.CEILING_EXIT == cost_ceiling.CEILING_EXIT == reproduce_state.CEILING_EXIT == 75
    assert "readonly WATCH_FAILED_EXIT=70" in lib and harbor_guard_signals.WATCH_FAILED_EXIT == 70


# --- the watch never dies quietly --------------------------------------------------------------------

def test_a_spend_that_cannot_be_measured_is_one_line_and_the_watch_goes_on(capsys):
    # A result.json with "n_input_tokens": 1e999 once made the measure raise OverflowError,
    # and the watch died with harbor still running: no ceiling, no linger watchdog.
    class Unmeasurable:
        def check(self):
            raise OverflowError("cannot convert float infinity to integer")

    check = harbor_guard.CeilingCheck(Unmeasurable(), poll=0.5)
    check.due = 0  # due now
    assert check() is None
    assert capsys.readouterr().err == (
        "harbor_guard: note: the spend could not be measured (OverflowError: cannot convert float infinity to "
        "integer); harbor goes on, the next check is in 0.5 s.\n")
    assert check.due > time.monotonic()  # the next check is a poll away, not at once in a loop


# The watch with a fault injected where it supervises, once the fake harbor is ready for signals.
FAILING_WATCH = r'''
import os, sys, time
from pathlib import Path
from tests.fixtures.harbor_jobs import TrialSpec, rewrite_result, trial_name, write_job
from tools.run import harbor_guard
from tools.run import harbor_guard_job
def broken(*_args, **_kwargs):
    ready = Path(os.environ["MARKS"]) / "ready"
    while not ready.exists():
        time.sleep(0.05)
    raise RuntimeError("injected fault")
harbor_guard.supervise = broken
harbor_guard.cli(prog_name="harbor_guard")
'''


def test_a_watch_that_fails_stops_harbor_with_sigint_records_it_and_says_so(scene):
    proc = subprocess.Popen([PYTHON, "-c", FAILING_WATCH, *scene.argv("exit-on-signal", term_wait=BOUND_S)[3:]],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env={**os.environ, "MARKS": str(scene.marks)})
    try:
        _, err = proc.communicate(timeout=BOUND_S)
    finally:
        stop_session(proc)
    assert proc.returncode == harbor_guard_signals.WATCH_FAILED_EXIT == 70
    assert scene.signals() == ["SIGINT"]  # harbor was stopped as Ctrl-C stops it, and exited
    assert ("harbor_guard: the watch failed (RuntimeError: injected fault); harbor was stopped (INT) so that it "
            "does not run on unwatched.") in err
    [event] = scene.event_lines()
    assert (event["event"], event["job_dir"], event["error"], event["signal"]) == \
        ("watch-failed", str(scene.job_dir), "RuntimeError: injected fault", "INT")


@pytest.mark.parametrize("kind", ["fifo", "directory", "dangling"])
def test_an_event_file_that_is_not_a_regular_file_is_said_never_waited_on(tmp_path, kind):
    """The guard appends its events to the run's manifest: a FIFO there (no reader) must not hang
    it, a directory must not fail it silently, a dangling link must not create a file elsewhere."""
    path = tmp_path / "manifest.jsonl"
    if kind == "fifo":
        os.mkfifo(path)
        why = "No such device or address"  # ENXIO: opened non-blocking for writing, with no reader
    elif kind == "directory":
        path.mkdir()
        why = "Is a directory"
    else:
        path.symlink_to(tmp_path / "elsewhere" / "made.jsonl")
        why = "a symlink to nothing"
    said = harbor_guard_words.append_event(str(path), {"event": "x"})
    assert said == f"harbor_guard: could not append the event to {path}: {why}"
    assert not (tmp_path / "elsewhere").exists()


def test_an_event_is_appended_as_one_line_to_a_regular_file(tmp_path):
    path = tmp_path / "manifest.jsonl"
    path.write_text('{"event": "before"}\n')
    assert harbor_guard_words.append_event(str(path), {"event": "after", "n": 1}) is None
    assert path.read_text() == '{"event": "before"}\n{"event": "after", "n": 1}\n'
