"""One settings model (tools/settings.py): every setting declared once with its type, run files and
profiles read as data, every value checked in one place with the same answer for every verb.

The reader is driven on a copy of the repository's runs/ and env/ (tmp_path), so a hostile file
never sits in the tree, and through the same `resolve` command the scripts run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tools import settings, settings_rules, settings_types
from tools.money import sandbox_curve

REPO = Path(__file__).resolve().parent.parent
TOKEN = "hf_" + "pastedAloneByMistake0123456789"
VERBS = ("print", "plan", "serve", "bench", "smoke", "mopup", "reproduce", "status", "cost", "tally", "watch",
         "probe", "logs", "submit", "calibrate", "wait-ready")


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A checkout's settings files, copied: runs/ and env/ (the catalogue and the profiles)."""
    for part in ("runs", "env"):
        shutil.copytree(REPO / part, tmp_path / part)
    monkeypatch.setattr(settings, "REPO", tmp_path)
    return tmp_path


def resolve(verb="print", run="qwen-t2", **given):
    """What `make <verb> RUN=<run> NAME=value…` resolves: the values, or the refusal's text."""
    environ = {"CLI_SETTINGS": " ".join(given), **given}
    try:
        values, _, notes = settings.resolve_for_verb(run, verb, environ)
    except settings.SettingsError as err:
        return str(err)
    return values


# --- the catalogue -----------------------------------------------------------------------------------

def test_every_setting_is_declared_once_with_a_type_that_reads_back():
    catalogue = settings.catalogue()
    assert len(catalogue) == len(re.findall(r"^[A-Z][A-Z0-9_]*=", (REPO / "env/defaults.env").read_text(), re.M))
    for setting in catalogue.values():
        assert settings_types.parse(setting.type.spec) == setting.type, setting.name
        assert setting.type.valid(setting.default) or setting.name in ("SERVER_TIMEOUT",), setting.name
        assert setting.meaning, setting.name


# The bounds make plan (tools/money/plan.py) once checked on its own flags, each with its own default:
# the catalogue's types hold them now, the one check every verb makes before the plan starts.
PLAN_BOUNDS = {
    "N_ATTEMPTS": (("1", "5", "100"), ("0", "101", "1.5")),           # tally_trials.MAX_ATTEMPTS
    "AGENT_TIMEOUT_MULTIPLIER": (("0.01", "1", "2.5", "100"), ("0", "0.009", "100.5", "nan", "inf", "1e3")),
    "AGENT_TIMEOUT_ESTIMATE": (("1", "900", "604800"), ("0", "604801", "900.5")),  # at most 7 days
    "SERVER_DP": (("1", "64"), ("0", "65")),
    "SERVER_TP": (("1", "64"), ("0", "65")),
    "PLAN_REPS": (("1", "10000"), ("0", "10001")),
    "PLAN_SEED": (("0", "999999999"), ("-1", "1000000000")),
    "MOPUP_PASSES": (("0", "1000"), ("-1", "1001")),
    "MAX_INFRA_RATE": (("0", "0.3", "1"), ("1.01", "-0.1", "nan")),
    "READY_TIMEOUT": (("1", "999999999"), ("0", "1000000000")),
    "MAX_RETRIES": (("0", "10"), ("-1", "11")),
}


@pytest.mark.parametrize("name", sorted(PLAN_BOUNDS))
def test_the_bounds_make_plan_needs_are_the_catalogue_s(name):
    kind = settings.catalogue()[name].type
    good, bad = PLAN_BOUNDS[name]
    assert all(kind.valid(v) for v in good), [v for v in good if not kind.valid(v)]
    assert not any(kind.valid(v) for v in bad), [v for v in bad if kind.valid(v)]


def test_a_number_between_two_bounds_reads_and_says_them():
    kind = settings_types.parse("number 0.01..100")
    assert (kind.low, kind.high, kind.spec) == (0.01, 100, "number 0.01..100")
    assert kind.phrase() == "a number from 0.01 to 100"
    assert kind.convert("2.5") == 2.5 and kind.valid("0.01") and not kind.valid("0.0099")
    assert resolve("plan", AGENT_TIMEOUT_MULTIPLIER="0") == (
        "setting AGENT_TIMEOUT_MULTIPLIER must be a number from 0.01 to 100, got '0' (run 'qwen-t2')")


def test_a_setting_without_a_type_or_declared_twice_is_refused(tree):
    defaults = tree / "env/defaults.env"
    text = defaults.read_text()
    defaults.write_text(text + "EXTRA=1   # no type\n")
    with pytest.raises(settings.SettingsError, match=r"env/defaults.env line \d+: EXTRA declares no type"):
        settings.catalogue()
    defaults.write_text(text + "PORT=1   # [port] again\n")
    with pytest.raises(settings.SettingsError, match="PORT is declared twice"):
        settings.catalogue()
    defaults.write_text(text + "EXTRA=1   # [integer] a misspelt type\n")
    with pytest.raises(settings.SettingsError, match="unknown type 'integer'"):
        settings.catalogue()


def test_docs_settings_md_holds_the_catalogue_as_generated():
    page = (REPO / "docs/settings.md").read_text()
    begin, end = "<!-- settings-table: python -m tools.settings doc -->\n", "<!-- end of settings-table -->"
    assert begin in page and end in page
    assert page.split(begin, 1)[1].split(end, 1)[0] == settings.documentation(settings.catalogue())


# Variables the scripts read that the environment or the verbs themselves provide: never settings.
ENVIRONMENT = {"HOME", "PATH", "TMPDIR", "PWD", "HF_TOKEN", "HF_HOME", "HF_ENDPOINT", "HF_TOKEN_PATH", "XDG_CACHE_HOME",
               "BASH_SOURCE", "BASH_REMATCH", "BASHPID", "PIPESTATUS", "RANDOM", "SECONDS", "EPOCHSECONDS", "LINENO",
               "FUNCNAME", "OPTIND", "OPTARG", "IFS", "CLI_SETTINGS", "OPENAI_BASE_URL", "OPENAI_API_KEY", "LC_ALL",
               "DRY_RUN_HOME", "TEST_JOBS", "TERM", "COLUMNS", "USER", "UID", "EUID", "HOSTNAME", "BASHOPTS",
               "HF_HUB_DISABLE_TELEMETRY", "HARBOR_TELEMETRY", "HF_HUB_DISABLE_UPDATE_CHECK", "PYTHONPATH",
               "SHELLOPTS", "BATS_TEST_TMPDIR", "GIT_DIR", "VIRTUAL_ENV", "TB_SETTINGS",
               "ARGS",  # jq's $ARGS.positional, inside a jq program
               "GATEWAY_RECORD",  # the tests' seam: another gateway record than env/gateway-smg.json
               }


def test_every_upper_case_name_the_scripts_read_and_never_set_is_a_setting():
    """A setting read but not declared fails here: a script that reads ${NEW_THING} without
    assigning it gets it from the environment, which only declared settings may fill."""
    text = "\n".join(p.read_text() for p in sorted((REPO / "scripts").glob("*.sh")))
    read = set(re.findall(r"\$\{?!?([A-Z][A-Z0-9_]*)", text))
    assigned = set(re.findall(r"(?:^|[\s;(])(?:local |readonly |export |declare (?:-[a-zA-Z]+ )?)?([A-Z][A-Z0-9_]*)\+?=", text, re.M))
    assigned |= set(re.findall(r"(?:printf -v|read -r[a-z]*|mapfile(?: -[a-z]+(?: ''|(?= -))?)*|local -n|for) \"?([A-Z][A-Z0-9_]*)", text))
    declared = set(settings.catalogue()) | set(settings.NON_SETTINGS) | ENVIRONMENT
    undeclared = sorted(read - assigned - declared)
    assert undeclared == []


# --- read as data ------------------------------------------------------------------------------------

def write_run(tree: Path, *lines: str, name="bad") -> Path:
    path = tree / "runs" / f"{name}.env"
    path.write_text("SERVER=qwen3.8-27b-fp8-sglang-h200\nJOB_NAME=bad-job\nDATASET_REPO=https://x/y\n"
                    + "".join(line + "\n" for line in lines))
    return path


@pytest.mark.parametrize("line, why", [
    ("N_TASKS=$(touch ran)", "holds a command substitution ($(…) or `…`), which would run code"),
    ("N_TASKS=\"`touch ran`\"", "holds a command substitution ($(…) or `…`), which would run code"),
    (TOKEN, "holds what looks like a token (hf_… or sk-…)"),
    ("touch ran", "is not a setting (NAME=value), a comment or a blank line"),
    ("N_TASKS=1 touch ran", "holds more than one NAME=value (a second word would run as a command)"),
    ("N_TASKS=1;touch ran", "holds a shell operator (;) outside quotes"),
    ("N_TASKS=1>ran", "holds a shell operator (>) outside quotes"),
    ('N_TASKS="1', "ends inside a quoted value: close its quote"),
    ("N_TASKS=$HOME", "names $HOME, which is not a setting"),
    ("N_TASKS=${HOME:-1}", "holds a $ that names no setting"),
    ("N_CONCURENT=1", "sets N_CONCURENT, which is not a setting: did you mean N_CONCURRENT?"),
    ("N_TASKS=1\nN_TASKS=2", "sets N_TASKS a second time: one line per setting (NAME+=… appends)"),
    ('source "${BASH_SOURCE[0]%/*}/x.env"', "is not a setting (NAME=value), a comment or a blank line"),
])
def test_a_hostile_run_file_line_is_refused_by_number_and_never_shown(tree, line, why):
    path = write_run(tree, line)
    number = path.read_text().count("\n")
    out = resolve(run="bad")
    assert out.startswith(f"runs/bad.env line {number} {why}"), out
    assert out.endswith("A settings file is read as settings, never run; that line's text is not shown (it may hold a secret)")
    assert "touch" not in out and TOKEN not in out
    assert not (tree / "ran").exists() and not Path("ran").exists()


def test_a_run_file_that_is_a_link_is_never_read(tree, tmp_path):
    secret = tmp_path / "token"
    secret.write_text(TOKEN + "\n")
    (tree / "runs/bad.env").symlink_to(secret)
    out = resolve(run="bad")
    assert out.startswith("runs/bad.env is a link: a settings file is read only as a file of its own inside runs/")
    assert TOKEN not in out


def test_values_read_as_bash_reads_one_word_nothing_run(tree):
    write_run(tree, "SERVER_EXTRA_ARGS=\"--default-chat-template-kwargs '{\\\"enable_thinking\\\": false}'\"",
              "SMOKE_TASK='*/fix-git'   # a comment", "TASKS='a b' ", 'SERVER_LABELS="x=1 \\$HOME"',
              "SERVER_ARGS+=\" --extra\"", 'MODEL_LABEL="m-$SERVER_DP-${SERVER_TP}"',
              'CALIBRATE_LEVELS="1\n  3 6"')
    values = resolve(run="bad")
    assert values["SERVER_EXTRA_ARGS"] == "--default-chat-template-kwargs '{\"enable_thinking\": false}'"
    assert values["SMOKE_TASK"] == "*/fix-git" and values["TASKS"] == "a b"
    assert values["SERVER_LABELS"] == "x=1 $HOME"
    assert values["SERVER_ARGS"].endswith("--enable-metrics --extra")
    assert values["MODEL_LABEL"] == "m-1-1"
    assert values["CALIBRATE_LEVELS"] == "1\n  3 6"


def test_every_shipped_run_resolves_its_profile_and_includes():
    for run in settings.list_runs():
        values = resolve(run=run)
        assert isinstance(values, dict), (run, values)
    values = resolve(run="qwen-t2", SERVER="qwen3.8-27b-fp8-sglang-h200x2-tp2-dflash")
    assert values["SERVER_ARGS"].startswith("--trust-remote-code") and "--speculative-algorithm DFLASH" in values["SERVER_ARGS"]
    assert (values["SERVER_DP"], values["SERVER_TP"], values["SERVER_FLAVOR"]) == ("1", "2", "h200x2")


# --- one check, the same answer from every verb -----------------------------------------------------

BAD = {"int": "x", "number": "-1", "flag": "yes", "duration": "abc", "every": "7m", "port": "70000", "enum": "nope",
       "name": "a b", "flavor": "H200!", "image": "a b", "sha": "abc", "namespace": "123", "bucket": "x",
       "dataset": "x", "url": "http://x", "version": "v!", "envtype": "nope", "leaderboard": "x", "org": "-x",
       "text": "a\x01b", "words": "'unbalanced"}


@pytest.mark.parametrize("name", sorted(settings.catalogue()))
def test_a_bad_value_of_every_setting_gets_one_refusal_from_every_verb(name):
    setting = settings.catalogue()[name]
    bad = BAD[setting.type.kind]
    answers = {(verb, job): resolve(verb, **{name: bad, **({"JOB_NAME": "mine"} if job else {})})
               for verb in VERBS for job in (False, True) if not (name == "JOB_NAME" and job)}
    assert len(set(answers.values())) == 1, answers
    answer = next(iter(answers.values()))
    if name == "SERVER":  # the profile's name: no profile of it to read
        assert answer.startswith("run 'qwen-t2' names server profile 'a b', which is not in env/servers/")
        return
    assert isinstance(answer, str) and answer.startswith(f"setting {name} must be {setting.type.requirement()}, got '")
    # make stop is told, and stops: a setting never keeps a server billing.
    values, _, notes = settings.resolve_for_verb("qwen-t2", "stop", {name: bad})
    assert notes[0] == f"warning: {answer}; going on: a setting never stops make stop"


@pytest.mark.parametrize("given, answer", [
    ({"MOPUP_PASSES": "0"}, None),
    ({"WATCHDOG_EVERY": "7m"}, "setting WATCHDOG_EVERY must be one a cron runs evenly: one of 5m 6m 10m 12m 15m 20m 30m "
                               "1h 2h 3h 4h 6h 8h 12h, got '7m' (run 'qwen-t2')"),
    ({"WATCHDOG_GRACE": "1m", "HEARTBEAT_EVERY": "5m"},
     "setting WATCHDOG_GRACE=1m must be longer than HEARTBEAT_EVERY=5m: a run that is held would look abandoned between "
     "two heartbeats (e.g. WATCHDOG_GRACE=1h HEARTBEAT_EVERY=5m) (run 'qwen-t2')"),
    ({"HF_CALL_TIMEOUT": "90"}, None),
    ({"HF_CALL_TIMEOUT": "0"}, "setting HF_CALL_TIMEOUT must be a whole number from 1 to 86400, got '0' (run 'qwen-t2')"),
])
def test_the_issue_s_four_values_get_one_answer(given, answer):
    for verb in ("print", "plan", "serve", "reproduce"):
        for job in ({}, {"JOB_NAME": "mine"}):
            out = resolve(verb, **given, **job)
            if answer is None:
                assert isinstance(out, dict) and all(out[k] == v for k, v in given.items())
            else:
                assert out == answer


@pytest.mark.parametrize("given, start", [
    ({"REASONING_EFFORT": "huge"}, "setting REASONING_EFFORT must be one of none minimal"),
    ({"AGENT": "oracle", "REASONING_EFFORT": "low"}, "setting REASONING_EFFORT must be empty for AGENT=oracle"),
    ({"AGENT": "Claude Code"}, "setting AGENT must be the name of an agent harbor ships (harbor agent list: lowercase letters, digits and -), got 'Claude Code'"),
    ({"DATASET": "a/b"}, "run 'qwen-t2' sets DATASET (a/b) and DATASET_REPO or DATASET_REF: name one dataset"),
    ({"WHERE": "hf"}, "setting BUCKET is empty for run 'qwen-t2', and WHERE=hf keeps the run's job dirs in an HF bucket"),
    ({"N_SHARDS": "2", "N_TASKS": "3"}, "N_SHARDS=2 splits the run's whole task list, and N_TASKS=3"),
    ({"SERVER_EXTRA_ARGS": "--tensor-parallel 2"}, "run 'qwen-t2' sets tensor parallelism outside SERVER_TP: --tensor-parallel"),
    ({"SERVER_EXTRA_ARGS": "--dp=2"}, "run 'qwen-t2' sets data parallelism outside SERVER_DP: --dp"),
    ({"SERVER_DP": "2"}, "setting SERVER_DP=2 is too many for SERVER_FLAVOR=h200: 2 replicas of 1 GPU each need 2 GPUs, and it has 1"),
    ({"SERVER_DP": "2", "SERVER_FLAVOR": "h200x4"}, "setting SERVER_DP=2 does not fill SERVER_FLAVOR=h200x4"),
    ({"SERVER_DP": "2", "SERVER_FLAVOR": "cpu-basic"}, "setting SERVER_DP=2 needs GPUs, but SERVER_FLAVOR=cpu-basic has none"),
    ({"SERVER_DP": "4", "SERVER_FLAVOR": "h200x4", "PORT": "64600"}, "setting PORT=64600 leaves no room for SERVER_DP=4 replicas"),
    ({"JOB_NAME": "x-shard-2"}, "JOB_NAME x-shard-2 (on the command line) is the name of shard 2 of the run whose JOB_NAME is x"),
    ({"JOB_NAME": "jobs"}, "JOB_NAME jobs (on the command line) is where harbor nests job dirs"),
    # SANDBOX_LEVELS: checked by every verb, not only by make calibrate-sandboxes when it reads its levels.
    ({"SANDBOX_LEVELS": "1 x"}, "setting SANDBOX_LEVELS must be whole numbers from 1 to 1000 (trials at once), got 'x' "
                                "(run 'qwen-t2')"),
    ({"SANDBOX_LEVELS": "1 " + "9" * 30}, "setting SANDBOX_LEVELS must be whole numbers from 1 to 1000 (trials at once), "
                                         "got '99999999999999999999… (truncated, 30 chars)' (run 'qwen-t2')"),
    ({"SANDBOX_LEVELS": ""}, "setting SANDBOX_LEVELS is empty: give the trials at once to measure, e.g. "
                             "SANDBOX_LEVELS=\"1 3 6 8\" (run 'qwen-t2')"),
    ({"SANDBOX_LEVELS": " ".join(map(str, range(1, 34))), "SANDBOX_LEVEL_TASKS": "40"},
     "setting SANDBOX_LEVELS holds 33 levels, more than the 32 a curve keeps (run 'qwen-t2')"),
    ({"SANDBOX_LEVELS": "1 3 9"}, "setting SANDBOX_LEVEL_TASKS (8) must be at least the largest level of SANDBOX_LEVELS "
                                  "(9): a level runs that many trials at once only with as many to run (run 'qwen-t2')"),
])
def test_each_rule_across_settings_refuses_with_its_fix_for_every_verb(given, start):
    answers = {resolve(verb, **given) for verb in VERBS}
    assert len(answers) == 1 and next(iter(answers)).startswith(start), answers


def test_sandbox_levels_are_checked_once_for_every_verb_and_the_default_passes():
    assert resolve("print")["SANDBOX_LEVELS"] == "1 3 6 8"  # the default, with SANDBOX_LEVEL_TASKS=8
    assert resolve("print", SANDBOX_LEVELS="1 3 6 9 9", SANDBOX_LEVEL_TASKS="9")["SANDBOX_LEVELS"] == "1 3 6 9 9"
    assert sandbox_curve.MAX_LEVELS == settings_rules.SANDBOX_MAX_LEVELS
    # make print refuses it as make calibrate-sandboxes does, in its own voice, before anything runs.
    env = {k: v for k, v in os.environ.items() if k not in ("CLI_SETTINGS", "RUN", "MAKEFLAGS", "MFLAGS")}
    proc = subprocess.run(["make", "-s", "print", "RUN=qwen-t2", "SANDBOX_LEVELS=x"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and proc.stdout == ""
    assert proc.stderr.splitlines()[0] == ("print: setting SANDBOX_LEVELS must be whole numbers from 1 to 1000 (trials at "
                                           "once), got 'x' (run 'qwen-t2')")


def test_what_a_command_needs_is_asked_only_by_the_verbs_that_build_one():
    assert resolve("print", PORT="") == ("setting PORT is empty for run 'qwen-t2'. Set it in "
                                         "env/servers/qwen3.8-27b-fp8-sglang-h200.env (the server profile), or on the "
                                         "command line: PORT=…")
    assert isinstance(resolve("tally", PORT=""), dict)
    assert resolve("print", JOBS_DIR="") == ("setting JOBS_DIR is empty for run 'qwen-t2'. Set it in runs/qwen-t2.env, "
                                             "or on the command line: JOBS_DIR=…")


def test_a_copied_run_file_keeps_the_original_s_job_name_and_both_are_refused(tree):
    shutil.copy(tree / "runs/qwen-t2.env", tree / "runs/mine.env")
    for run, other in (("mine", "qwen-t2"), ("qwen-t2", "mine")):
        out = resolve(run=run)
        assert out.startswith(f"runs/{run}.env and runs/{other}.env both resolve to JOB_NAME "), out
    # The command line's JOB_NAME is that command's own choice: only its ending is checked.
    assert isinstance(resolve(run="mine", JOB_NAME="elsewhere"), dict)


# --- a run file written from scratch: the reference's fixes without writing them ---------------------

SCRATCH_RUN = ("SERVER=gpt-oss-20b-vllm-l40s\nAGENT={agent}\n"
               "DATASET_REPO=https://huggingface.co/datasets/harborframework/terminal-bench-2.1\n")
MISMATCH = ("run 'mine' sets MODEL=Qwen/Qwen3-8B, but server profile gpt-oss-20b-vllm-l40s serves openai/gpt-oss-20b "
            "(its engine flags are that model's): pick a profile for Qwen/Qwen3-8B (SERVER=… in runs/mine.env), or "
            "write one (docs/server-profiles.md)")


def test_a_model_its_profile_does_not_serve_gets_one_refusal_from_every_verb_that_builds_a_command(tree):
    (tree / "runs/mine.env").write_text(SCRATCH_RUN.format(agent="terminus-2") + "MODEL=Qwen/Qwen3-8B\n")
    for verb in settings_rules.COMMAND_VERBS:
        assert resolve(verb, run="mine") == MISMATCH, verb
        assert resolve(verb, run="mine", DRY_RUN="1") == MISMATCH, verb
    # On the command line, the same answer; the verbs that read job dirs check their recorded model.
    (tree / "runs/mine.env").write_text(SCRATCH_RUN.format(agent="terminus-2"))
    assert resolve("serve", run="mine", MODEL="Qwen/Qwen3-8B") == MISMATCH
    assert resolve("print", run="mine")["MODEL"] == "openai/gpt-oss-20b"
    assert isinstance(resolve("tally", run="mine", MODEL="Qwen/Qwen3-8B"), dict)
    # A data-parallel profile's model is the one it includes and states.
    assert settings_rules.profile_model("qwen3.8-27b-fp8-sglang-h200x4-tp2-dp2") == "Qwen/Qwen3.8-27B-FP8"


@pytest.mark.parametrize("given, want", [
    ({}, "2h"),                                                         # 900 s + 1 h: under the 2 h floor
    ({"AGENT_TIMEOUT_MULTIPLIER": "4"}, "2h"),                          # 3600 s + 1 h
    ({"AGENT_TIMEOUT_MULTIPLIER": "8"}, "3h"),                          # 7200 s + 1 h
    ({"AGENT_TIMEOUT_ESTIMATE": "3000", "AGENT_TIMEOUT_MULTIPLIER": "1.5"}, "135m"),  # 4500 s + 1 h
    ({"SANDBOX_IDLE_TIMEOUT": "30m"}, "30m"),                           # the run's own value
    ({"ENV_TYPE": "docker"}, ""),                                       # hf-sandbox only
])
@pytest.mark.parametrize("agent", ["terminus-2", "mini-swe-agent"])
def test_an_hf_sandbox_run_that_sets_no_idle_timeout_gets_the_agent_s_budget_and_an_hour(tree, agent, given, want):
    (tree / "runs/mine.env").write_text(SCRATCH_RUN.format(agent=agent))
    assert resolve("print", run="mine", **given)["SANDBOX_IDLE_TIMEOUT"] == want


def test_a_run_that_names_no_smoke_task_smokes_the_one_a_run_file_of_its_dataset_chose(tree):
    from tools.run import smoke_task
    repo = "https://huggingface.co/datasets/harborframework/terminal-bench-2.1"
    mine = {"DATASET_REPO": repo, "DATASET": "", "DATASET_PATH": ""}
    assert smoke_task.choose("mine", mine) == ("fix-git", "runs/gptoss-t2.env")
    registry = dict(mine, DATASET_REPO="", DATASET="terminal-bench/terminal-bench-2-1")
    assert smoke_task.choose("mine", registry) == ("*/fix-git", "runs/qwen-t2-leaderboard-h200x4.env")
    assert smoke_task.choose("mine", dict(mine, DATASET_REPO=repo.replace("2.1", "3.0"))) is None
    assert smoke_task.choose("mine", dict(mine, DATASET_REPO="", DATASET_PATH="dataset")) is None


def test_the_supported_agents_doc_points_at_harbor_s_own_classes_and_the_name_s_shape():
    doc = (REPO / "docs/server-profiles.md").read_text()
    section = doc[doc.index("## Supported agents"):]
    assert "tools/run/agents.py" in section and "AGENT_NAME" in section and "(agents.md)" in section
    assert not re.findall(r"^- `([a-z0-9-]+)`", section, re.M)  # no hand-kept list
    assert [settings_rules.agent_supported({"AGENT": a}, "r") is None
            for a in ("terminus-2", "claude-code", "qwen-coder", "Claude Code", "x;rm", "-a")] == [
        True, True, True, False, False, False]
    assert settings_rules.agent_supported({"AGENT": "Claude Code"}, "r") == (
        "setting AGENT must be the name of an agent harbor ships (harbor agent list: lowercase letters, digits and -), "
        "got 'Claude Code' (run 'r'); docs/agents.md says which reach a served model")


# --- the command line and the shell ------------------------------------------------------------------

def test_under_make_only_the_command_line_counts_and_the_shell_s_value_is_noted():
    environ = {"CLI_SETTINGS": "N_CONCURRENT", "N_CONCURRENT": "1", "PORT": "1234", "DRY_RUN": "1"}
    values, pairs, notes = settings.resolve_for_verb("qwen-t2", "bench", environ)
    assert (values["N_CONCURRENT"], values["PORT"], values["DRY_RUN"]) == ("1", "30000", "1")
    assert pairs == [("N_CONCURRENT", "1"), ("DRY_RUN", "1")]
    assert notes == ["ignoring PORT=1234 from your shell's environment: only settings on make's command line count "
                     "(make bench PORT=…)"]
    values, pairs, _ = settings.resolve_for_verb("qwen-t2", "bench", {"PORT": "1234"})
    assert values["PORT"] == "1234" and pairs == [("PORT", "1234")]


@pytest.mark.parametrize("name, start", [
    ("N_CONCURENT", "unknown setting N_CONCURENT: did you mean N_CONCURRENT? (settings: env/defaults.env)"),
    ("HF_TOKEN", "HF_TOKEN on make's command line sits in make's argv, which every local user can read (ps)"),
    ("ZZZZZZZZZZZZ", "unknown setting ZZZZZZZZZZZZ: neither a setting nor one of RUN RUNS JSON"),
])
def test_the_command_line_holds_settings_only_and_no_secret(name, start):
    assert resolve(**{name: "1"}).startswith(start)


# --- what the scripts and the tools get --------------------------------------------------------------

def test_the_scripts_get_nul_separated_records_and_the_tools_one_typed_object(tmp_path):
    env = {**os.environ, "SCRIPT_NAME": "print", "CLI_SETTINGS": "N_CONCURRENT SERVER_ARGS",
           "N_CONCURRENT": "2", "SERVER_ARGS": "--a 'b c'\n--d", "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-m", "tools.settings", "--root", str(REPO), "resolve", "qwen-t2", "print"],
                         env=env, capture_output=True, check=True).stdout
    fields = out.split(b"\0")
    assert fields[-1] == b""
    values, pairs, i = {}, [], 0
    while i < len(fields) - 1:
        if fields[i] == b"S":
            values[fields[i + 1].decode()] = fields[i + 2].decode()
            i += 3
        else:
            assert fields[i] == b"C"
            pairs.append(fields[i + 1].decode())
            i += 2
    assert list(values) == list(settings.catalogue())
    assert values["SERVER_ARGS"] == "--a 'b c'\n--d" and pairs == ["SERVER_ARGS=--a 'b c'\n--d", "N_CONCURRENT=2"]
    typed = settings.current({"TB_SETTINGS": json.dumps({"run": "qwen-t2", "settings": values})})
    assert typed["N_CONCURRENT"] == 2 and typed["SERVER_ARGS"] == ["--a", "b c", "--d"]
    assert typed["WATCHDOG_GRACE"] == 3600 and typed["AUTO_STOP"] is True and typed["MAX_COST"] == 115.0
    assert typed.raw("SERVER_TIMEOUT") == "4d" and typed["SERVER_TIMEOUT"] == 4 * 86400


def test_a_refusal_exits_1_with_one_line_and_no_records():
    env = {**os.environ, "SCRIPT_NAME": "serve", "WATCHDOG_EVERY": "7m", "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "tools.settings", "--root", str(REPO), "resolve", "qwen-t2", "serve"],
                          env=env, capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.splitlines() == ["serve: setting WATCHDOG_EVERY must be one a cron runs evenly: one of 5m 6m 10m "
                                        "12m 15m 20m 30m 1h 2h 3h 4h 6h 8h 12h, got '7m' (run 'qwen-t2')"]


def runless(verb: str, *names: str, **environ: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in settings.catalogue() and k != "CLI_SETTINGS"}
    env.update(SCRIPT_NAME=verb, PYTHONPATH=str(REPO), **environ)
    return subprocess.run([sys.executable, "-m", "tools.settings", "--root", str(REPO), "runless", verb, *names],
                          env=env, capture_output=True)


def test_a_verb_without_a_run_gets_the_catalogue_s_values_checked_as_every_verb_s():
    """make jobs and make report act on no run: their settings are the catalogue's defaults or make's
    command line, typed by the same check; a shell's export is noted and ignored; make jobs goes on."""
    done = runless("jobs", "ALL", "PROJECT_LABEL", CLI_SETTINGS="PROJECT_LABEL", PROJECT_LABEL="mine", ALL="1")
    assert done.returncode == 0
    assert done.stdout == b"S\0ALL\x000\0S\0PROJECT_LABEL\0mine\0"
    assert done.stderr.decode().splitlines() == [
        "jobs: ignoring ALL=1 from your shell's environment: only settings on make's command line count (make jobs ALL=…)"]
    done = runless("jobs", "ALL", CLI_SETTINGS="ALL", ALL="yes")
    assert (done.returncode, done.stdout) == (0, b"S\0ALL\x000\0")
    assert done.stderr.decode().splitlines() == [
        "jobs: warning: setting ALL must be 0 or 1, got 'yes'; going on with ALL=0: a setting never stops make jobs"]
    done = runless("report", "DRY_RUN", DRY_RUN="7")
    assert (done.returncode, done.stdout) == (1, b"")
    assert done.stderr.decode().splitlines() == ["report: setting DRY_RUN must be 0 or 1, got '7'"]
    done = runless("report", "DRY_RUN", CLI_SETTINGS="N_CONCURENT", N_CONCURENT="1")
    assert done.returncode == 1
    assert done.stderr.decode().splitlines() == [
        "report: unknown setting N_CONCURENT: did you mean N_CONCURRENT? (settings: env/defaults.env)"]


def test_the_reader_needs_nothing_but_the_standard_library():
    """make stop runs before .venv exists (an hf of the user's own): the reader must import nothing else."""
    for module in ("settings", "settings_types", "settings_rules"):
        tree = (REPO / "tools" / f"{module}.py").read_text()
        imports = set(re.findall(r"^(?:from|import) ([a-z_.]+)", tree, re.M))
        assert {i.split(".")[0] for i in imports} <= {"__future__", "json", "os", "re", "sys", "shlex", "dataclasses",
                                                      "pathlib", "tools"}, imports
