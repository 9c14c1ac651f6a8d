"""`make campaign` end to end: the campaign supervisor, the real verbs, the real harbor, the real hf CLI.

A scratch checkout (the real scripts/, tools/, env/ by symlink, as tests/test_reproduce.py's Tree)
with three test-only runs of its own and a campaign over them:
  - c-one and c-two: identical server commands, so ONE server (c-one owns it);
  - c-three: the same profile with SERVER_EXTRA_ARGS of its own, so a server of its own;
against the loopback fake HF Jobs API (every `hf jobs run` creates the next of srv1, srv2), two
loopback fake model servers, and the real harbor on tests/datasets/mopup with
tests/harbor_env/scripted_env.py playing the sandbox (its log says which tasks each job ran).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.fixtures import scratch
from tests.test_reproduce import TOKEN, JobsAPI, ModelServer, kill_session, read_port, wait_for  # noqa: F401

REPO = Path(__file__).resolve().parents[1]
MODEL = "Qwen/Qwen3.8-27B-FP8"
# The whole rehearsal's bound, against a hang, never a speed target: every wait of a test takes what
# is left of it, and the fakes (which stop by themselves) outlive it. Alone on this project's 2-core
# machine a rehearsal takes about 4 minutes; under make test four tests share the two cores, and a
# rehearsal took past the 10 minutes the fakes then lived: the fake Jobs API was gone mid-campaign.
BOUND = 2400
# The three rehearsals on one xdist worker, one after the other: each runs up to three harbors and
# three make reproduce at once, and two of them side by side on two cores starve each other.
pytestmark = pytest.mark.xdist_group("campaign_e2e")

RUN_FILE = """\
# Written by tests/test_campaign_e2e.py: a campaign's test run.
SERVER=qwen3.8-27b-fp8-sglang-h200
MODEL={model}
JOB_NAME={job}
AGENT=oracle
DATASET_PATH=dataset
ENV_TYPE=scripted_env:ScriptedEnv
AGENT_TIMEOUT_MULTIPLIER=1
N_CONCURRENT={nc}
TASKS="{tasks}"
SMOKE_TASK={tasks}
HF_NAMESPACE=alice
READY_POLL=1
LINGER_GRACE=5
STOP_GRACE=5
{extra}"""
# One task, the same for every run (make compare compares runs of one task set), so make reproduce
# skips the smoke (it would run the bench's very task): the rehearsal stays short on a loaded machine.
# c-three asks 3 trials at once: within a budget of 4 it fits only once both c-one and c-two ended.
RUNS = {
    "c-one": ("cj-one", 2, "t-hang", ""),
    "c-two": ("cj-two", 2, "t-hang", ""),
    "c-three": ("cj-three", 3, "t-hang", 'SERVER_EXTRA_ARGS="--max-running-requests 8"\n'),
}
CAMPAIGN_FILE = """\
# Written by tests/test_campaign_e2e.py.
RUNS="c-one c-two c-three"
MAX_COST={max_cost}
MAX_AT_ONCE={at_once}
COST_POLL=1
"""


class Campaign:
    """A scratch checkout holding the campaign, its runs and the dataset; the fakes around it."""

    def __init__(self, tmp: Path, plan: dict, max_cost: float = 500, at_once: int = 4, servers: int = 2):
        self.tmp = tmp
        self.deadline = time.monotonic() + BOUND
        self.servers = [ModelServer(tmp, f"srv{i}", lifetime=BOUND + 300) for i in range(1, servers + 1)]
        # srv1 turns ERROR once srv1.dead exists (a test that kills its model server makes it).
        self.api = JobsAPI(tmp, {"new_jobs": [{"id": f"srv{i}", "expose_url": server.url,
                                               "running_secs_file": str(tmp / f"srv{i}.secs"),
                                               **({"error_if_exists": str(tmp / "srv1.dead")} if i == 1 else {})}
                                              for i, server in enumerate(self.servers, start=1)]},
                           lifetime=BOUND + 300)
        # tools/ as a copy: the report finds runs in the checkout its own files are in (the scratch one).
        self.root = scratch.checkout(tmp / "repo", copy_tools=True)
        for run, (job, nc, tasks, extra) in RUNS.items():
            (self.root / "runs" / f"{run}.env").write_text(RUN_FILE.format(model=MODEL, job=job, nc=nc, tasks=tasks,
                                                                           extra=extra))
        (self.root / "campaigns").mkdir()
        (self.root / "campaigns" / "rehearsal.env").write_text(CAMPAIGN_FILE.format(max_cost=max_cost, at_once=at_once))
        self.bin, self.hf_home = scratch.offline_stand_ins(tmp)
        (tmp / "plan.json").write_text(json.dumps(plan))
        self.log = tmp / "executed.jsonl"
        self.release = tmp / "release"
        self.state = self.root / "state" / "campaigns" / "rehearsal"

    def env(self, **settings: str) -> dict:
        drop = ("RUN", "RUNS", "JOB_NAME", "DRY_RUN", "API_BASE", "STATE_ROOT", "CLI_SETTINGS", "HF_NAMESPACE", "WHERE",
                "AI_AGENT", "AGENT", "CLAUDECODE", "HF_HUB_OFFLINE", "RUN_LOCK_HELD", "CAMPAIGN")
        env = {k: v for k, v in os.environ.items() if k not in drop}
        env.update(
            CAMPAIGN="rehearsal", PATH=f"{self.bin}:{REPO / '.venv/bin'}:{os.environ['PATH']}",
            HF_ENDPOINT=self.api.url, HF_TOKEN=TOKEN, HF_HOME=str(self.hf_home), HF_HUB_DISABLE_UPDATE_CHECK="1",
            GIT_CONFIG_COUNT="1", GIT_CONFIG_KEY_0="filter.lfs.process", GIT_CONFIG_VALUE_0="git-lfs filter-process",
            HARBOR_TELEMETRY="0", LITELLM_LOCAL_MODEL_COST_MAP="True", PYTHONPATH=str(REPO / "tests" / "harbor_env"),
            SCRIPTED_ENV_PLAN=str(self.tmp / "plan.json"), SCRIPTED_ENV_LOG=str(self.log),
            SCRIPTED_ENV_RELEASE=str(self.release), SCRIPTED_ENV_SERVER_PID_FILE=str(self.servers[0].pid_file),
            SCRIPTED_ENV_SERVER_DEAD_FILE=str(self.tmp / "srv1.dead"), HEALTH_POLL="1")
        env.update(settings)
        return env

    def argv(self, verb: str = "run") -> list[str]:
        return [str(self.root / "scripts" / "campaign.sh"), verb]

    def run(self, verb: str = "run", **settings) -> subprocess.CompletedProcess:
        return subprocess.run(self.argv(verb), cwd=self.root, env=self.env(**settings), capture_output=True, text=True,
                              timeout=self.left(), stdin=subprocess.DEVNULL)

    def start(self) -> subprocess.Popen:
        out = open(self.tmp / "campaign.log", "w")  # noqa: SIM115
        return subprocess.Popen(self.argv(), cwd=self.root, env=self.env(), stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)

    def left(self) -> float:
        """Seconds left of the rehearsal's BOUND (at least one: a wait past it fails at once)."""
        return max(1.0, self.deadline - time.monotonic())

    def ended(self, proc: subprocess.Popen) -> int:
        """The supervisor's exit code; past BOUND it is killed, and the failure says where each log stood."""
        try:
            return proc.wait(timeout=self.left())
        except subprocess.TimeoutExpired:
            kill_session(proc)
            logs = [self.tmp / "campaign.log", *sorted(self.state.glob("*.log"))]
            tails = "\n".join(f"--- {log.name} (last 40 lines)\n" + "\n".join(log.read_text().splitlines()[-40:])
                              for log in logs if log.is_file())
            pytest.fail(f"make campaign did not end within the rehearsal's bound of {BOUND}s (killed):\n{tails}")

    def executed(self) -> list[dict]:
        return [json.loads(line) for line in self.log.read_text().splitlines() if line] if self.log.exists() else []

    def record(self) -> dict:
        path = self.state / "campaign.json"
        return json.loads(path.read_text()) if path.exists() else {"runs": {}, "servers": {}}

    def server_launches(self) -> list[dict]:
        return [r for r in self.api.launches() if (r.get("body") or {}).get("labels", {}).get("role") == "server"]

    def trial_dirs(self) -> set[str]:
        found = set()
        for base in [self.root / "jobs", *(self.root / "state").glob("*/archive")]:
            if base.exists():
                found |= {p.name for p in base.rglob("*__*") if p.is_dir() and (p / "config.json").exists()}
        return found

    def stop(self) -> None:
        for thing in (*self.servers, self.api):
            thing.stop()


@pytest.fixture
def campaign(tmp_path):
    made = []

    def make(plan, **kw):
        c = Campaign(tmp_path, plan, **kw)
        made.append(c)
        return c

    yield make
    for c in made:
        c.release.touch()
        c.stop()


def table_rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(("| cj-", "| ≠ t-", "| t-"))]


@pytest.mark.e2e
def test_a_campaign_shares_a_server_resumes_after_a_kill_and_ends_with_one_comparison(campaign):
    # t-hang's attempts in the order they start: c-one's and c-two's pass at once; c-three's waits for
    # the test (SCRIPTED_ENV_RELEASE), and so does its retry, released before the resume.
    c = campaign({"t-hang": ["pass", "pass", "slow-pass"]})
    proc = c.start()
    # c-three benches last (c-one and c-two fill the budget of 4 on their shared server); kill the
    # whole supervisor, with everything it started, while c-three's slow task is under way.
    wait_for(lambda: any(r["job"] == "cj-three" and r["task"] == "t-hang" for r in c.executed()) or proc.poll() is not None,
             c.left(), "c-three's bench to start its slow task")
    assert proc.poll() is None, (c.tmp / "campaign.log").read_text()
    mid = c.record()
    assert {run: r["status"] for run, r in mid["runs"].items()} == {"c-one": "done", "c-two": "done", "c-three": "running"}
    # The budget: c-one and c-two side by side (2 + 2 = 4), c-three (3) after both ended.
    assert mid["budget"]["n_concurrent"] == {"c-one": 2, "c-two": 2, "c-three": 3}
    assert mid["runs"]["c-three"]["started_at"] >= max(mid["runs"]["c-one"]["ended_at"], mid["runs"]["c-two"]["ended_at"])
    assert mid["runs"]["c-one"]["endpoint"] == mid["runs"]["c-two"]["endpoint"] != mid["runs"]["c-three"]["endpoint"]
    assert mid["servers"]["c-one"]["status"] == "stopped" and mid["servers"]["c-three"]["status"] == "up"
    before = c.trial_dirs()
    ran_before = {(r["job"], r["task"]) for r in c.executed()}
    kill_session(proc)

    c.release.touch()
    again = c.run()
    out = again.stdout + again.stderr
    assert again.returncode == 0, out
    # Exactly two servers in all: srv1 shared by c-one and c-two, srv2 for c-three, reused by the resume.
    launches = c.server_launches()
    assert len(launches) == 2, launches
    assert [launch["body"]["labels"]["run"] for launch in launches] == ["c-one", "c-three"]
    assert "server of c-three (alice/srv2) is still healthy: reused" in again.stderr
    # Finished runs are not rerun: no trial of c-one or c-two after the kill; c-three's slow task is retried.
    after = [(r["job"], r["task"]) for r in c.executed() if (r["job"], r["task"]) not in ran_before
             or r["job"].startswith("cj-three-retry")]
    assert {job.split("-retry")[0] for job, _ in after} <= {"cj-three"}
    record = c.record()
    assert {run: r["status"] for run, r in record["runs"].items()} == {"c-one": "done", "c-two": "done", "c-three": "done"}
    assert record["outcome"] == "done"
    assert {owner: s["status"] for owner, s in record["servers"].items()} == {"c-one": "stopped", "c-three": "stopped"}
    assert c.api.stages() == {"srv1": "CANCELED", "srv2": "CANCELED"}
    # Nothing lost: every trial dir from before the kill is still in its job or mop-up's archive.
    assert before - c.trial_dirs() == set()
    # The one comparison, with its exact rows.
    comparison = (c.state / "comparison.md").read_text()
    assert comparison.splitlines()[0] == "## Comparison: cj-one vs cj-two vs cj-three"
    rows = table_rows(comparison)
    # The headline table by its columns' names: the cost columns depend on the clock, and a column the
    # table shows only when some run has one (a trial the kill left unfinished) depends on when the kill fell.
    header = next(line for line in comparison.splitlines() if line.startswith("| Run | Agent | "))
    names = [cell.strip() for cell in header.strip("|").split("|")]
    kept = ("Run", "Agent", "Pass rate (excl. infra)", "95% CI (Wilson)", "Passed / Scored", "Errored",
            "Tokens in / out", "Agent hours", "Attempts / task")
    picked = [" | ".join(dict(zip(names, (c.strip() for c in row.strip("|").split("|"))))[k] for k in kept)
              for row in rows if " | oracle | " in row]
    assert picked == [f"{run} | oracle | 100.0% | 20.7–100.0% | 1/1 | 0 | 0 / 0 | 0.0 | 1.00"
                      for run in ("cj-one", "cj-two", "cj-three")]
    assert [row for row in rows if " | oracle | " not in row] == [
        "| cj-one | cj-two | 0 | 0 | 1 | 0 | 0 | n/a |",
        "| cj-one | cj-three | 0 | 0 | 1 | 0 | 0 | n/a |",
        "| cj-two | cj-three | 0 | 0 | 1 | 0 | 0 | n/a |",
        "| t-hang | passed | passed | passed |"]
    # The shared server is c-one's job: counted once, in c-one's cost; c-two had no job of its own.
    assert "- cj-two: cost unknown: no job found for the run" in comparison
    assert record["comparison"]["runs"] == ["c-one", "c-two", "c-three"] and record["comparison"]["report_rc"] == 0
    assert TOKEN not in out


@pytest.mark.e2e
def test_a_dead_shared_server_is_relaunched_and_its_runs_resume_on_it(campaign):
    # c-one's and c-two's first attempts of t-hang are under way on srv1 when it dies; every later
    # attempt passes at once (their retries on the new server, and c-three's on its own).
    c = campaign({"t-hang": ["slow-pass", "slow-pass", "pass"]}, servers=3)
    proc = c.start()
    wait_for(lambda: {r["job"] for r in c.executed() if r["task"] == "t-hang"} == {"cj-one", "cj-two"}
             or proc.poll() is not None, c.left(), "both runs of the shared server to be mid-trial")
    assert proc.poll() is None, (c.tmp / "campaign.log").read_text()
    c.servers[0].proc.kill()
    (c.tmp / "srv1.dead").touch()  # the fake Jobs API: srv1 is ERROR
    assert c.ended(proc) == 0, (c.tmp / "campaign.log").read_text()
    log = (c.tmp / "campaign.log").read_text()
    assert "campaign: the server of c-one died (job alice/srv1 stage ERROR, /health -): stopping" in log
    assert "campaign: relaunching the server of c-one (1 of at most 2); its runs resume on it" in log
    # Three launches: srv1, its replacement srv2 for c-one and c-two, then srv3 for c-three.
    assert [launch["body"]["labels"]["run"] for launch in c.server_launches()] == ["c-one", "c-one", "c-three"]
    assert c.api.stages() == {"srv1": "ERROR", "srv2": "CANCELED", "srv3": "CANCELED"}
    record = c.record()
    assert record["outcome"] == "done"
    assert {run: r["status"] for run, r in record["runs"].items()} == {"c-one": "done", "c-two": "done", "c-three": "done"}
    assert (record["servers"]["c-one"]["job"], record["servers"]["c-one"]["relaunches"]) == ("alice/srv2", 1)
    # Both runs resumed on the new server: their endpoint is srv2's, and it was asked.
    assert record["runs"]["c-one"]["endpoint"] == record["runs"]["c-two"]["endpoint"] == f"{c.servers[1].url}/v1"
    assert any(r["path"] == "/v1/models" for r in c.servers[1].requests())
    # Each cut-short trial was retried once, and each run passed its task in the end.
    attempts = sorted((r["job"].split("-retry")[0], r["behaviour"]) for r in c.executed())
    assert attempts == [("cj-one", "pass"), ("cj-one", "slow-pass"), ("cj-three", "pass"), ("cj-two", "pass"),
                        ("cj-two", "slow-pass")]
    rows = table_rows((c.state / "comparison.md").read_text())
    assert rows[-1] == "| t-hang | passed | passed | passed |"
    # make watch CAMPAIGN=…: the record (the relaunch in it), then each run's own frame.
    watched = c.run("watch")
    assert watched.returncode == 0, watched.stdout + watched.stderr
    said = [line for line in watched.stdout.splitlines() if line.startswith("campaign:   ")]
    assert said[:3] == [f"campaign:   run    {run}: done (N_CONCURRENT={n}, on {url}/v1)" for run, n, url in
                        (("c-one", 2, c.servers[1].url), ("c-two", 2, c.servers[1].url), ("c-three", 3, c.servers[2].url))]
    assert said[3] == (f"campaign:   server c-one's: stopped (alice/srv2, {c.servers[1].url}/v1) for c-one c-two, "
                       f"relaunched 1 time(s) (died {record['servers']['c-one']['died_at']})")
    assert [line for line in watched.stdout.splitlines() if line.startswith("campaign: make watch RUN=")] == [
        f"campaign: make watch RUN={run} ONCE=1" for run in ("c-one", "c-two", "c-three")]
    # make report CAMPAIGN=…: the same comparison, again, from the runs' job dirs (the flips and the
    # per-task outcomes: the headline's cost columns follow the clock of srv1, ERROR and never cancelled).
    reported = c.run("report")
    assert reported.returncode == 0, reported.stdout + reported.stderr
    assert [row for row in table_rows(reported.stdout) if " | oracle | " not in row] == [
        row for row in rows if " | oracle | " not in row]


@pytest.mark.e2e
def test_one_ceiling_stops_every_run_and_every_server(campaign):
    c = campaign({"t-hang": ["slow-pass"]}, max_cost=4, at_once=7)
    proc = c.start()
    wait_for(lambda: {r["job"] for r in c.executed() if r["task"] == "t-hang"} == {"cj-one", "cj-two", "cj-three"}
             or proc.poll() is not None, c.left(), "both servers' benches to be mid-trial")
    assert proc.poll() is None, (c.tmp / "campaign.log").read_text()
    # The shared server has billed ten hours of h200 ($50, past MAX_COST=4): the campaign's one ceiling.
    (c.tmp / "srv1.secs").write_text("36000\n")
    assert c.ended(proc) == 75, (c.tmp / "campaign.log").read_text()
    record = c.record()
    assert record["outcome"].startswith("MAX_COST reached: the campaign has spent $50.")
    # The shared server is c-one's job, counted once (10 h of h200 and its exposed port); c-two paid for nothing.
    assert record["ceiling"]["per_run"]["c-one"] >= 50 and record["ceiling"]["per_run"]["c-two"] == 0.0
    stopped = {run: r["status"] for run, r in record["runs"].items()}
    assert stopped == {"c-one": "interrupted", "c-two": "interrupted", "c-three": "interrupted"}
    assert c.api.stages() == {"srv1": "CANCELED", "srv2": "CANCELED"}
    # Every harbor was stopped with SIGINT: its slow trial was written cancelled (retryable), none is left running.
    # harbor 0.26 writes a trial cancelled while its environment starts with no exception_info at all (seen
    # under load): either way it is unscored (no verifier result) and mop-up retries it; none passed.
    for job in ("cj-one", "cj-two", "cj-three"):
        results = [json.loads(p.read_text()) for p in (c.root / "jobs" / job).glob("t-hang__*/result.json")]
        assert [(r["verifier_result"], (r["exception_info"] or {}).get("exception_type", "CancelledError"))
                for r in results] == [(None, "CancelledError")], job
    assert running_with(b"--job-name\x00cj-", mine=c.log) == []


def running_with(word: bytes, mine: Path) -> list[str]:
    """The pids whose command line holds `word` and that this test started (their environment names its
    SCRIPTED_ENV_LOG): the other rehearsal runs harbors of the same job names at the same time under xdist."""
    mark = b"SCRIPTED_ENV_LOG=" + bytes(mine) + b"\x00"
    found = []
    for path in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if word in path.read_bytes() and mark in (path.parent / "environ").read_bytes():
                found.append(path.parent.name)
        except OSError:
            continue
    return found
