"""`make reproduce` end to end: the supervisor, the real verbs, the real harbor and the real hf CLI.

Every scenario runs scripts/reproduce.sh in a scratch checkout (the real scripts/, tools/, env/
by symlink, like tests/test_mopup.py's Tree) against:
  - the loopback fake HF Jobs API (tests/fakes/fake_hf_jobs.py, through HF_ENDPOINT): every
    `hf jobs run` creates the next of the scenario's "new_jobs", whose exposeUrls point at
  - loopback fake model servers (tests/fakes/fake_openai.py), one per server job, and
  - the real harbor on tests/datasets/mopup with tests/harbor_env/scripted_env.py playing the
    sandbox, which logs every trial it starts: which tasks a step ran is read from that log.

Each end-to-end scenario prints its figures: scored trials re-run (0), GPU seconds billed
after the last step that needed the server (from the fake's record: ≤ IDLE_STOP_AFTER), trial
dirs lost (0).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from tests.fixtures import hostile
from tests.fixtures import scratch
from tests.test_watchdog import play_the_scheduler
from tools.run import reproduce
from tools.run import reproduce_passes
from tools.run import reproduce_server
from tools.run import reproduce_state

REPO = Path(__file__).resolve().parents[1]

# The server profile's own model: a run serves the model its profile declares (tools/settings_rules.py).
MODEL = "Qwen/Qwen3.8-27B-FP8"
RUN = "repro-test"
JOB = "repro-e2e"
TOKEN = "hf_fake-token-that-must-never-be-printed"
IDLE_STOP_AFTER = 600

# The tasks and their fates are mop-up's end-to-end test's: the same dataset, the same plan.
from test_mopup import ALL_TASKS, DEFAULT_PLAN as PLAN, INFRA, SCORED  # noqa: E402,F401

# With a server (no API_BASE): serve and stop go through the fake Jobs API.
RUN_FILE = f"""\
# Written by tests/test_reproduce.py: the supervisor's test run.
SERVER=qwen3.8-27b-fp8-sglang-h200
MODEL={MODEL}
JOB_NAME={JOB}
AGENT=oracle
DATASET_PATH=dataset
ENV_TYPE=scripted_env:ScriptedEnv
AGENT_TIMEOUT_MULTIPLIER=1
N_CONCURRENT=3
SMOKE_TASK=t-pass
HF_NAMESPACE=alice
READY_POLL=1
LINGER_GRACE=5
"""


def wait_for(predicate, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def read_port(port_file: Path, proc: subprocess.Popen) -> int:
    wait_for(lambda: port_file.exists() and port_file.read_text().strip() or proc.poll() is not None, 20, port_file)
    assert proc.poll() is None, f"{port_file}: the fake exited"
    return int(port_file.read_text().strip())


# How long a fake lives when nothing stops it (a test process killed before its teardown): past
# every wait of a rehearsal on a loaded machine, where a rehearsal of two or three verbs, each
# bounded by 600 s, can outlast 600 s in all. The fixtures stop their fakes as each test ends.
LIFETIME = 1800


class ModelServer:
    """tests/fakes/fake_openai.py on a free loopback port: one server job's endpoint."""

    def __init__(self, tmp: Path, name: str, lifetime: float = LIFETIME):
        self.port_file, self.record = tmp / f"{name}.port", tmp / f"{name}.requests.jsonl"
        self.proc = subprocess.Popen(
            [sys.executable, str(REPO / "tests/fakes/fake_openai.py"), "--port-file", str(self.port_file),
             "--record", str(self.record), "--model", MODEL, "--max-lifetime", str(lifetime)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.url = f"http://127.0.0.1:{read_port(self.port_file, self.proc)}"
        self.pid_file = tmp / f"{name}.pid"
        self.pid_file.write_text(f"{self.proc.pid}\n")

    def requests(self) -> list[dict]:
        return [json.loads(line) for line in self.record.read_text().splitlines()] if self.record.exists() else []

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
        self.proc.wait(timeout=10)


class JobsAPI:
    """tests/fakes/fake_hf_jobs.py with a scenario; its record has every request with its time."""

    def __init__(self, tmp: Path, scenario: dict, lifetime: float = LIFETIME):
        (tmp / "scenario.json").write_text(json.dumps({"namespace": "alice", **scenario}))
        self.record = tmp / "hf-requests.jsonl"
        port_file = tmp / "hf.port"
        self.proc = subprocess.Popen(
            [sys.executable, str(REPO / "tests/fakes/fake_hf_jobs.py"), "--scenario", str(tmp / "scenario.json"),
             "--record", str(self.record), "--port-file", str(port_file), "--max-lifetime", str(lifetime)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.url = f"http://127.0.0.1:{read_port(port_file, self.proc)}"
        self.ids = [j["id"] for j in scenario.get("new_jobs", [])]

    def requests(self) -> list[dict]:
        return [json.loads(line) for line in self.record.read_text().splitlines()] if self.record.exists() else []

    def launches(self) -> list[dict]:
        return [r for r in self.requests() if r["method"] == "POST" and r["path"] == "/api/jobs/alice"]

    def cancels(self, job: str) -> list[dict]:
        return [r for r in self.requests() if r["method"] == "POST" and r["path"] == f"/api/jobs/alice/{job}/cancel"]

    def stages(self) -> dict[str, str]:
        import urllib.request
        req = urllib.request.Request(f"{self.url}/api/jobs/alice", headers={"Authorization": f"Bearer {TOKEN}"})
        with urllib.request.urlopen(req, timeout=10) as r:
            return {j["id"]: j["status"]["stage"] for j in json.loads(r.read())}

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


class Tree:
    """A scratch checkout: the real code by symlink; its own runs/, state/, jobs/, dataset/."""

    def __init__(self, tmp: Path, plan: dict, api: JobsAPI, servers: list[ModelServer]):
        self.tmp, self.api, self.servers = tmp, api, servers
        self.root = scratch.checkout(tmp / "repo")
        (self.root / "runs" / f"{RUN}.env").write_text(RUN_FILE)
        # bench's preflight wants git-lfs installed and initialised; this machine may lack it.
        self.bin, self.hf_home = scratch.offline_stand_ins(tmp)
        self.plan_file = tmp / "plan.json"
        self.plan_file.write_text(json.dumps(plan))
        self.log = tmp / "executed.jsonl"
        self.dead_file = tmp / "srv1.dead"
        self.state = self.root / "state" / RUN
        self.jobs = self.root / "jobs"

    def env(self, **settings: str) -> dict:
        drop = ("RUN", "JOB_NAME", "DRY_RUN", "API_BASE", "STATE_ROOT", "CLI_SETTINGS", "HF_NAMESPACE", "WHERE",
                "AI_AGENT", "AGENT", "CLAUDECODE", "HF_HUB_OFFLINE", "RUN_LOCK_HELD")
        env = {k: v for k, v in os.environ.items() if k not in drop}
        env.update(
            RUN=RUN, PATH=f"{self.bin}:{REPO / '.venv/bin'}:{os.environ['PATH']}",
            HF_ENDPOINT=self.api.url, HF_TOKEN=TOKEN, HF_HOME=str(self.hf_home), HF_HUB_DISABLE_UPDATE_CHECK="1",
            GIT_CONFIG_COUNT="1", GIT_CONFIG_KEY_0="filter.lfs.process", GIT_CONFIG_VALUE_0="git-lfs filter-process",
            HARBOR_TELEMETRY="0", LITELLM_LOCAL_MODEL_COST_MAP="True",
            PYTHONPATH=str(REPO / "tests" / "harbor_env"),
            SCRIPTED_ENV_PLAN=str(self.plan_file), SCRIPTED_ENV_LOG=str(self.log),
            SCRIPTED_ENV_SERVER_PID_FILE=str(self.servers[0].pid_file), SCRIPTED_ENV_SERVER_DEAD_FILE=str(self.dead_file),
            HEALTH_POLL="1")
        env.update(settings)
        return env

    def argv(self) -> list[str]:
        return [str(self.root / "scripts" / "reproduce.sh")]

    def reproduce(self, **settings) -> subprocess.CompletedProcess:
        return subprocess.run(self.argv(), cwd=self.root, env=self.env(**settings), capture_output=True,
                              text=True, timeout=600, stdin=subprocess.DEVNULL)

    def start(self, **settings) -> subprocess.Popen:
        out = open(self.tmp / f"run-{time.monotonic_ns()}.log", "w")
        return subprocess.Popen(self.argv(), cwd=self.root, env=self.env(**settings), stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)

    def executed(self) -> list[dict]:
        return [json.loads(line) for line in self.log.read_text().splitlines() if line] if self.log.exists() else []

    def progress(self) -> dict:
        return json.loads((self.state / "reproduce.json").read_text())

    def tally(self) -> dict:
        proc = subprocess.run([str(REPO / ".venv/bin/python"), "-m", "tools.tally", "tally",
                               "--jobs-dir", str(self.jobs), "--job-name", JOB, "--json"],
                              capture_output=True, text=True, check=True)
        return json.loads(proc.stdout)

    def all_trial_dirs(self) -> set[str]:
        """Trial dir names in the jobs and in mop-up's archive: where a trial dir may legally be."""
        found = set()
        for base in (self.jobs, self.state / "archive"):
            if base.exists():
                found |= {p.name for p in base.rglob("*__*") if p.is_dir() and (p / "config.json").exists()}
        return found

    def server_json(self) -> dict:
        return json.loads((self.state / "server.json").read_text())


def session_pids(sid: int) -> list[int]:
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            pids.append(int(stat.parent.name))
    return pids


def kill_session(proc: subprocess.Popen) -> None:
    """SIGKILL every process of the supervisor's session, as a crash or reboot would; again until
    none is left (a process may fork while the first sweep runs)."""
    for _ in range(100):
        pids = session_pids(proc.pid)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)
    proc.wait(timeout=30)
    assert session_pids(proc.pid) == [], "processes of the killed session survived"


# --- figures ----------------------------------------------------------------------------------


@pytest.fixture
def report_line(request, capsys):
    def write(text: str) -> None:
        with capsys.disabled():
            print(f"\n  [{request.node.name}] {text}", end="")
    return write


def scored_rerun(tree: Tree) -> int:
    """Trials a mop-up pass started for a task it had not planned (every unplanned task was scored)."""
    wasted, passes = 0, tree.progress()["mopup_passes"]
    for i, p in enumerate(passes):
        # A pass cut short by a kill has no end: the next pass's start bounds it.
        later = passes[i + 1]["started_epoch"] if i + 1 < len(passes) else time.time()
        start, end = p["started_epoch"], p.get("ended_epoch") or later
        ran = [r for r in tree.executed() if start <= r["at"] <= end]
        wasted += sum(1 for r in ran if r["task"] not in p["planned"])
    return wasted


def idle_seconds(tree: Tree, job: str) -> float:
    """GPU time billed after the last step that needed the server: its end to the job's cancel."""
    last_need = reproduce_state.epoch_of(tree.progress()["last_server_step_ended_at"])
    cancels = tree.api.cancels(job)
    assert cancels, f"job {job} was never cancelled"
    return cancels[0]["at"] - last_need


def figures(tree: Tree, report_line, job: str, before: set[str]) -> tuple[int, float, int]:
    wasted, idle = scored_rerun(tree), idle_seconds(tree, job)
    lost = len(before - tree.all_trial_dirs())
    report_line(f"scored trials re-run: {wasted}; GPU seconds billed after the last step that needed the "
                f"server: {idle:.1f} (limit {IDLE_STOP_AFTER}); trial dirs lost: {lost}")
    return wasted, idle, lost


def step_lines(stderr: str) -> list[str]:
    """The supervisor's '[n/8] step: …' lines, reduced to 'step status'."""
    out = []
    for line in stderr.splitlines():
        if line.startswith("reproduce: [") and "]" in line:
            step, rest = line.split("] ", 1)[1].split(": ", 1)
            out.append(f"{step} {rest.split()[0]}")
    return out


# --- fixtures -----------------------------------------------------------------------------------


@pytest.fixture
def world(tmp_path):
    """Two model servers (srv1, srv2) and the Jobs API whose launches point at them in turn."""
    made = []

    def make(plan=PLAN, new_jobs=None):
        servers = [ModelServer(tmp_path, "srv1"), ModelServer(tmp_path, "srv2")]
        dead = tmp_path / "srv1.dead"
        if new_jobs is None:
            new_jobs = [{"id": "srv1", "expose_url": servers[0].url, "error_if_exists": str(dead)},
                        {"id": "srv2", "expose_url": servers[1].url}]
        api = JobsAPI(tmp_path, {"new_jobs": new_jobs})
        made.extend([*servers, api])
        return Tree(tmp_path, plan, api, servers)

    yield make
    for thing in made:
        thing.stop()


# --- end to end -----------------------------------------------------------------------------------


@pytest.mark.e2e
def test_happy_path_serve_to_stop(world, report_line):
    tree = world()
    proc = tree.reproduce(HEARTBEAT_EVERY="5s")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert step_lines(proc.stderr) == [
        "serve started", "serve done", "probe started", "probe done", "smoke started", "smoke done",
        "bench started", "bench done", "mopup started", "mopup done", "tally started", "tally done",
        "stop started", "stop done", "summary started", "summary done"]
    progress = tree.progress()
    assert [progress["steps"][s]["status"] for s in reproduce_state.STEPS] == ["done"] * 8
    assert [s["job"] for s in progress["servers"]] == ["alice/srv1"]
    assert progress["servers"][0]["status"] == "stopped" and progress["relaunches"] == 0
    # One mop-up pass, exactly the infra-errored tasks; then nothing was left.
    assert [(p["pass"], p["status"], sorted(p["planned"]), p["trials_rerun"]) for p in progress["mopup_passes"]] == [
        (1, "done", sorted(INFRA), 4)]
    first = progress["mopup_passes"][0]
    ran = [r["task"] for r in tree.executed() if first["started_epoch"] <= r["at"] <= first["ended_epoch"]]
    assert sorted(ran) == sorted(INFRA)
    assert [r["task"] for r in tree.executed() if r["job"] == f"{JOB}-smoke"] == ["t-pass"]
    final = tree.tally()
    assert (final["passed"], final["failed"], final["errored"], final["unfinished"]) == (6, 3, 0, 0)
    # The server: launched once, answered at the exposed URL, cancelled at the end.
    assert len(tree.api.launches()) == 1 and len(tree.api.cancels("srv1")) == 1
    assert tree.api.stages() == {"srv1": "CANCELED"}
    assert tree.server_json()["endpoint"] == f"{tree.servers[0].url}/v1"
    assert "mop-up pass 1: done, 4 task(s) planned, 4 trial(s) re-run" in proc.stdout
    assert "Passed" in proc.stdout or "passed" in proc.stdout
    assert TOKEN not in out
    # The run's watchdog: installed by serve beside the server, removed at the end once the server
    # was cancelled; while the pipeline held the run, it beat on the server.
    assert [(r["method"], r["path"]) for r in tree.api.requests()
            if r["path"].startswith("/api/scheduled-jobs") and r["method"] != "GET" or r["path"].endswith("/cancel")] == [
        ("POST", "/api/scheduled-jobs/alice"), ("POST", "/api/jobs/alice/srv1/cancel"),
        ("DELETE", "/api/scheduled-jobs/alice/sched-1")]
    assert [r for r in tree.api.requests() if (r["method"], r["path"]) == ("PUT", "/api/jobs/alice/srv1/labels")]
    events = [json.loads(line)["event"] for line in (tree.state / "manifest.jsonl").read_text().splitlines()]
    assert events.count("watchdog-install") == 1 and events.count("watchdog-remove") == 1
    wasted, idle, lost = figures(tree, report_line, "srv1", tree.all_trial_dirs())
    assert (wasted, lost) == (0, 0) and idle <= IDLE_STOP_AFTER
    # Run again: every step is done, nothing is launched or run again.
    n_exec = len(tree.executed())
    again = tree.reproduce()
    assert again.returncode == 0, again.stderr
    assert len(tree.api.launches()) == 1 and len(tree.executed()) == n_exec
    assert "serve: skipped (no step left needs the server)" in again.stderr


@pytest.mark.e2e
def test_a_one_task_run_is_benched_once_the_smoke_skipped(world):
    """A run of one task (qwen-tb3-smoke: one 3 h task) would run it twice, smoke and bench."""
    tree = world()
    proc = tree.reproduce(TASKS="t-pass")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "reproduce: [3/8] smoke: skipped (the bench runs one task, t-pass, the very task the smoke would run)" \
        in proc.stderr.splitlines()
    assert [(r["job"], r["task"]) for r in tree.executed()] == [(JOB, "t-pass")]
    progress = tree.progress()
    assert progress["steps"]["smoke"]["status"] == "skipped"
    assert [progress["steps"][s]["status"] for s in ("bench", "mopup", "tally", "stop")] == ["done"] * 4
    assert not (tree.jobs / f"{JOB}-smoke").exists()


def plan_of(tmp_path, **settings) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RUN", "API_BASE", "CLI_SETTINGS", "HF_TOKEN")}
    env.update(DRY_RUN="1", STATE_ROOT=str(tmp_path / "state"), **settings)
    proc = subprocess.run([str(REPO / "scripts/reproduce.sh")], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / "state").exists()
    return proc.stdout.splitlines()


def test_the_plan_of_a_one_task_run_skips_the_smoke_and_says_why(tmp_path):
    smoke = [line for line in plan_of(tmp_path, RUN="qwen-tb3-smoke") if line.startswith("smoke ")]
    assert smoke == ["smoke    skipped: the bench runs one task, atrx-vep-crispr, the very task the smoke would run"]
    smoke = [line for line in plan_of(tmp_path, RUN="qwen-t2", N_TASKS="1", SMOKE_TASK="") if line.startswith("smoke ")]
    assert smoke == ["smoke    skipped: the bench runs one task (N_TASKS=1), the very task the smoke would run"]
    # A smoke of another task, or of one of several, is a real first look: it stays.
    for settings in ({"RUN": "qwen-tb3-smoke", "SMOKE_TASK": "fix-git"}, {"RUN": "qwen-t2", "TASKS": "fix-git path-tracing"},
                     {"RUN": "qwen-t2", "N_TASKS": "1", "SMOKE_TASK": "fix-git"}, {"RUN": "qwen-t2"}):
        smoke = [line for line in plan_of(tmp_path, **settings) if line.startswith("smoke ")]
        assert len(smoke) == 1 and "harbor run" in smoke[0] and "skipped" not in smoke[0], settings


@pytest.mark.e2e
def test_a_harbor_that_lingers_after_its_result_is_ended_and_the_pipeline_goes_on(world, report_line):
    """Run 2: harbor printed its summary, then stayed alive (an unclosed aiohttp session) until
    its job timeout. Here the real harbor's bench run is followed by a hang; the watchdog gives it
    LINGER_GRACE (5 s in the run file), ends it, records it, and the supervisor carries on.
    No trial is cancelled here: harbor 0.25.0 leaves a job with a CancelledError trial unfinished
    (finished_at null), and only a finished job's harbor is a lingering one."""
    tree = world(dict(PLAN, **{"t-cancel": ["SandboxError", "pass"]}))
    wrapper = tree.bin / "harbor"
    # The pid is written first: on a loaded machine the real harbor's own exit may already take
    # longer than the grace, and the watchdog then ends it there; either way this process lingered.
    wrapper.write_text(f"""#!/usr/bin/env bash
# The real harbor, then, for the full bench only, a hang as Run 2's orchestrator did.
bench=0
if [[ "$1" == run && " $* " == *" --job-name {JOB} "* && " $* " != *" --print-config "* ]]; then
  bench=1
  echo "$$" >"{tree.tmp / 'lingered.pid'}"
fi
"{REPO / '.venv/bin/harbor'}" "$@"
rc=$?
((bench == 0)) || exec sleep 600  # the same process, as harbor's own lingering is
exit $rc
""")
    wrapper.chmod(0o755)
    # The checkout's own .venv/bin after the wrapper: scripts/lib.sh puts it first only when absent.
    proc = tree.reproduce(PATH=f"{tree.bin}:{tree.root / '.venv/bin'}:{os.environ['PATH']}")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    progress = tree.progress()
    assert [progress["steps"][s]["status"] for s in reproduce_state.STEPS] == ["done"] * 8
    # The hang happened, and the watchdog ended it: one event while bench ran, for its job dir, after
    # the grace. (On a loaded machine the smoke's or the mop-up's own harbor may also take longer
    # than 5 s to exit once done: the watchdog ends it too, and that is its work, not bench's; every
    # event still names one of this run's jobs.)
    assert (tree.tmp / "lingered.pid").exists()
    events = [json.loads(line) for line in (tree.state / "manifest.jsonl").read_text().splitlines()
              if '"harbor-lingered"' in line]
    bench = progress["steps"]["bench"]

    def when(stamp: str) -> datetime:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00"))

    during_bench = [e for e in events
                    if when(bench["started_at"]).replace(microsecond=0) <= when(e["at"]) <= when(bench["ended_at"])]
    assert [(Path(e["job_dir"]).name, e["grace_s"]) for e in during_bench] == [(JOB, 5)], events
    assert {Path(e["job_dir"]).name for e in events} <= {JOB, f"{JOB}-smoke", f"{JOB}-retry-1"}, events
    lingered = int((tree.tmp / "lingered.pid").read_text())
    assert not Path(f"/proc/{lingered}").exists() or "Z" in Path(f"/proc/{lingered}/stat").read_text().split()[2]
    # The pipeline went on as in the happy path: mop-up ran the infra errors, the server was stopped.
    assert [(p["status"], sorted(p["planned"])) for p in progress["mopup_passes"]] == [("done", sorted(INFRA))]
    final = tree.tally()
    assert (final["passed"], final["failed"], final["errored"], final["unfinished"]) == (6, 3, 0, 0)
    assert len(tree.api.cancels("srv1")) == 1
    wasted, idle, lost = figures(tree, report_line, "srv1", tree.all_trial_dirs())
    assert (wasted, lost) == (0, 0) and idle <= IDLE_STOP_AFTER


@pytest.mark.e2e
def test_server_dies_mid_bench_is_relaunched_and_mopup_continues(world, report_line):
    plan = dict(PLAN, **{"t-readtimeout": ["server-dies", "pass"]})
    tree = world(plan)
    proc = tree.reproduce()
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "the server died under bench.sh (job alice/srv1 stage ERROR" in proc.stderr
    assert "letting it finish (its trials fail as infra errors, which mop-up retries)" in proc.stderr
    assert "relaunching the server (1 of at most 2)" in proc.stderr
    progress = tree.progress()
    assert [(s["job"], s["status"]) for s in progress["servers"]] == [("alice/srv1", "died"), ("alice/srv2", "stopped")]
    assert progress["relaunches"] == 1 and progress["steps"]["bench"]["server_died"] is True
    assert len(tree.api.launches()) == 2
    assert tree.api.stages() == {"srv1": "ERROR", "srv2": "CANCELED"}
    # Mop-up ran against the new endpoint: it probed srv2; srv1 was dead.
    assert tree.server_json()["job_id"] == "srv2"
    assert tree.server_json()["endpoint"] == f"{tree.servers[1].url}/v1"
    assert any(r["path"] == "/v1/models" for r in tree.servers[1].requests())
    relaunch = [json.loads(line) for line in (tree.state / "manifest.jsonl").read_text().splitlines()
                if '"reproduce-relaunch"' in line]
    assert [(r["job_id"], r["endpoint"], r["relaunch"]) for r in relaunch] == [("srv2", f"{tree.servers[1].url}/v1", 1)]
    final = tree.tally()
    assert (final["passed"], final["failed"], final["errored"], final["unfinished"]) == (6, 3, 0, 0)
    wasted, idle, lost = figures(tree, report_line, "srv2", tree.all_trial_dirs())
    assert (wasted, lost) == (0, 0) and idle <= IDLE_STOP_AFTER


@pytest.mark.e2e
def test_sigkilled_twice_resumes_without_a_second_server(world, report_line):
    # t-hang runs until released: the supervisor is killed while harbor runs it, in bench and
    # then in the first mop-up pass (a crashed trial is unfinished, so mop-up retries it).
    plan = dict(PLAN, **{"t-hang": ["slow-pass"]})
    tree = world(plan)
    release = tree.tmp / "release-t-hang"
    seen: set[str] = set()

    def hang_attempts():
        return [r for r in tree.executed() if r["task"] == "t-hang"]

    first = tree.start(SCRIPTED_ENV_RELEASE=str(release))
    wait_for(lambda: len(hang_attempts()) >= 1 or first.poll() is not None, 300, "bench to reach t-hang")
    assert first.poll() is None, "the supervisor ended before bench reached t-hang"
    assert tree.progress()["current_step"] == "bench"
    kill_session(first)
    seen |= tree.all_trial_dirs()

    second = tree.start(SCRIPTED_ENV_RELEASE=str(release))
    wait_for(lambda: len(hang_attempts()) >= 2 or second.poll() is not None, 300, "mop-up to reach t-hang")
    assert second.poll() is None, "the supervisor ended before mop-up reached t-hang"
    progress = tree.progress()
    assert progress["current_step"] == "mopup"
    # The pass t-hang hangs in: the first, or a later one when the first ran only the tasks the killed
    # bench never started (under load, its t-hang trial may still look under way then).
    hung = progress["mopup_passes"][-1]
    assert hung["status"] == "running" and "t-hang" in hung["planned"], progress["mopup_passes"]
    kill_session(second)
    seen |= tree.all_trial_dirs()
    assert len(tree.api.launches()) == 1

    release.touch()  # the third life runs t-hang to its end
    third = tree.reproduce(SCRIPTED_ENV_RELEASE=str(release))
    assert third.returncode == 0, third.stdout + third.stderr
    assert "serve: skipped (server job alice/srv1 is healthy" in third.stderr
    assert "bench: skipped (done before)" in third.stderr or "bench: skipped (its job dir exists" in third.stderr
    # Never a second server: one launch in all three lives, cancelled once at the end.
    assert len(tree.api.launches()) == 1 and tree.api.stages() == {"srv1": "CANCELED"}
    progress = tree.progress()
    # The pass the kill ended is recorded as interrupted, and it is the only one.
    statuses = [p["status"] for p in progress["mopup_passes"]]
    assert statuses[hung["pass"] - 1] == "interrupted" and statuses.count("interrupted") == 1, statuses
    assert len(progress["invocations"]) == 3
    final = tree.tally()
    # Every task, also those the killed bench never started (only mop-up's selection knows them).
    assert (final["tasks"], final["passed"], final["failed"], final["errored"], final["unfinished"]) == (9, 6, 3, 0, 0)
    # The smoke test ran once: it was done before the first kill.
    assert [r["task"] for r in tree.executed() if r["job"] == f"{JOB}-smoke"] == ["t-pass"]
    wasted, idle, lost = figures(tree, report_line, "srv1", seen)
    assert (wasted, lost) == (0, 0) and idle <= IDLE_STOP_AFTER


@pytest.mark.e2e
def test_a_sigkilled_reproduce_leaves_its_server_to_the_watchdog_which_cancels_it_after_the_grace(world, report_line):
    """The rehearsal (docs/watchdog.md): every local process of a make reproduce is killed with
    SIGKILL mid-bench, so nothing will ever stop its server. The test then plays HF's scheduler,
    running the watchdog's recorded job spec again and again (each run starting when the last
    ends: that is WATCHDOG_EVERY here): every check says held while the last heartbeat is within
    WATCHDOG_GRACE, and the first past it cancels the server and removes the watchdog."""
    grace = 8
    plan = dict(PLAN, **{"t-hang": ["slow-pass"]})
    tree = world(plan)
    first = tree.start(SCRIPTED_ENV_RELEASE=str(tree.tmp / "never"), HEARTBEAT_EVERY="2s", WATCHDOG_GRACE=f"{grace}s")

    def beats() -> list[dict]:
        return [r for r in tree.api.requests() if (r["method"], r["path"]) == ("PUT", "/api/jobs/alice/srv1/labels")]

    wait_for(lambda: any(r["task"] == "t-hang" for r in tree.executed()) and beats() or first.poll() is not None, 300,
             "bench to reach t-hang, with the run's heartbeat on its server")
    assert first.poll() is None, "the supervisor ended before bench reached t-hang"
    kill_session(first)
    killed_at = time.time()
    beaten = beats()
    last_beat = int(beaten[-1]["body"]["labels"]["heartbeat"])
    assert last_beat <= killed_at
    # What HF keeps of the watchdog: the spec make serve scheduled, with its secret by name only.
    created = [r for r in tree.api.requests() if (r["method"], r["path"]) == ("POST", "/api/scheduled-jobs/alice")]
    assert len(created) == 1
    spec = created[0]["body"]["jobSpec"]
    assert spec["secrets"] == {"HF_TOKEN": "***"} and TOKEN not in json.dumps(created)
    assert spec["environment"]["WATCHDOG_GRACE"] == f"{grace}s" and spec["labels"]["role"] == "watchdog"

    runs = []
    while not tree.api.cancels("srv1"):
        assert len(runs) < 100, f"the watchdog never cancelled the server: {runs[-1][0].stdout}"
        runs.append(play_the_scheduler(spec, endpoint=tree.api.url, token=TOKEN, tmp=tree.tmp))
        proc = runs[-1][0]
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert TOKEN not in proc.stdout + proc.stderr
    verdicts = [p.stdout.splitlines()[1].split(": ")[2] for p, _, _ in runs]
    # Held while the heartbeat was within the grace; the first check past it cancelled.
    assert verdicts == ["held"] * (len(runs) - 1) + ["cancelled"], [p.stdout for p, _, _ in runs]
    assert all(started - last_beat <= grace + 1 for _, started, _ in runs[:-1])
    _, cancel_start, cancel_end = runs[-1]
    # The scheduler's first run comes at the kill, each next one when the last ends: its period here
    # (WATCHDOG_EVERY) is one run's length.
    every = max(end - start for _, start, end in runs)
    # When the check decided (its own clock, in whole seconds, on the server's labels): past the
    # grace of the last heartbeat, and within one period of it (or of the kill). Not when its process
    # started: on a loaded machine that comes seconds before the decision.
    from tools.run import watchdog, watchdog_bundle
    verdict_labels = [r["body"]["labels"] for r in beats() if watchdog.ON_SERVER_VERDICT in r["body"]["labels"]]
    decided_at = int(verdict_labels[0][watchdog.ON_SERVER_CHECKED])
    assert last_beat + grace <= decided_at <= cancel_end
    assert cancel_start <= max(last_beat + grace, killed_at) + every + 1
    cancelled_at = tree.api.cancels("srv1")[0]["at"]
    report_line(f"last heartbeat {killed_at - last_beat:.1f}s before the kill; server cancelled {cancelled_at - last_beat:.1f}s "
                f"after it (WATCHDOG_GRACE {grace}s + one check of {every:.1f}s), by check {len(runs)}")
    assert cancelled_at - last_beat <= grace + every + (cancel_end - cancel_start) + 1
    assert "cancelled: nothing has held the run for" in runs[-1][0].stdout
    assert tree.api.stages()["srv1"] == "CANCELED"
    # Its verdict stays on the server; the watchdog removed itself.
    assert [labels[watchdog.ON_SERVER_VERDICT] for labels in verdict_labels] == ["cancelled"]
    assert [(r["method"], r["path"]) for r in tree.api.requests() if r["method"] == "DELETE"] == [
        ("DELETE", "/api/scheduled-jobs/alice/sched-1")]
    # The job ran what make serve packed: huggingface_hub's hash-pinned requirements, installed so.
    assert (tree.tmp / "pip-argv").read_text().splitlines()[0] == (
        "install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps --require-hashes -r "
        "requirements.txt")
    assert (tree.tmp / "pip-requirements.txt").read_text() == watchdog_bundle.requirements((REPO / "env/requirements.lock").read_text())


@pytest.mark.e2e
def test_crash_loop_stops_with_a_clear_message_and_nothing_billing(world, report_line):
    bad = [{"id": "bad1", "stages": ["ERROR"], "message": "CUDA out of memory", "logs": ["OOM"]},
           {"id": "bad2", "stages": ["ERROR"], "message": "CUDA out of memory", "logs": ["OOM"]},
           {"id": "bad3", "stages": ["ERROR"]}]
    tree = world(new_jobs=bad)
    proc = tree.reproduce(MAX_RELAUNCHES="1")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert ("reproduce: the server failed to start or died 2 time(s) in a row (MAX_RELAUNCHES=1): stopping here "
            "so a crash loop bills no GPU") in proc.stderr
    assert len(tree.api.launches()) == 2
    # Every created job is terminal: none bills.
    assert tree.api.stages() == {"bad1": "ERROR", "bad2": "ERROR"}
    assert tree.executed() == []
    progress = tree.progress()
    assert progress["steps"]["serve"]["status"] == "failed"
    assert [s["status"] for s in progress["servers"]] == ["failed", "stopped"]
    assert progress["invocations"][-1]["outcome"].startswith("failed: the server failed to start")
    assert "Traceback" not in proc.stderr


def test_dry_run_prints_the_whole_plan_and_writes_nothing(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("RUN", "API_BASE", "CLI_SETTINGS", "HF_TOKEN")}
    env.update(RUN="qwen-t2", DRY_RUN="1", STATE_ROOT=str(tmp_path / "state"))
    proc = subprocess.run([str(REPO / "scripts/reproduce.sh")], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    # Each step, and after serve the run's watchdog it installs (docs/watchdog.md); then make plan's
    # estimate of the whole run (docs/plan.md §1; its figures: tests/test_plan.py), and the run's
    # ceiling against it (docs/cost.md §2; tests/test_ceiling.py).
    assert [line.split()[0] for line in lines] == ["serve", "watchdog", *reproduce_state.STEPS[1:], "estimate",
                                                   "ceiling"]
    serve, watchdog, probe, smoke, bench, mopup, tally, stop, _, estimate, ceiling = lines
    assert ceiling.startswith("ceiling  MAX_COST=115 (make plan's figure for this configuration: MAX_COST=")
    assert estimate.startswith("estimate make plan's model for this configuration (qwen3.8-27b-fp8-sglang-h200, "
                               "1 shard(s) × -n 3, 3 trial(s) at once): median ")
    assert watchdog.startswith("watchdog hf jobs scheduled run -q --flavor cpu-basic --timeout 15m --no-concurrency "
                               "--secrets HF_TOKEN --name watchdog-qwen-t2 --label project=terminal-bench-harness "
                               "--label run=qwen-t2 --label 'instance=<run instance id>' --label role=watchdog "
                               "--label 'code=<its sha256>' -e WATCHDOG_RUN=qwen-t2 "
                               "-e WATCHDOG_PROJECT=terminal-bench-harness -e 'WATCHDOG_INSTANCE=<run instance id>' ")
    assert "-e WATCHDOG_GRACE=1h -e 'WATCHDOG_BUNDLE=<the watchdog'\\''s code: python -m tools.run.watchdog_bundle>'" in watchdog
    assert "'*/15 * * * *' python:3.12-slim -- bash -c 'set -euo pipefail; " in watchdog
    assert watchdog.endswith("exec python -m tools.run.watchdog check'   (installed by make serve beside each server it "
                             "launches, replacing the run's earlier one; removed by stop; docs/watchdog.md)")
    assert serve.startswith("serve    hf jobs run --label 'launch=<unique per launch>' --label 'instance=<run instance id>' --detach -q --flavor h200 --expose 30000 "
                            "--secrets HF_TOKEN --timeout 4d")
    assert "lmsysorg/sglang:v0.5.23 -- sglang serve --model-path Qwen/Qwen3.8-27B-FP8" in serve
    assert probe == "probe    RUN=qwen-t2 scripts/probe.sh"
    assert "--job-name qwen3_8-27b-fp8-terminus2-tb21-full-v2-smoke --n-concurrent 1 -y" in smoke and "--n-tasks 1" in smoke
    assert "--job-name qwen3_8-27b-fp8-terminus2-tb21-full-v2 --n-concurrent 3 -y" in bench
    assert 'OPENAI_API_KEY="$(hf auth token)"' in bench and "--ak reasoning_effort=low" in bench
    assert mopup.startswith("mopup    RUN=qwen-t2 AUTO_STOP=0 PROBE=1 scripts/mopup.sh   (at most 3 pass(es)")
    assert ("python -m tools.run.reproduce targets --jobs-dir jobs --job-name qwen3_8-27b-fp8-terminus2-tb21-full-v2 "
            "--model Qwen/Qwen3.8-27B-FP8 --max-task-retries 3, lists tasks") in mopup
    assert "relaunched at most 2 time(s)" in mopup
    assert tally == "tally    RUN=qwen-t2 scripts/tally.sh"
    assert stop.startswith("stop     RUN=qwen-t2 scripts/stop.sh   (hf jobs cancel of the run's server, then removes its "
                           "watchdog: hf jobs scheduled ps -a -q --namespace '<namespace>' -l project=terminal-bench-harness "
                           "-l run=qwen-t2 -l 'instance=<run instance id>' -l role=watchdog, and hf jobs scheduled "
                           "delete of each;")
    assert "placeholder, https://<job_id>--30000.hf.jobs/v1" in proc.stderr
    assert not (tmp_path / "state").exists()


def test_where_hf_is_accepted_by_the_real_hf_dry_run(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("RUN", "API_BASE", "CLI_SETTINGS", "DRY_RUN")}
    env.update(RUN="qwen-t2", WHERE="hf", BUCKET="alice/tb-results", HF_TOKEN=TOKEN, HF_HOME=str(tmp_path),
               HF_HUB_DISABLE_UPDATE_CHECK="1", STATE_ROOT=str(tmp_path / "state"), MOPUP_PASSES="5",
               TASKS="fix-git 'a b'")
    (tmp_path / ".agent_harnesses.json").write_text('{"standardEnvVars": [], "harnesses": {}}\n')
    script = ('source scripts/reproduce.sh; resolve_run; load_settings; refuse_key_in_argv; '
              'supervisor_argv argv dry-run "$1"; printf "%s\\0" "${argv[@]}" >"$2"; "${argv[@]}"')
    proc = subprocess.run(["bash", "-c", script, "reproduce", str(tmp_path), str(tmp_path / "argv")], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "  volumes  hf://buckets/alice/tb-results:/data" in out
    assert f"           {tmp_path}:/repo" in out
    assert "  secrets  HF_TOKEN=***" in out
    assert any(line.strip() == "role=supervisor" for line in out.splitlines())
    # The settings given on the command line go in as data, and the job's script only names them.
    assert "  env      RUN=qwen-t2" in out and "           MOPUP_PASSES=5" in out
    assert "           TASKS=fix-git 'a b'" in out and "MAX_RELAUNCHES" not in out
    script = argv_script(tmp_path)
    assert script.endswith('make setup; make reproduce "RUN=$RUN" WHERE=local JOBS_DIR=/data STATE_ROOT=/data/state '
                           '"RUN_INSTANCE=$RUN_INSTANCE" '
                           '"TASKS=$TASKS" "MOPUP_PASSES=$MOPUP_PASSES" "BUCKET=$BUCKET"'), script
    assert "fix-git" not in script
    argv = (tmp_path / "argv").read_text().split("\0")[:-1]
    assert TOKEN not in out + proc.stderr and not any(TOKEN in word for word in argv)
    assert "(dry run) Job not submitted." in out
    # The job's script runs the same supervisor: make reproduce, which execs tools/run/reproduce.py.
    assert "make reproduce" in argv[-1] and argv[-3:-1] == ["bash", "-c"]


def argv_script(tmp_path) -> str:
    """The job's script: the last word of the argv the test saved."""
    return (tmp_path / "argv").read_text().split("\0")[:-1][-1]


def test_bundled_example_and_bad_settings_are_refused(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("RUN", "API_BASE", "CLI_SETTINGS")}
    env.update(STATE_ROOT=str(tmp_path / "state"))
    ex = subprocess.run([str(REPO / "scripts/reproduce.sh")], env={**env, "RUN": "example-terminus2"},
                        capture_output=True, text=True, timeout=60)
    assert ex.returncode == 1 and "run 'example-terminus2' is a bundled example" in ex.stderr
    assert "make reproduce RUN=<one of:" in ex.stderr
    bad = subprocess.run([str(REPO / "scripts/reproduce.sh")], env={**env, "RUN": "qwen-t2", "MOPUP_PASSES": "two"},
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1
    assert bad.stderr.strip() == "reproduce: setting MOPUP_PASSES must be a whole number from 0 to 1000, got 'two' (run 'qwen-t2')"
    assert not (tmp_path / "state").exists()


def test_a_job_of_another_model_under_the_run_s_name_is_refused_before_a_server_is_paid_for(tmp_path):
    """qwen-t2 whose job dir ran another model (a run file copied from another keeps the original's
    JOB_NAME): make reproduce refuses before it takes the lock or launches anything, and the
    supervisor's own selection (targets, before every mop-up pass) refuses the same dir."""
    from tests.fixtures.harbor_jobs import TrialSpec, write_job

    jobs = tmp_path / "jobs"
    job = write_job(jobs, "qwen3_8-27b-fp8-terminus2-tb21-full-v2", [TrialSpec("t1", None, "SandboxError")],
                    model="openai/Other/Model-7B")
    why = (f"{job} ran model 'openai/Other/Model-7B' (its config.json), not the run's MODEL Qwen/Qwen3.8-27B-FP8: "
           f"another run's job under this run's job name")
    env = {k: v for k, v in os.environ.items() if k not in ("RUN", "API_BASE", "CLI_SETTINGS", "DRY_RUN")}
    env.update(RUN="qwen-t2", JOBS_DIR=str(jobs), STATE_ROOT=str(tmp_path / "state"), HF_TOKEN="hf_fake",
               HF_ENDPOINT="http://127.0.0.1:1")  # nothing listens: a launch could not even be tried
    proc = subprocess.run([str(REPO / "scripts/reproduce.sh")], env=env, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.splitlines()[-1].startswith(f"reproduce: {why}")
    assert not (tmp_path / "state").exists()
    targets = subprocess.run([sys.executable, "-m", "tools.run.reproduce", "targets", "--jobs-dir", str(jobs),
                              "--job-name", job.name, "--model", "Qwen/Qwen3.8-27B-FP8"],
                             cwd=REPO, capture_output=True, text=True, timeout=120)
    assert targets.returncode == 1 and why in targets.stderr and targets.stdout == ""


def test_no_token_is_said_before_any_hf_call_and_a_failed_start_is_never_remembered(tmp_path):
    """A new user without a token: one line saying so, before MAX_COST's check (or anything else)
    asks HF; and no failed start, the token's or the probe's, becomes the remembered run."""
    api = JobsAPI(tmp_path, {})
    try:
        state = tmp_path / "state"
        state.mkdir()
        (state / "last-run").write_text("qwen-mswea\n")  # the run the user last worked on
        hf_home = tmp_path / "hf-home"  # no login: `hf auth token` has nothing to print
        hf_home.mkdir()
        (hf_home / ".agent_harnesses.json").write_text('{"standardEnvVars": [], "harnesses": {}}\n')
        env = {k: v for k, v in os.environ.items()
               if k not in ("RUN", "API_BASE", "CLI_SETTINGS", "DRY_RUN", "HF_TOKEN", "HF_NAMESPACE", "JOBS_DIR")}
        env.update(RUN="qwen-t2", MAX_COST="500", STATE_ROOT=str(state), HF_ENDPOINT=api.url, HF_HOME=str(hf_home),
                   HF_HUB_DISABLE_UPDATE_CHECK="1", JOBS_DIR=str(tmp_path / "jobs"))
        proc = subprocess.run([str(REPO / "scripts/reproduce.sh")], env=env, capture_output=True, text=True,
                              timeout=120, stdin=subprocess.DEVNULL)
        assert proc.returncode == 1
        assert proc.stderr.splitlines()[-1] == ("reproduce: no HF token: set HF_TOKEN or run 'hf auth login' (the "
                                                "server job, its endpoint and the sandboxes need it)")
        assert "Not logged in" not in proc.stderr + proc.stdout
        assert api.requests() == []  # not one HF call
        assert sorted(p.name for p in state.iterdir()) == ["last-run"]
        assert (state / "last-run").read_text() == "qwen-mswea\n"
        # With a token, a start that fails (the probe: nothing answers at API_BASE) is not remembered either.
        env.update(HF_TOKEN="hf_fake-token", API_BASE="http://127.0.0.1:1/v1", PROBE_TIMEOUT="5")
        del env["MAX_COST"]
        proc = subprocess.run([str(REPO / "scripts/reproduce.sh")], env=env, capture_output=True, text=True,
                              timeout=300, stdin=subprocess.DEVNULL)
        assert proc.returncode == 1, proc.stderr
        assert "reproduce: the probe step failed" in proc.stderr
        assert (state / "last-run").read_text() == "qwen-mswea\n"
    finally:
        api.stop()


def test_the_supervisor_refuses_to_run_without_the_lock(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "tools.run.reproduce", "run", "--run", "r", "--repo", str(REPO),
                           "--state-dir", str(tmp_path / "s"), "--jobs-dir", str(tmp_path / "j"), "--job-name", "j"],
                          env={k: v for k, v in os.environ.items() if k != "RUN_LOCK_HELD"}, capture_output=True,
                          text=True, pass_fds=())
    assert proc.returncode == 1
    assert "run this through make reproduce RUN=r: it holds the run's lock" in proc.stderr
    assert not (tmp_path / "s").exists()


# --- pure functions ---------------------------------------------------------------------------------


def test_relaunch_is_due_only_after_a_death_or_failure():
    assert reproduce_state.relaunch_is_due({"servers": []}) is False
    assert reproduce_state.relaunch_is_due({"servers": [{"status": "died"}]}) is True
    assert reproduce_state.relaunch_is_due({"servers": [{"status": "failed"}]}) is True
    assert reproduce_state.relaunch_is_due({"servers": [{"status": "stopped"}]}) is False


def test_health_url():
    assert reproduce_server.health_url("https://abc--30000.hf.jobs/v1") == "https://abc--30000.hf.jobs/health"
    assert reproduce_server.health_url("http://127.0.0.1:9/v1/") == "http://127.0.0.1:9/health"


def test_state_is_replaced_atomically_and_checked(tmp_path):
    path = tmp_path / "reproduce.json"
    state = reproduce_state.new_state("r")
    reproduce.save_state(path, state)
    assert reproduce_state.load_state(path, "r")["run"] == "r" and list(tmp_path.iterdir()) == [path]
    path.write_text("{")
    with pytest.raises(reproduce_state.Failure, match="is not readable JSON"):
        reproduce_state.load_state(path, "r")
    reproduce.save_state(path, reproduce_state.new_state("other"))
    with pytest.raises(reproduce_state.Failure, match="not this run's supervisor state"):
        reproduce_state.load_state(path, "r")



@pytest.mark.parametrize("kind", hostile.KINDS)
def test_a_state_file_that_is_no_regular_file_or_too_big_is_refused_never_read(tmp_path, kind):
    # A FIFO once blocked the supervisor (read_text waits for a writer); a huge file was read whole.
    path = tmp_path / "reproduce.json"
    reason = hostile.make(path, kind, 4 * hostile.MiB, "the supervisor state")
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(reproduce_state.BadState) as e:
        reproduce_state.load_state(path, "r")
    assert str(e.value) == (f"{path} is not readable JSON ({reason}): move it aside and run make reproduce RUN=r again "
                            "(the job dirs and state/ stay; finished steps are found again from them)")
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def server_of(tmp_path: Path) -> reproduce_server.Server:
    cfg = reproduce_state.Config(run="r", repo=tmp_path, state_dir=tmp_path, jobs_dir=tmp_path / "jobs", job_name="r",
                                 api_base="", verdicts=None, mopup_passes=0, max_relaunches=0, idle_stop_after=0,
                                 health_poll=1.0)
    return reproduce_server.Server(cfg, "", reproduce_state.new_state("r"), lambda: None, None, lambda _: None)


@pytest.mark.parametrize("kind", hostile.KINDS)
def test_a_server_record_that_is_no_regular_file_or_too_big_is_refused_never_taken_for_no_server(tmp_path, kind):
    path = tmp_path / "server.json"
    reason = hostile.make(path, kind, 4 * hostile.MiB, "a server record")
    server = server_of(tmp_path)
    with pytest.raises(reproduce_state.Failure) as e:
        server.recorded_server()
    assert str(e.value) == f"{path} cannot be read as a server record ({reason}): check make jobs, then remove it"
    # What it always said stays: nothing there, or a record cut short, is no server; a record of no job is refused.
    if kind == "directory":
        path.rmdir()
    else:
        path.unlink()
    assert server.recorded_server() is None
    path.write_text('{"namespace": "ns", "job_')
    assert server.recorded_server() is None
    path.write_text('{"namespace": "ns", "job_id": "j", "endpoint": "https://e/v1"}')
    assert server.recorded_server() == {"job": "ns/j", "endpoint": "https://e/v1", "launched_at": None}
    path.write_text("[1]")
    with pytest.raises(reproduce_state.Failure, match="is not a server record"):
        server.recorded_server()


@pytest.mark.e2e
def test_a_state_file_of_the_wrong_shape_is_refused_and_the_server_is_stopped_first(world):
    # Each of these once crashed the supervisor before its cleanup: no cancel, the GPU billing on.
    tree = world()
    served = subprocess.run([str(tree.root / "scripts" / "serve.sh")], cwd=tree.root, env=tree.env(),
                            capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert served.returncode == 0, served.stderr
    for bad, why in (({"steps": []}, "steps is [], not an object"),
                     ({"steps": {"serve": "done"}}, "steps holds something other than objects"),
                     ({"invocations": {}}, "invocations is {}, not a list"),
                     ({"server": 1}, "server is 1, not an object or null")):
        written = json.dumps({**reproduce_state.new_state(RUN), **bad})
        (tree.state / "reproduce.json").write_text(written)
        proc = tree.reproduce()
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert (f"is not the supervisor state make reproduce writes ({why}): move it aside and run make reproduce "
                f"RUN={RUN} again") in proc.stderr
        assert (tree.state / "reproduce.json").read_text() == written  # refused, not rewritten
    assert len(tree.api.cancels("srv1")) == 1  # stopped before the first refusal; already stopped after


def test_trial_dirs_cover_the_job_or_its_shards_and_its_retry_jobs_only(tmp_path):
    for d in ("j/t-a__1", "j-retry-1/t-b__2", "jobs/j/t-c__3", "j-smoke/t-d__4", "jx/t-e__5", "j-shard-2/t-f__6",
              "j-shard-x/t-g__7"):
        (tmp_path / d).mkdir(parents=True)
    assert {Path(p).name for p in reproduce_passes.trial_dirs(tmp_path, "j")} == {"t-a__1", "t-b__2", "t-c__3", "t-f__6"}
    # bench has run once the job, or any shard, has its config.json.
    assert not reproduce_passes.job_dir_exists(tmp_path, "j")
    (tmp_path / "j-shard-2" / "config.json").write_text("{}")
    assert reproduce_passes.job_dir_exists(tmp_path, "j")
    assert not reproduce_passes.job_dir_exists(tmp_path / "nothing", "j")


def test_max_task_retries_is_one_option_in_every_verb_that_selects_retries():
    """The tally's tally and retry-targets, mop-up's plan and the supervisor's targets and run read
    MAX_TASK_RETRIES through tools/results/tally_options.py's one option: the same name, range,
    default and help in each."""
    from tools import tally
    from tools.mopup import mopup
    from tools.results import tally_options

    @tally_options.max_task_retries_option
    def shared(max_task_retries):
        pass

    want = shared.__click_params__[0]
    for command in (tally.tally_cmd, tally.retry_targets_cmd, mopup.plan, reproduce.targets_cmd, reproduce.run_cmd):
        got = next(p for p in command.params if p.name == "max_task_retries")
        assert (got.opts, got.type.min, got.type.max, got.default, got.show_default, got.help) == \
            (["--max-task-retries"], 0, 999, 3, True, want.help), command.name
