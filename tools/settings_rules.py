"""The rules across settings, one flat list: each a function of the resolved values that returns
its refusal (one line: the problem and the fix) or None. Every verb runs the same list on the same
values (tools/settings.py check); the rules marked COMMANDS are what a run needs before a server or
a bench command can be built at all (a setting left empty), so only the verbs that build those
commands run them. Standard library only.
"""

from __future__ import annotations

import re

from tools import safe_read  # standard library only, as this file
from tools.settings_types import strict_duration, split_words

# The verbs that build a server's or a bench's command (their argv: scripts/argv.sh).
COMMAND_VERBS = ("print", "serve", "bench", "smoke", "mopup", "reproduce")
# An agent is any harbor ships whose declared protocols this run's server serves and whose key and base
# URL harbor can hand it through the environment: harbor's own classes decide, read by
# tools/run/agents.py once .venv exists (scripts/lib-agent.sh, in every verb that builds a bench
# command). Here, before .venv, only the name's shape: harbor's agent names (harbor agent list).
AGENT_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
# The reasoning efforts the agents take (harbor 0.26.0, checked by tests/settings.bats): terminus-2
# types its option as this Literal (Terminus2Options.reasoning_effort); mini-swe-agent hands it to
# LiteLLM's completion(reasoning_effort=…), whose Literal is the same list; oracle calls no model.
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max", "default")
# The replicas of a data-parallel server listen from PORT + DP_PORT_OFFSET on, on 127.0.0.1 inside
# the job (scripts/lib-dp.sh, the same number).
DP_PORT_OFFSET = 1000
REQUIRED_FOR_COMMANDS = ("MODEL", "SERVER_ENGINE", "SERVER_IMAGE", "SERVER_FLAVOR", "PORT", "SERVER_TIMEOUT",
                         "PROJECT_LABEL", "JOB_NAME", "JOBS_DIR", "AGENT", "ENV_TYPE", "AGENT_TIMEOUT_MULTIPLIER",
                         "N_CONCURRENT")
# hf-sandbox's own idle timeout is 600 s: a sandbox whose agent is silent longer (mini-swe-agent's one
# long exec, a long LLM call, a slow verifier) shuts itself down mid-trial. A run that sets no
# SANDBOX_IDLE_TIMEOUT gets the agent's whole budget (AGENT_TIMEOUT_ESTIMATE × AGENT_TIMEOUT_MULTIPLIER)
# plus IDLE_MARGIN for setup and the verifier, and never less than IDLE_FLOOR, the reference's fix (2h).
IDLE_FLOOR, IDLE_MARGIN = 7200, 3600
# What a server profile declares (docs/server-profiles.md); every other setting is the run's.
PROFILE_SETTINGS = ("MODEL", "MODEL_LABEL", "SERVER_ENGINE", "SERVER_IMAGE", "SERVER_ENGINE_VERSION", "SERVER_FLAVOR",
                    "PORT", "SERVER_ARGS", "SERVER_DP", "SERVER_TP", "SERVER_PROTOCOLS")
# The inference protocols an engine may serve, by harbor's names (harbor.models.model_api_format.
# ModelApiFormat at the pinned harbor; tests/test_agents.py holds them to it): what SERVER_PROTOCOLS lists.
SERVED_PROTOCOLS = ("openai_chat_completions", "anthropic_messages", "openai_responses")
JOB_FIX = "Give run '{run}' a JOB_NAME of its own that does not end in -shard-<N>, -retry-<N> or -smoke"


def flavor_gpus(flavor: str) -> int:
    """The GPUs of an HF Jobs flavor by its name: <family>x<N> has N (h200x4, l40sx1), a cpu-… flavor
    none, any other (h200, a100-large, t4-small) one."""
    if flavor.startswith("cpu-"):
        return 0
    m = re.search(r"x([1-9][0-9]{0,2})$", flavor)
    return int(m.group(1)) if m else 1


def job_of_run(name: str) -> tuple[str, str] | None:
    """(the run's job name X, what NAME is read as) when discovery reads NAME as one of another
    run's jobs: X-shard-<N>, X-retry-<N> with N from 1, X-smoke."""
    m = re.fullmatch(r"(.+)-(shard|retry)-(0*[1-9][0-9]*)", name)
    if m:
        return m.group(1), ("mop-up retry job" if m.group(2) == "retry" else "shard") + f" {m.group(3)}"
    if name.endswith("-smoke") and len(name) > len("-smoke"):
        return name[: -len("-smoke")], "the smoke job"
    return None


def sandbox_idle_default(v: dict) -> str:
    """SANDBOX_IDLE_TIMEOUT as the run resolves it: its own value, else on hf-sandbox the agent's
    budget plus IDLE_MARGIN, at least IDLE_FLOOR, in whole hours or minutes (as harbor's hf-sandbox
    parses job_timeout); else empty. A value that is not a number is left to its type's refusal."""
    if v["SANDBOX_IDLE_TIMEOUT"] or v["ENV_TYPE"] != "hf-sandbox":
        return v["SANDBOX_IDLE_TIMEOUT"]
    try:
        budget = -int(-(int(v["AGENT_TIMEOUT_ESTIMATE"]) * float(v["AGENT_TIMEOUT_MULTIPLIER"])) // 1)
    except (ValueError, OverflowError):
        return ""
    minutes = -(-max(IDLE_FLOOR, budget + IDLE_MARGIN) // 60)
    return f"{minutes // 60}h" if minutes % 60 == 0 else f"{minutes}m"


def profile_model(server: str) -> str:
    """The MODEL env/servers/<server>.env declares (its includes read first), or empty."""
    from tools import settings
    values = {name: "" for name in settings.catalogue()}
    servers = settings.REPO / "env" / "servers"
    settings.apply(servers / f"{server}.env", servers, values, settings.catalogue(), includes=True)
    return values["MODEL"]


def watchdog_grace(v: dict, run: str) -> str | None:
    grace, beat = strict_duration(v["WATCHDOG_GRACE"]), strict_duration(v["HEARTBEAT_EVERY"])
    if grace is not None and beat is not None and grace <= beat:
        return (f"setting WATCHDOG_GRACE={v['WATCHDOG_GRACE']} must be longer than HEARTBEAT_EVERY={v['HEARTBEAT_EVERY']}: "
                "a run that is held would look abandoned between two heartbeats (e.g. WATCHDOG_GRACE=1h "
                f"HEARTBEAT_EVERY=5m) (run '{run}')")
    return None


def reasoning_effort(v: dict, run: str) -> str | None:
    effort = v["REASONING_EFFORT"]
    if not effort:
        return None
    if v["AGENT"] == "oracle":
        return (f"setting REASONING_EFFORT must be empty for AGENT=oracle: it calls no model, and harbor refuses "
                f"the kwarg, got '{effort}' (run '{run}')")
    if effort not in REASONING_EFFORTS:
        return (f"setting REASONING_EFFORT must be one of {' '.join(REASONING_EFFORTS)} (what {v['AGENT']} accepts), "
                f"got '{effort}' (run '{run}')")
    return None


def one_dataset(v: dict, run: str) -> str | None:
    if v["DATASET"] and (v["DATASET_REPO"] or v["DATASET_REF"]):
        return (f"run '{run}' sets DATASET ({v['DATASET']}) and DATASET_REPO or DATASET_REF: name one dataset. "
                "A registry dataset's version goes after its name (DATASET=org/name@version); DATASET_REF pins a git DATASET_REPO")
    return None


def remote_bench(v: dict, run: str) -> str | None:
    if v["WHERE"] == "hf" and not v["BUCKET"]:
        return (f"setting BUCKET is empty for run '{run}', and WHERE=hf keeps the run's job dirs in an HF bucket: "
                f"set BUCKET=NAMESPACE/NAME in runs/{run}.env or on the command line")
    return None


def shards_whole_list(v: dict, run: str) -> str | None:
    if v["N_SHARDS"] != "1" and v["N_TASKS"]:
        return (f"N_SHARDS={v['N_SHARDS']} splits the run's whole task list, and N_TASKS={v['N_TASKS']} would cut every "
                f"shard to its first {v['N_TASKS']}: name the tasks with TASKS=… instead (run '{run}')")
    return None


def parallelism_flags(v: dict, run: str) -> str | None:
    try:
        words = split_words(f"{v['SERVER_ARGS']} {v['SERVER_EXTRA_ARGS']}")
    except ValueError:
        return None  # the words' own type says so
    for word in words:
        given = flag = word.split("=", 1)[0]
        # argparse takes any unambiguous prefix of an option (sglang 0.5.23 reads --tensor-parallel
        # as --tensor-parallel-size): such a prefix is that flag.
        for start, full in (("--data-p", "--data-parallel-size"), ("--tensor-p", "--tensor-parallel-size")):
            if flag.startswith(start) and full.startswith(flag):
                flag = full
        if flag in ("--dp", "--dp-size", "--data-parallel-size", "-dp"):
            return (f"run '{run}' sets data parallelism outside SERVER_DP: {given} in SERVER_ARGS or SERVER_EXTRA_ARGS. "
                    f"Set SERVER_DP only (env/servers/{v['SERVER']}.env): the command, readiness and make status all read it")
        if flag in ("--tp", "--tp-size", "--tensor-parallel-size", "-tp"):
            return (f"run '{run}' sets tensor parallelism outside SERVER_TP: {given} in SERVER_ARGS or SERVER_EXTRA_ARGS. "
                    f"Set SERVER_TP only (env/servers/{v['SERVER']}.env): the command and the GPU count read it")
    return None


def replicas_fill_flavor(v: dict, run: str) -> str | None:
    """SERVER_DP × SERVER_TP = the flavor's GPUs: fewer would leave billed GPUs idle; more cannot run."""
    try:
        dp, tp = int(v["SERVER_DP"]), int(v["SERVER_TP"])
    except ValueError:
        return None
    if dp == 1 and tp == 1:
        return None
    port = int(v["PORT"]) if v["PORT"].isdigit() else 0
    if dp > 1 and port + DP_PORT_OFFSET + dp - 1 > 65535:
        return (f"setting PORT={v['PORT']} leaves no room for SERVER_DP={dp} replicas: they listen from PORT + "
                f"{DP_PORT_OFFSET} on (127.0.0.1 inside the job), past 65535. Pick a PORT below "
                f"{65536 - DP_PORT_OFFSET - dp} (run '{run}')")
    flavor, gpus = v["SERVER_FLAVOR"], flavor_gpus(v["SERVER_FLAVOR"])
    if gpus == 0:
        return (f"setting SERVER_DP={dp} needs GPUs, but SERVER_FLAVOR={flavor} has none: pick a GPU flavor with "
                f"{dp * tp} GPUs (env/flavor-prices.tsv lists them) (run '{run}')")
    if dp * tp == gpus:
        return None
    per = "1 GPU each" if tp == 1 else f"{tp} GPUs each (SERVER_TP={tp})"
    fix = f"Set SERVER_DP={gpus // tp}" if gpus % tp == 0 else f"Give each replica a SERVER_TP that divides {gpus}"
    if dp * tp > gpus:
        return (f"setting SERVER_DP={dp} is too many for SERVER_FLAVOR={flavor}: {dp} replicas of {per} need "
                f"{dp * tp} GPUs, and it has {gpus}. {fix}, or pick a flavor with {dp * tp} GPUs (run '{run}')")
    return (f"setting SERVER_DP={dp} does not fill SERVER_FLAVOR={flavor}: {dp} replicas of {per} use {dp * tp} of "
            f"its {gpus} GPUs, and the other {gpus - dp * tp} would bill idle. {fix} (run '{run}')")


def job_name_ending(v: dict, run: str, owner: str) -> str | None:
    name = v["JOB_NAME"]
    fix = JOB_FIX.format(run=run)
    if name == "jobs":
        return (f"JOB_NAME jobs ({owner}) is where harbor nests job dirs (JOBS_DIR/jobs/), which discovery searches: "
                f"every job there would be read as this run's. {fix}")
    other = job_of_run(name)
    if other:
        return (f"JOB_NAME {name} ({owner}) is the name of {other[1]} of the run whose JOB_NAME is {other[0]}: "
                f"that run would count this one's trials as its own. {fix}")
    return None


def job_name_owned(run: str, name: str, others: dict[str, str]) -> str | None:
    """No other run file resolves to this run's job name, nor to one of its jobs (a copied run file
    keeps the original's JOB_NAME). `others`: each other run and the JOB_NAME its files resolve to."""
    for other, theirs in others.items():
        if theirs == name:
            return (f"runs/{run}.env and runs/{other}.env both resolve to JOB_NAME {name}: the two runs would count, "
                    "retry and submit each other's trials (a copied run file keeps the original's JOB_NAME). "
                    "Give the new one its own JOB_NAME=… in its run file")
        found = job_of_run(theirs)
        if found and found[0] == name:
            return (f"runs/{other}.env's JOB_NAME {theirs} is the name of {found[1]} of run '{run}' (runs/{run}.env, "
                    f"JOB_NAME {name}): run '{run}' would count its trials as its own. Give runs/{other}.env a JOB_NAME "
                    "of its own that does not end in -shard-<N>, -retry-<N> or -smoke")
    return None


# --- what the verbs that build commands need besides ---------------------------------------------------

def required(v: dict, run: str) -> str | None:
    for name in REQUIRED_FOR_COMMANDS:
        if not v[name]:
            where = (f"env/servers/{v['SERVER']}.env (the server profile)" if name in PROFILE_SETTINGS
                     else f"runs/{run}.env")
            return f"setting {name} is empty for run '{run}'. Set it in {where}, or on the command line: {name}=…"
    return None


def dataset_named(v: dict, run: str) -> str | None:
    if not (v["DATASET"] or v["DATASET_REPO"] or v["DATASET_PATH"]):
        return (f"run '{run}' names no dataset. Set DATASET_REPO (a git URL), DATASET_PATH (a local dataset dir) or "
                f"DATASET (a Harbor registry dataset, org/name[@version]) in runs/{run}.env")
    return None


def model_of_profile(v: dict, run: str) -> str | None:
    """A profile's engine flags are its model's: another MODEL on it would be served with them."""
    from tools.settings import shown
    served, model = profile_model(v["SERVER"]), shown(v["MODEL"])
    if served and v["MODEL"] != served:
        return (f"run '{run}' sets MODEL={model}, but server profile {v['SERVER']} serves {served} (its engine "
                f"flags are that model's): pick a profile for {model} (SERVER=… in runs/{run}.env), or write one "
                "(docs/server-profiles.md)")
    return None


def agent_supported(v: dict, run: str) -> str | None:
    if v["AGENT"] and not AGENT_NAME.fullmatch(v["AGENT"]):
        return (f"setting AGENT must be the name of an agent harbor ships (harbor agent list: lowercase letters, "
                f"digits and -), got '{v['AGENT']}' (run '{run}'); docs/agents.md says which reach a served model")
    return None


def protocols_known(v: dict, run: str) -> str | None:
    try:
        words = split_words(v["SERVER_PROTOCOLS"])
    except ValueError:
        return None  # the words' own type says so
    unknown = [w for w in words if w not in SERVED_PROTOCOLS]
    if unknown or not words:
        where = f"the server profile env/servers/{v['SERVER']}.env" if v["SERVER"] else "the command line"
        return (f"setting SERVER_PROTOCOLS must list one or more of: {' '.join(SERVED_PROTOCOLS)} (got "
                f"'{' '.join(unknown)}'): fix it in {where}")
    return None


def calibrate_levels(v: dict, run: str) -> str | None:
    try:
        words = split_words(v["CALIBRATE_LEVELS"])
    except ValueError:
        return None  # the words' own type says so
    for word in words:
        if not re.fullmatch(r"[1-9][0-9]{0,2}|1000", word):
            return (f"setting CALIBRATE_LEVELS must be whole numbers from 1 to 1000 (requests at once), got '{word}' "
                    f"(run '{run}')")
    return None


# The levels a sandbox curve keeps (tools/money/sandbox_curve.py MAX_LEVELS is this number).
SANDBOX_MAX_LEVELS = 32


def sandbox_levels_problem(words: list[str], level_tasks: int, run: str) -> str | None:
    """What is wrong with SANDBOX_LEVELS (its words) beside SANDBOX_LEVEL_TASKS, or None: the one check that
    every verb runs (sandbox_levels) and make calibrate-sandboxes reads its levels with (sandbox_cal.levels_of)."""
    bad = next((w for w in words if not re.fullmatch(r"[1-9][0-9]{0,2}|1000", w)), None)
    if bad is not None:
        return (f"setting SANDBOX_LEVELS must be whole numbers from 1 to 1000 (trials at once), got "
                f"'{safe_read.clip(safe_read.printable(bad), 20)}' (run '{run}')")
    levels = sorted({int(w) for w in words})
    if not levels:
        return (f"setting SANDBOX_LEVELS is empty: give the trials at once to measure, e.g. "
                f"SANDBOX_LEVELS=\"1 3 6 8\" (run '{run}')")
    if len(levels) > SANDBOX_MAX_LEVELS:
        return f"setting SANDBOX_LEVELS holds {len(levels)} levels, more than the {SANDBOX_MAX_LEVELS} a curve keeps (run '{run}')"
    if level_tasks < levels[-1]:
        return (f"setting SANDBOX_LEVEL_TASKS ({level_tasks}) must be at least the largest level of SANDBOX_LEVELS "
                f"({levels[-1]}): a level runs that many trials at once only with as many to run (run '{run}')")
    return None


def sandbox_levels(v: dict, run: str) -> str | None:
    try:
        words = split_words(v["SANDBOX_LEVELS"])
    except ValueError:
        return None  # the words' own type says so
    return sandbox_levels_problem(words, int(v["SANDBOX_LEVEL_TASKS"]), run)


def calibrate_tokens(v: dict, run: str) -> str | None:
    new, prompt = v["CALIBRATE_NEW_TOKENS"], v["CALIBRATE_PROMPT_TOKENS"]
    if int(new) > int(prompt):
        return (f"setting CALIBRATE_NEW_TOKENS ({new}) must be at most CALIBRATE_PROMPT_TOKENS ({prompt}): it is the "
                f"part of the prompt that is new (run '{run}')")
    return None


# Every verb: the rules across settings. The verbs that build commands: COMMANDS as well.
RULES = (watchdog_grace, agent_supported, protocols_known, reasoning_effort, one_dataset, remote_bench, shards_whole_list,
         parallelism_flags, replicas_fill_flavor, calibrate_levels, calibrate_tokens, sandbox_levels)
COMMANDS = (required, model_of_profile, dataset_named)
