"""Campaigns, piece by piece: the campaign file reader, the grouping by server command, the budget
split, the lock, and a dry run that writes nothing (the end-to-end rehearsal: test_campaign_e2e.py)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tools import settings as run_settings
from tools.campaign import campaign_file, campaign_runs, campaign_state
from tools.campaign.campaign_file import CampaignError
from tools.campaign.campaign_runs import RunInfo

REPO = Path(__file__).resolve().parents[1]


# --- the campaign file -----------------------------------------------------------------------------


@pytest.fixture
def root(tmp_path):
    (tmp_path / "campaigns").mkdir()
    (tmp_path / "runs").mkdir()
    for run in ("a", "b", "c"):
        (tmp_path / "runs" / f"{run}.env").write_text("SERVER=x\n")
    return tmp_path


def write(root: Path, text: str, name: str = "camp") -> None:
    (root / "campaigns" / f"{name}.env").write_text(text)


def test_a_campaign_file_is_read_as_data(root):
    write(root, '# two runs\nRUNS="a b"   # in order\nMAX_COST=12.5\nMAX_AT_ONCE=4\nDEADLINE=2d\nCOST_POLL=30\n')
    c = campaign_file.read(root, "camp")
    assert (c.runs, c.max_cost, c.max_at_once, c.deadline_secs, c.cost_poll) == (("a", "b"), 12.5, 4, 172800.0, 30)
    write(root, 'RUNS=c\nMAX_COST=3\n')
    c = campaign_file.read(root, "camp")
    assert (c.runs, c.max_at_once, c.deadline_secs, c.cost_poll) == (("c",), None, None, 60)


@pytest.mark.parametrize("text, error", [
    ('RUNS="a b"\nMAX_COST=5\nN_CONCURRENT=2\n',
     "campaigns/camp.env:3: N_CONCURRENT is not a campaign key (a campaign file sets RUNS, MAX_COST, MAX_AT_ONCE, "
     "DEADLINE, COST_POLL; a run's own settings go in its run file)"),
    ('RUNS="a b"\nMAX_COSTS=5\n', "campaigns/camp.env:2: MAX_COSTS is not a campaign key: did you mean MAX_COST? "
     "(a campaign file sets RUNS, MAX_COST, MAX_AT_ONCE, DEADLINE, COST_POLL; a run's own settings go in its run file)"),
    ('RUNS="a a"\nMAX_COST=5\n', "campaigns/camp.env:1: RUNS names a twice: a run is benched once per campaign"),
    ('RUNS="a zzz"\nMAX_COST=5\n', "campaigns/camp.env:1: RUNS names zzz, which has no runs/zzz.env"),
    ('RUNS="a d"\nMAX_COST=5\n', "campaigns/camp.env:1: RUNS names d, which has no runs/d.env: did you mean a?"),
    ('RUNS=a\nMAX_COST=0\n', "campaigns/camp.env:2: MAX_COST must be a positive number of US dollars"),
    ('RUNS=a\nMAX_COST=5\nMAX_AT_ONCE=lots\n', "campaigns/camp.env:3: MAX_AT_ONCE must be a whole number of trials "
     "at once, 1 to 1000 (empty: the plan's infra curve decides)"),
    ('RUNS=a\nMAX_COST=5\nDEADLINE=soon\n', "campaigns/camp.env:3: DEADLINE must be a duration, <number>[s|m|h|d] "
     "(empty: none)"),
    ('RUNS=a\nMAX_COST=5\nMAX_COST=6\n', "campaigns/camp.env:3: MAX_COST is set a second time: one NAME=value line "
     "per key"),
    ('RUNS=a\nMAX_COST=$MAX_AT_ONCE\n', "campaigns/camp.env:2: MAX_COST names a setting ($…): a campaign file holds "
     "plain values"),
    ('RUNS=a\n', "campaigns/camp.env:1: the campaign sets no MAX_COST: add MAX_COST=… (a positive number of US dollars)"),
])
def test_a_bad_line_is_refused_with_its_file_and_line(root, text, error):
    write(root, text)
    with pytest.raises(CampaignError) as e:
        campaign_file.read(root, "camp")
    assert str(e.value) == error


def test_what_is_not_a_statement_is_refused_by_the_settings_reader_with_its_line_never_run(root):
    write(root, 'RUNS=a\nMAX_COST=5\necho pwned\n')
    with pytest.raises(CampaignError) as e:
        campaign_file.read(root, "camp")
    assert str(e.value).startswith(f"{root}/campaigns/camp.env line 3 is not a setting (NAME=value), a comment or a blank line")
    write(root, 'RUNS="$(touch x)"\nMAX_COST=5\n')
    with pytest.raises(CampaignError, match=r"line 1 holds a command substitution"):
        campaign_file.read(root, "camp")
    assert not (root / "x").exists()


def test_an_unknown_campaign_is_named_with_the_known_ones(root):
    write(root, 'RUNS=a\nMAX_COST=5\n')
    with pytest.raises(CampaignError) as e:
        campaign_file.read(root, "nope")
    assert str(e.value) == ("unknown campaign 'nope': no campaigns/nope.env (known: camp); docs/campaigns.md says how "
                            "to write one")


def test_the_shipped_example_reads():
    c = campaign_file.read(REPO, "qwen-agents")
    assert c.runs == ("qwen-t2", "qwen-mswea", "qwen-claude-code", "gptoss-t2") and c.max_cost == 373
    assert c.max_at_once is None


def test_campaign_is_a_name_the_command_line_may_carry():
    overrides, _ = run_settings.command_line({"CLI_SETTINGS": "CAMPAIGN DRY_RUN", "CAMPAIGN": "x", "DRY_RUN": "1"},
                                             run_settings.catalogue(), "campaign")
    assert overrides == {"DRY_RUN": "1"}


# --- grouping by server command ----------------------------------------------------------------------


def info(run: str, argv: list[str], nc: int = 3, shards: int = 1, timeout: str = "4h") -> RunInfo:
    return RunInfo(run, argv, "", {"N_CONCURRENT": str(nc), "N_SHARDS": str(shards), "SERVER_TIMEOUT": timeout,
                                   "MODEL": "m"}, "jobs", f"state/{run}", "p")


SERVE = ["hf", "jobs", "run", "--detach", "-q", "--flavor", "h200", "--timeout", "4h", "--label", "run=a",
         "img", "--", "sglang", "serve", "--port", "30000"]


def test_the_server_key_leaves_out_only_the_words_of_one_run():
    assert campaign_runs.server_key(SERVE) == ("hf", "jobs", "run", "--flavor", "h200", "img", "--", "sglang", "serve",
                                                "--port", "30000")
    # After --, the engine's own words are kept whatever they are (a --timeout of the engine's too).
    assert campaign_runs.server_key(["hf", "img", "--", "vllm", "--timeout", "9"])[-2:] == ("--timeout", "9")


def test_runs_whose_server_commands_are_identical_share_one_server():
    other_labels = [w.replace("run=a", "run=b") for w in SERVE]
    longer = [w.replace("4h", "2d") for w in SERVE]
    extra = SERVE + ["--default-chat-template-kwargs", '{"enable_thinking": false}']
    groups = campaign_runs.group([info("a", SERVE), info("b", other_labels), info("c", extra),
                                  info("d", longer, timeout="2d")])
    assert [g.names for g in groups] == [["a", "b", "d"], ["c"]]
    assert [g.owner.run for g in groups] == ["a", "c"] and groups[0].timeout == "2d"


def test_the_shipped_runs_group_by_their_real_server_commands():
    env = {k: v for k, v in os.environ.items() if k not in ("CLI_SETTINGS", "DRY_RUN", "RUN")}
    runs = [campaign_runs.describe(REPO, run, env) for run in ("qwen-t2", "qwen-mswea", "gptoss-t2", "qwen-t2-leaderboard")]
    groups = campaign_runs.group(runs)
    assert [g.names for g in groups] == [["qwen-t2", "qwen-t2-leaderboard"], ["qwen-mswea"], ["gptoss-t2"]]
    assert campaign_runs.separate_notes(groups) == [
        "qwen-mswea is served apart from qwen-t2 (same model, Qwen/Qwen3.8-27B-FP8): SERVER_EXTRA_ARGS (qwen-t2: (empty); "
        "qwen-mswea: --default-chat-template-kwargs '{\"enable_thinking\": false}')"]


def test_a_run_is_described_with_its_own_recorded_instance_and_a_bad_one_is_refused(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("CLI_SETTINGS", "DRY_RUN", "RUN")}
    env.update(STATE_ROOT=str(tmp_path), RUN_INSTANCE="ffffffffffffffff")  # another run's: never this one's
    (tmp_path / "qwen-t2").mkdir()
    (tmp_path / "qwen-t2" / "instance").write_text("0123456789abcdef\n")
    assert campaign_runs.describe(REPO, "qwen-t2", env).instance == "0123456789abcdef"
    (tmp_path / "qwen-t2" / "instance").write_text("0123456789abcdef\x1b[2J" + "f" * 100000)
    with pytest.raises(campaign_runs.DescribeError) as e:
        campaign_runs.describe(REPO, "qwen-t2", env)
    assert str(e.value).endswith("state/qwen-t2/instance is not a run instance id (16 hex digits): it is how HF tells "
                                 "this checkout's jobs of run 'qwen-t2' from another's. Put back the id its jobs carry "
                                 "(make jobs shows their instance= label), or remove the file when the run has no job left")


def test_a_verb_the_campaign_starts_gets_the_run_as_its_command_line_and_no_other_run_s_identity():
    from tools.campaign.campaign_children import child_env

    base = {"PATH": "/bin", "CAMPAIGN": "c", "RUN_LOCK_HELD": "/x/lock", "RUN_INSTANCE": "ffffffffffffffff",
            "CLI_SETTINGS": "CAMPAIGN MAX_COST", "MAX_COST": "9"}
    assert child_env(base, "a", API_BASE="https://e/v1") == {
        "PATH": "/bin", "CLI_SETTINGS": "MAX_COST API_BASE RUN", "MAX_COST": "9", "RUN": "a", "API_BASE": "https://e/v1"}


# --- the budget --------------------------------------------------------------------------------------


def test_runs_sharing_a_server_split_the_budget_evenly_and_groups_wait_their_turn():
    groups = campaign_runs.group([info("a", SERVE, nc=3), info("b", SERVE, nc=3), info("c", SERVE + ["x"], nc=3)])
    alloc = campaign_runs.allocate(groups, 4)
    assert {r: a.n_concurrent for r, a in alloc.items()} == {"a": 2, "b": 2, "c": 3}
    assert alloc["a"].note == "N_CONCURRENT 3 → 2: 2 runs share a's server within 4 trials at once"
    assert campaign_runs.start_order(groups, alloc, 4) == [["a", "b"], ["c"]]
    # Room for all: nothing lowered, everything side by side.
    alloc = campaign_runs.allocate(groups, 9)
    assert {r: a.n_concurrent for r, a in alloc.items()} == {"a": 3, "b": 3, "c": 3}
    assert campaign_runs.start_order(groups, alloc, 9) == [["a", "b", "c"]]


def test_shards_keep_their_count_and_share_per_shard():
    groups = campaign_runs.group([info("a", SERVE, nc=3, shards=2), info("b", SERVE, nc=3), info("c", SERVE, nc=3)])
    alloc = campaign_runs.allocate(groups, 5)
    # Shares 2, 2, 1: a's two shards get 1 each, b 2, c 1.
    assert {r: (a.n_concurrent, a.demand) for r, a in alloc.items()} == {"a": (1, 2), "b": (2, 2), "c": (1, 1)}
    with pytest.raises(campaign_runs.BudgetError, match="run a has N_SHARDS=2, more shards than the campaign's 1"):
        campaign_runs.allocate(groups, 1)


def test_a_group_that_does_not_fit_even_at_one_trial_each_goes_one_run_after_another():
    groups = campaign_runs.group([info(r, SERVE, nc=3) for r in ("a", "b", "c")])
    alloc = campaign_runs.allocate(groups, 2)
    assert {r: a.n_concurrent for r, a in alloc.items()} == {"a": 1, "b": 1, "c": 1}
    assert campaign_runs.start_order(groups, alloc, 2) == [["a", "b"], ["c"]]


# --- the lock ------------------------------------------------------------------------------------------


def test_two_campaign_supervisors_never_run_at_once(tmp_path):
    first = campaign_state.CampaignLock(tmp_path / "c")
    first.take("make campaign")
    second = campaign_state.CampaignLock(tmp_path / "c")
    assert second.held_by_other()
    # Another process (the lock is the kernel's, per open file): refused, naming the holder.
    proc = subprocess.run([str(REPO / ".venv/bin/python"), "-c",
                           "import sys; from pathlib import Path; from tools.campaign import campaign_state as s\n"
                           "try:\n  s.CampaignLock(Path(sys.argv[1])).take('make campaign')\n"
                           "except s.StateError as e:\n  print(e); sys.exit(3)", str(tmp_path / "c")],
                          capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 3
    assert proc.stdout.startswith(f"campaign 'c' is busy: make campaign (pid {os.getpid()}) has held it since ")


@pytest.mark.parametrize("holder, why", [
    ('{"operation": "make campaign", "pid": true, "since": "t"}', "a boolean is no pid"),
    ('{"operation": "make campaign", "pid": -1, "since": "t"}', "os.kill(-1) signals every process"),
    ('{"operation": "make campaign", "pid": 0, "since": "t"}', "os.kill(0) signals the caller's group"),
    ('{"operation": "make campaign", "pid": 99999999999, "since": "t"}', "past PID_MAX"),
    ('{"operation": "make campaign", "pid": "1234", "since": "t"}', "a string is no pid"),
    ("fifo", "a FIFO would block"),
    ("directory", "no file"),
    ("oversized", "over the 4 KiB cap"),
])
def test_a_lock_holder_record_that_names_no_valid_pid_is_signalled_never(tmp_path, monkeypatch, capsys, holder, why):
    from tools.campaign import campaign_verbs
    lock = campaign_state.CampaignLock(tmp_path / "c")
    lock.take("make campaign")
    other = campaign_state.CampaignLock(tmp_path / "c")
    assert other.held_by_other()
    lock.holder.unlink()
    if holder == "fifo":
        os.mkfifo(lock.holder)
    elif holder == "directory":
        lock.holder.mkdir()
    elif holder == "oversized":
        lock.holder.write_text('{"operation": "make campaign", "pid": 1234, "since": "' + "t" * 4096 + '"}')
    else:
        lock.holder.write_text(holder)
    kills = []
    monkeypatch.setattr(campaign_verbs.os, "kill", lambda *a: kills.append(a))
    monkeypatch.delenv("DRY_RUN", raising=False)
    assert other.holder_pid() is None, why
    assert other.who() == "another supervisor holds it"
    campaign_verbs.stop_supervisor(tmp_path / "c")
    assert kills == []
    assert capsys.readouterr().out == (f"campaign: a supervisor holds {other.path} but names no pid in {other.holder}: "
                                       "stopping the runs' servers anyway\n")


def test_the_lock_holder_is_named_printable(tmp_path):
    lock = campaign_state.CampaignLock(tmp_path / "c")
    lock.holder.parent.mkdir()
    lock.holder.write_text('{"operation": "make\\u001b[2J campaign", "pid": 4321, "since": "t"}')
    assert lock.holder_pid() == 4321
    assert lock.who() == "make\\x1b[2J campaign (pid 4321) has held it since t"


# --- a run's instance ------------------------------------------------------------------------------------


@pytest.mark.parametrize("content, problem", [
    ("0123456789abcdef\n", None),
    ("0123456789abcdef\n--namespace evil\n", "is not a run instance id (16 hex digits): it holds "
                                              "'0123456789abcdef\\n--namespace evil'"),
    ("--help\n", "is not a run instance id (16 hex digits): it holds '--help'"),
    ("\x1b[2J0123456789abcdef", "is not a run instance id (16 hex digits): it holds '\\x1b[2J0123456789abcdef'"),
    ("0" * 65, "cannot be read (over the 64 bytes cap for a run instance id (65 bytes); not read)"),
    ("fifo", "cannot be read (not a regular file (a FIFO); not opened)"),
    ("directory", "cannot be read (not a regular file (a directory); not opened)"),
])
def test_a_runs_instance_is_read_bounded_and_only_an_id_is_passed_on(tmp_path, monkeypatch, content, problem):
    from tools.campaign import campaign_spend, campaign_supervisor
    state = tmp_path / "state" / "a"
    state.mkdir(parents=True)
    path = state / "instance"
    if content == "fifo":
        os.mkfifo(path)
    elif content == "directory":
        path.mkdir()
    else:
        path.write_text(content)
    run = RunInfo("a", SERVE, "", {"N_CONCURRENT": "1", "N_SHARDS": "1", "SERVER_TIMEOUT": "4h", "MODEL": "m",
                                   "JOB_NAME": "a", "HF_NAMESPACE": "", "HEARTBEAT_EVERY": "5m", "WATCHDOG": "1"},
                  "jobs", str(state), "p", instance="fedcba9876543210")
    notes: list[str] = []
    scope = campaign_spend.scope_of(run, tmp_path / "state", notes)
    # The spend: a bad file is left out with a note (the instance the run was described with stays).
    if problem is None:
        assert (scope.instance, notes) == ("0123456789abcdef", [])
    else:
        assert scope.instance == "fedcba9876543210"
        assert notes == [f"a: {path} {problem}: left out"]
    # The heartbeat: a bad file is refused with a note, and no beat runs with it in its argv.
    said, argvs = [], []
    monkeypatch.setattr(campaign_supervisor, "run_now", lambda argv, *a, **k: argvs.append(argv) or
                        subprocess.CompletedProcess(argv, 0, "", ""))
    sup = campaign_supervisor.Supervisor.__new__(campaign_supervisor.Supervisor)
    sup.repo, sup.env, sup.next_beat, sup.say = tmp_path, {}, {}, said.append
    sup.beat(campaign_runs.Group(("k",), [run]))
    if problem is None:
        assert said == [] and argvs[0][argvs[0].index("--instance") + 1] == "0123456789abcdef"
    else:
        assert argvs == []
        assert said == [f"note: the heartbeat of a's server was not written: {path} {problem}. Put back the id its "
                        "jobs carry (make jobs shows their instance= label)"]
    assert sorted(p.name for p in state.iterdir()) == ["instance"]


# --- the dry run ----------------------------------------------------------------------------------------


def listing(*roots: Path) -> list[tuple[str, float]]:
    out = []
    for base in roots:
        if not base.exists():
            continue
        for path in sorted(base.rglob("*")):
            parts = path.relative_to(base).parts
            # tests/.engines: the engines' wheels, extracted on first use by whichever test needs them first
            # (in parallel with this one): not the campaign's to write.
            if parts[:1] in ((".git",), (".venv",)) or parts[:2] == ("tests", ".engines") or "__pycache__" in parts:
                continue
            out.append((str(path), path.lstat().st_mtime))
    return out


def test_the_dry_run_prints_every_server_bench_budget_ceiling_and_the_comparison_and_writes_nothing(tmp_path):
    state = tmp_path / "state"
    env = {k: v for k, v in os.environ.items() if k not in ("CLI_SETTINGS", "RUN", "HF_TOKEN", "API_BASE")}
    env.update(DRY_RUN="1", CAMPAIGN="qwen-agents", STATE_ROOT=str(state), PYTHONDONTWRITEBYTECODE="1")
    before = listing(REPO, tmp_path)
    proc = subprocess.run([str(REPO / "scripts/campaign.sh"), "run"], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert listing(REPO, tmp_path) == before and not state.exists()
    lines = proc.stdout.splitlines()
    assert [line.split(",")[0] for line in lines if line.startswith("server ")] == [
        "server 1  qwen3.8-27b-fp8-sglang-h200 (Qwen/Qwen3.8-27B-FP8 on h200)",
        "server 2  qwen3.8-27b-fp8-sglang-h200 (Qwen/Qwen3.8-27B-FP8 on h200)",
        "server 3  gpt-oss-20b-vllm-l40s (openai/gpt-oss-20b on l40sx1)"]
    hf_runs = [line.strip() for line in lines if line.strip().startswith("hf jobs run ")]
    assert [("--timeout 4d" in h, "--timeout 23h" in h, "--timeout 15h" in h) for h in hf_runs] == [
        (True, False, False), (False, True, False), (False, False, True)]
    assert "--default-chat-template-kwargs '{\"enable_thinking\": false}'" in hf_runs[1]
    assert [line.strip().split("   (")[0] for line in lines if line.startswith("  bench ")] == [
        "bench    make reproduce RUN=qwen-t2 'API_BASE=<server 1 endpoint>' N_CONCURRENT=3 MAX_COST=",
        "bench    make reproduce RUN=qwen-mswea 'API_BASE=<server 2 endpoint>' N_CONCURRENT=2 MAX_COST=",
        "bench    make reproduce RUN=qwen-claude-code 'API_BASE=<server 2 endpoint>' N_CONCURRENT=2 MAX_COST=",
        "bench    make reproduce RUN=gptoss-t2 'API_BASE=<server 3 endpoint>' N_CONCURRENT=3 MAX_COST="]
    # qwen-claude-code's server command is qwen-mswea's: one server for both, launched once.
    assert [line.split(": ", 1)[1] for line in lines if line.startswith("server ")] == [
        "qwen-t2", "qwen-mswea qwen-claude-code", "gptoss-t2"]
    # Each bench's own plan: harbor against its server's endpoint, never a serve or a stop of its own.
    assert sum(1 for line in lines if line.startswith("           | bench    ") and "harbor run" in line) == 4
    assert sum(1 for line in lines if "| serve    skipped: API_BASE=https://SERVER-" in line) == 4
    assert [line for line in lines if line.startswith("note ")] == [
        "note     qwen-mswea is served apart from qwen-t2 (same model, Qwen/Qwen3.8-27B-FP8): SERVER_EXTRA_ARGS "
        "(qwen-t2: (empty); qwen-mswea: --default-chat-template-kwargs '{\"enable_thinking\": false}')"]
    budget = lines.index(next(line for line in lines if line.startswith("budget ")))
    assert lines[budget].startswith("budget   4 trial(s) at once over every run (MAX_AT_ONCE not set: the largest trials "
                                    "at once whose predicted sandbox infra rate stays at or under MAX_INFRA_RATE=0.3")
    assert lines[budget + 2:budget + 5] == ["         1. qwen-t2 (3)", "         2. qwen-mswea (2), qwen-claude-code (2)",
                                            "         3. gptoss-t2 (3)"]
    assert [line[:41] for line in lines if line.startswith("ceiling ")] == ["ceiling  MAX_COST=373 ($373.00) over the "]
    assert [line.split("   (")[0] for line in lines if line.startswith(("compare ", "report "))] == [
        "compare  make compare 'RUNS=qwen-t2 qwen-mswea qwen-claude-code gptoss-t2'",
        "report   make report 'RUNS=qwen-t2 qwen-mswea qwen-claude-code gptoss-t2'"]


# --- the schedule (make plan CAMPAIGN=…) ------------------------------------------------------------------


def test_the_schedule_plays_the_supervisors_rule_with_server_reuse_and_the_budget():
    from tools.campaign import campaign_schedule
    from tools.campaign.campaign_file import Campaign
    from tools.campaign.campaign_plan import Resolved
    runs = [info("a", SERVE, nc=2), info("b", SERVE, nc=2), info("c", SERVE + ["x"], nc=2)]
    groups = campaign_runs.group(runs)
    r = Resolved(Campaign("t", Path("t.env"), ("a", "b", "c"), 10.0), runs, groups, 4, "", {})
    alloc = campaign_runs.allocate(groups, 4)
    t = campaign_schedule.simulate(r, 4, alloc, {"a": 100.0, "b": 300.0, "c": 50.0}, loading=10.0)
    # a and b share one server and the budget (2 + 2), benched once it has loaded; c's server is
    # launched when a's end frees its 2 trials; a's server stops when b, its last run, ends.
    assert (t.starts, t.ends) == ({"a": 10.0, "b": 10.0, "c": 120.0}, {"a": 110.0, "b": 310.0, "c": 170.0})
    assert t.servers == {"a": (0.0, 310.0), "c": (110.0, 170.0)} and t.makespan == 310.0
    # With room for all three, c's server loads beside the first.
    t = campaign_schedule.simulate(r, 6, campaign_runs.allocate(groups, 6), {"a": 100.0, "b": 300.0, "c": 50.0}, 10.0)
    assert t.starts == {"a": 10.0, "b": 10.0, "c": 10.0} and t.servers == {"a": (0.0, 310.0), "c": (0.0, 60.0)}


def test_stop_of_a_campaign_stops_every_run_of_it_and_is_safe_to_repeat(tmp_path):
    state = tmp_path / "state"
    env = {k: v for k, v in os.environ.items() if k not in ("CLI_SETTINGS", "RUN", "HF_TOKEN", "API_BASE")}
    env.update(CAMPAIGN="qwen-agents", STATE_ROOT=str(state), PYTHONDONTWRITEBYTECODE="1")
    for _ in range(2):
        proc = subprocess.run([str(REPO / "scripts/campaign.sh"), "stop"], cwd=REPO, env=env, capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        runs = ("qwen-t2", "qwen-mswea", "qwen-claude-code", "gptoss-t2")
        assert proc.stdout.splitlines() == [f"campaign: make stop RUN={run}" for run in runs]
        assert [line.split(" (")[0] for line in proc.stderr.splitlines()] == [
            f"stop: no server recorded for run '{run}'" for run in runs]


def test_a_campaign_refused_by_a_runs_own_checks_writes_nothing(tmp_path):
    """Before anything is paid or written, each run's make reproduce DRY_RUN=1 must pass."""
    state = tmp_path / "state"
    env = {k: v for k, v in os.environ.items() if k not in ("CLI_SETTINGS", "RUN", "API_BASE", "DRY_RUN")}
    env.update(CAMPAIGN="qwen-agents", STATE_ROOT=str(state), HF_TOKEN="hf_fake-token-for-the-campaign-test",
               HF_ENDPOINT="http://127.0.0.1:1",
               # mini-swe-agent's key would sit in docker compose's argv: qwen-mswea's own checks refuse it
               # (qwen-t2's terminus-2 keeps its key in harbor's process, so it passes first).
               ENV_TYPE="docker", CLI_SETTINGS="ENV_TYPE")
    proc = subprocess.run([str(REPO / "scripts/campaign.sh"), "run"], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[-1].startswith("Error: run qwen-mswea is refused by its own checks (make reproduce "
                                                   "RUN=qwen-mswea DRY_RUN=1): reproduce: run 'qwen-mswea': "
                                                   "mini-swe-agent on ENV_TYPE=docker is refused: ")
    assert proc.stderr.splitlines()[-1].endswith(". Nothing was launched")
    assert not state.exists()


# --- a dead server ------------------------------------------------------------------------------------


class StubChild:
    """A run's make reproduce as the supervisor holds it: what it was sent, what it answers."""

    def __init__(self, log: list):
        self.log = log

    def signal(self, signum: int) -> None:
        self.log.append(("signal", signum))

    def stop(self, grace: float) -> int:
        self.log.append(("wait", grace))
        return 130


def dead_server_supervisor(tmp_path, healths, max_relaunches="2", stops=True):
    """A Supervisor over one group (a owns the server, b shares it), both benching; the server's health
    is `healths` in turn, make stop answers `stops`."""
    import signal as _signal
    import types

    from tools.campaign import campaign_supervisor
    from tools.run.reproduce_server import Health

    settings = {"HEALTH_POLL": "0", "MAX_RELAUNCHES": max_relaunches}
    runs = [types.SimpleNamespace(run=name, settings=settings) for name in ("a", "b")]
    group = types.SimpleNamespace(owner=runs[0], names=["a", "b"])
    resolved = types.SimpleNamespace(groups=[group], budget=4, campaign=types.SimpleNamespace(name="camp"),
                                     alloc={r.run: types.SimpleNamespace(n_concurrent=2, demand=2) for r in runs})
    sup = campaign_supervisor.Supervisor(REPO, tmp_path, resolved, {}, {"runs": {}, "servers": {}})
    sup.server_record(group).update(status="up", job="alice/srv1", endpoint="http://srv1/v1")
    events: list = []
    sup.benching = {"a": StubChild(events), "b": StubChild(events)}
    answers = iter(Health(**h) for h in healths)
    sup.probe_server = lambda g: next(answers)
    sup.stop_server = lambda g, why: events.append(("make stop", g.owner.run, why)) or stops
    sup.say = lambda text: events.append(("say", text))
    return sup, group, events, _signal.SIGINT


def test_a_server_dies_when_its_job_ends_or_health_fails_three_times_while_running(tmp_path):
    bad = {"job": "alice/srv1", "stage": "RUNNING", "http": "000", "endpoint": "http://srv1/v1"}
    hf_silent = {"job": "alice/srv1", "stage": None, "http": "-", "endpoint": "http://srv1/v1"}
    good = {"job": "alice/srv1", "stage": "RUNNING", "http": "200", "endpoint": "http://srv1/v1"}
    sup, group, events, _ = dead_server_supervisor(tmp_path, [bad, bad, hf_silent, good, bad, bad, bad])
    for _ in range(6):
        sup.watch(group)
    # Three failures in a row, the third with HF silent (no death without a RUNNING stage), then a
    # healthy answer (the count starts again), then two failures: still up, both runs benching.
    assert sup.server_record(group)["status"] == "up" and sorted(sup.benching) == ["a", "b"]
    sup.watch(group)  # the third failure in a row, RUNNING: it died
    assert sup.server_record(group)["status"] == "lost" and sup.benching == {}
    sup2, group2, _, _ = dead_server_supervisor(tmp_path / "2", [{"job": "alice/srv1", "stage": "ERROR"}])
    sup2.watch(group2)
    assert sup2.server_record(group2)["status"] == "lost"


def test_a_dead_server_stops_its_runs_is_cancelled_and_relaunched_until_max_relaunches(tmp_path):
    error = {"job": "alice/srv1", "stage": "ERROR", "http": "-"}
    sup, group, events, sigint = dead_server_supervisor(tmp_path, [error, error], max_relaunches="1")
    sup.watch(group)
    assert [e for e in events if e[0] != "say"] == [("signal", sigint), ("signal", sigint), ("wait", 240), ("wait", 240),
                                                    ("make stop", "a", "it died")]
    record = sup.server_record(group)
    assert (record["status"], record["relaunches"]) == ("lost", 1)
    assert {run: r["status"] for run, r in sup.state["runs"].items()} == {"a": "interrupted", "b": "interrupted"}
    assert sup.state["runs"]["a"]["why"] == "its server died (job alice/srv1 stage ERROR, /health -)"
    assert ("say", "relaunching the server of a (1 of at most 1); its runs resume on it") in events
    # Its second death in this life, past MAX_RELAUNCHES=1: the runs fail, saying why; nothing relaunches.
    sup.benching = {"a": StubChild(events)}
    sup.watch(group)
    assert (record["status"], record["relaunches"]) == ("failed", 1)
    assert {run: r["status"] for run, r in sup.state["runs"].items()} == {"a": "failed", "b": "failed"}
    assert sup.state["runs"]["b"]["why"].startswith("its server died (job alice/srv1 stage ERROR, /health -), and it was "
                                                   "relaunched 1 time(s) already (MAX_RELAUNCHES=1 of a): see ")
    assert sup.step() is False  # nothing left to do: the supervisor ends (its finish says which runs failed)


def test_a_dead_server_that_cannot_be_stopped_is_never_doubled(tmp_path):
    from tools.campaign import campaign_supervisor

    sup, group, events, _ = dead_server_supervisor(tmp_path, [{"job": "alice/srv1", "stage": "ERROR"}], stops=False)
    with pytest.raises(campaign_supervisor.Stop) as stopped:
        sup.watch(group)
    assert stopped.value.code == 1
    assert str(stopped.value).startswith("the dead server of a could not be stopped (see ")
    assert str(stopped.value).endswith("): not launching a second one beside it")


# --- make report CAMPAIGN=… -------------------------------------------------------------------------

@pytest.mark.full  # make report renders the pages' figures
def test_report_compares_the_runs_benched_so_far_and_names_the_others(tmp_path):
    """A campaign under way: make report CAMPAIGN= compares the runs with a job dir (here two runs on
    the bundled examples' job dirs) and names each run not benched yet; with none benched it says so
    and exits 1."""
    from tests.fixtures import scratch  # noqa: PLC0415
    root = scratch.checkout(tmp_path / "repo", copy_tools=True, dataset=False)
    (root / "examples").symlink_to(REPO / "examples")
    for run, example in (("c-t2", "example-terminus2"), ("c-mswea", "example-mswea")):
        (root / "runs" / f"{run}.env").write_text((REPO / "runs" / f"{example}.env").read_text())
    (root / "runs" / "c-new.env").write_text("SERVER=qwen3.8-27b-fp8-sglang-h200\nJOB_NAME=c-new-job\nAGENT=oracle\n")
    (root / "campaigns").mkdir()
    (root / "campaigns" / "mixed.env").write_text('RUNS="c-t2 c-new c-mswea"\nMAX_COST=5\n')
    (root / "campaigns" / "fresh.env").write_text('RUNS="c-new"\nMAX_COST=5\n')
    drop = ("RUN", "RUNS", "JOB_NAME", "JOBS_DIR", "DRY_RUN", "STATE_ROOT", "CLI_SETTINGS", "CAMPAIGN", "AGENT")
    env = {k: v for k, v in os.environ.items() if k not in drop} | {"STATE_ROOT": str(tmp_path / "state")}

    def report(name: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(root / "scripts" / "campaign.sh"), "report"], cwd=root, env={**env, "CAMPAIGN": name},
                              capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)

    done = report("mixed")
    assert done.returncode == 0, done.stdout + done.stderr
    said = [line for line in done.stdout.splitlines() if line.startswith("campaign: ")]
    assert said == [
        f"campaign: left out of the comparison: c-new: no job dir yet (c-new-job under {root / 'jobs'}): not benched yet",
        "campaign: make compare RUNS='c-t2 c-mswea'",
        "campaign: make report RUNS='c-t2 c-mswea'"]
    assert "## Comparison: example-terminus2-tb21 vs example-mswea-tb21" in done.stdout
    fresh = report("fresh")
    assert fresh.returncode == 1
    assert fresh.stdout.splitlines() == [
        f"campaign: left out of the comparison: c-new: no job dir yet (c-new-job under {root / 'jobs'}): not benched yet",
        "campaign: no run of campaign fresh has a job dir yet: nothing to compare. make campaign CAMPAIGN=fresh benches "
        "them (make watch CAMPAIGN=fresh shows where it stands)"]
