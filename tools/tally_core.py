"""tally_core: the library behind `make tally`, imported by mop-up, the report, cost and the rest.

Job-dir discovery (`run_job_dirs`, `retry_job_name`, `shard_job_name`, `next_retry_job_name`,
`resolve_job_dirs`; `refuse_foreign_job_dirs`: a dir of the run's name that is another run's job),
reading trials (`read_trial`, `scan_job_dir`), the outcome policy (`load_policy`, `classify`),
manual verdicts (`load_verdicts`), slot filling (through tools/slots.py), the whole report
(`tally`: the `--json` document that tools/tally.py's docstring describes field by field), and
what mop-up retries (`retry_targets`). tools/tally.py is the command line over it and renders
the tables. Nothing here prints or exits: bad input raises TallyError with the fix in its message.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable

import yaml

from tools import safe_read as SR
from tools import slots as SL

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_POLICY = REPO_ROOT / "env" / "outcome-policy.yaml"

OUTCOMES = ("passed", "failed", "errored", "unclassified", "unfinished")
ACCOUNTING_SCORED = "timeouts-scored"
ACCOUNTING_UNSCORED = "timeouts-unscored"
EXIT_EMPTY = 3
# MAX_TASK_RETRIES's default (env/defaults.env holds the same, checked by a test): a task whose
# infra error survived 3 attempts in a row (per open slot) is a final error, as the reference
# accepted Run 1's four after three attempts across two serving sessions (docs/reference-runs.md §3).
DEFAULT_MAX_TASK_RETRIES = 3
MAX_TASK_RETRIES_CAP = 999

# harbor's default --jobs-dir is "jobs", so a run started without --jobs-dir (or a resume
# run from the wrong cwd, reference pitfall) lands one level deeper than expected.
NESTED_DIR = "jobs"
RETRY_INFIX = "-retry-"
# A sharded run's first pass is N_SHARDS jobs <job>-shard-<i> instead of <job> (docs/scaling.md).
SHARD_INFIX = "-shard-"
# Where the attempts harbor retries inside a job (--max-retries) are kept, before harbor deletes
# them: <jobs-dir>/.retried/<job-name>/<trial-name>.<its result id>/ (tools/retried.py, the job
# plugin that copies them). No job name starts with a dot (JOB_NAME is checked), so it is no job's.
RETRIED_DIR = ".retried"

# The fields of TrialResult (harbor 0.26) this tool reads; a result.json lacking one is
# reported, because a schema change would otherwise read as "no reward" or "no error".
RESULT_FIELDS = (
    "task_name",
    "finished_at",
    "verifier_result",
    "exception_info",
    "agent_result",
    "agent_execution",
)
_RESULT_FIELD_SET = frozenset(RESULT_FIELDS)
_EPOCH = datetime.min.replace(tzinfo=timezone.utc)


class TallyError(Exception):
    """Bad input that prevents a tally; the message names the problem and the fix."""


# --------------------------------------------------------------------------- discovery


def retry_job_name(job_name: str, n: int) -> str:
    """The name of a run's n-th retry job (mop-up creates them, tally finds them)."""
    if n < 1:
        raise ValueError(f"retry numbers start at 1, got {n}")
    return f"{job_name}{RETRY_INFIX}{n}"


def shard_job_name(job_name: str, i: int) -> str:
    """The name of a sharded run's i-th shard job (make bench with N_SHARDS creates them)."""
    if i < 1:
        raise ValueError(f"shard numbers start at 1, got {i}")
    return f"{job_name}{SHARD_INFIX}{i}"


def _numbered(job_name: str, infix: str, dir_name: str) -> int | None:
    prefix = job_name + infix
    if dir_name.startswith(prefix):
        rest = dir_name[len(prefix):]
        if rest.isdigit() and rest.isascii() and int(rest) >= 1:
            return int(rest)
    return None


def shard_number(job_name: str, dir_name: str) -> int | None:
    """i for `<job_name>-shard-<i>`, None for anything else (the run's own job included)."""
    return _numbered(job_name, SHARD_INFIX, dir_name)


def retry_number(job_name: str, dir_name: str) -> int | None:
    """0 for a first-pass job (the run's own, or one of its shards `<job_name>-shard-<i>`), N for
    `<job_name>-retry-<N>`, None for anything else.

    `<job_name>-smoke` and `<job_name>-retry-x` are other jobs, never part of the run.
    """
    if dir_name == job_name or shard_number(job_name, dir_name) is not None:
        return 0
    return _numbered(job_name, RETRY_INFIX, dir_name)


def run_job_dirs(jobs_dir: str | os.PathLike, job_name: str) -> list[Path]:
    """Every existing job dir of a run, flat layout first, each layout in retry order (the run's
    own job or its shards in shard order, then its retry jobs).

    Raises TallyError when jobs_dir does not exist; returns [] when no job dir matches.
    """
    base = Path(jobs_dir)
    if not base.is_dir():
        raise TallyError(
            f"jobs dir not found: {base} (pass the --jobs-dir that harbor wrote to, "
            f"or set JOBS_DIR in the run file)"
        )
    found: list[Path] = []
    for root in (base, base / NESTED_DIR):
        if not root.is_dir():
            continue
        matches = []
        with os.scandir(root) as entries:
            for entry in entries:
                n = retry_number(job_name, entry.name)
                if n is not None and _dir_or_unresolvable(entry):
                    matches.append((n, shard_number(job_name, entry.name) or 0, Path(entry.path)))
        found.extend(path for _, _, path in sorted(matches))
    return found


def _dir_or_unresolvable(entry: os.DirEntry) -> bool:
    # A job dir name that is a symlink (to a dir, a loop, nothing) is still the run's name: the
    # scan reports it, never following it (scan_job_dir), and mop-up's numbering must not reuse it.
    try:
        return entry.is_symlink() or entry.is_dir()
    except OSError:
        return True


def retried_attempts_dir(job_dir: str | os.PathLike) -> Path:
    """Where tools/retried.py keeps the attempts harbor retried inside this job: beside the job, never
    in it (harbor's resume removes every dir of a job without result.json, and reads the rest as trials)."""
    job_dir = Path(job_dir)
    return job_dir.parent / RETRIED_DIR / job_dir.name


def next_retry_job_name(jobs_dir: str | os.PathLike, job_name: str) -> str:
    """The first unused `<job_name>-retry-<N>` across both layouts (for mop-up)."""
    numbers = [retry_number(job_name, p.name) or 0 for p in run_job_dirs(jobs_dir, job_name)]
    return retry_job_name(job_name, max(numbers, default=0) + 1)


# Whose job a dir is, by its config.json (harbor 0.26's JobConfig, written when the job starts):
# the job it was written as, and the model each agent called (make bench: --model openai/<MODEL>).
CONFIG_JOB_NAME = "job_name"
CONFIG_AGENTS = "agents"
CONFIG_MODEL_NAME = "model_name"  # a field of each AgentConfig in agents


def model_matches(recorded: str, model: str) -> bool:
    """harbor records `<litellm provider>/<model id>` (openai/Qwen/Qwen3.8-27B-FP8, and for MODEL
    openai/gpt-oss-20b, openai/openai/gpt-oss-20b); the model id alone matches too."""
    return recorded == model or recorded.split("/", 1)[-1] == model


def not_the_runs(job_dir: Path, model: str | None) -> str | None:
    """Why a job dir found under the run's job name is another run's job, by its config.json: it
    names another job (harbor wrote it as that one, and it was copied or renamed here), or an agent
    called another model than the run's MODEL. None when it is the run's, or nothing tells: no
    config.json yet, or one that cannot be read (the scan and mop-up report those), or a job dir
    that is a symlink (never followed: the scan reports it)."""
    if job_dir.is_symlink():
        return None
    try:
        config = SR.read_json_object(job_dir / "config.json", what="a config.json")
    except (OSError, SR.Unreadable):
        return None
    recorded = config.get(CONFIG_JOB_NAME)
    if isinstance(recorded, str) and recorded != job_dir.name:
        return (f"{SR.shown(str(job_dir))}/config.json names job {_short_repr(recorded)}: harbor wrote it as that "
                f"job, and it was renamed or copied here since")
    agents = config.get(CONFIG_AGENTS)
    if model and isinstance(agents, list):
        for agent in agents:
            name = agent.get(CONFIG_MODEL_NAME) if isinstance(agent, dict) else None
            if isinstance(name, str) and not model_matches(name, model):
                return (f"{SR.shown(str(job_dir))} ran model {_short_repr(name)} (its config.json), "
                        f"not the run's MODEL {model}")
    return None


def refuse_foreign_job_dirs(dirs: Iterable[str | os.PathLike], model: str | None) -> None:
    """TallyError, naming each one and the fix, when a job dir found under the run's job name is
    another run's job (not_the_runs): its trials are never counted, retried or submitted as the run's.
    A run file copied from another keeps the original's JOB_NAME: the usual way this happens."""
    problems = [p for d in dirs if (p := not_the_runs(Path(d), model))]
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise TallyError(f"{'; '.join(problems[:3])}{more}: another run's job under this run's job name, so its "
                         f"trials are not this run's. Give this run its own JOB_NAME (a run file copied from another "
                         f"keeps the original's), or move that job dir out of the jobs dir (a job of this run renamed "
                         f"on purpose: give it back the name harbor wrote it as)")


# --------------------------------------------------------------------------- policy


@dataclass(frozen=True)
class Pattern:
    regex: re.Pattern
    why: str


@dataclass(frozen=True)
class Policy:
    path: str
    pass_threshold: float
    infra_types: tuple[str, ...]
    infra_patterns: tuple[Pattern, ...]
    timeout_types: frozenset[str]
    limit_types: frozenset[str]
    nonzero_exit_types: frozenset[str]
    nonzero_limit_patterns: tuple[Pattern, ...]
    # The infra types that are the model server's, and the interruptions; every other infra
    # error is the sandbox's (see infra_side).
    server_types: frozenset[str] = frozenset()
    interrupted_types: frozenset[str] = frozenset()

    def infra_match(self, message: str | None) -> Pattern | None:
        return _first_match(self.infra_patterns, message)

    def nonzero_limit_match(self, message: str | None) -> Pattern | None:
        return _first_match(self.nonzero_limit_patterns, message)


def _first_match(patterns: Iterable[Pattern], message: str | None) -> Pattern | None:
    if not message:
        return None
    for p in patterns:
        if p.regex.search(message):
            return p
    return None


def _read_yaml(path: Path, where: str, fix: str) -> Any:
    try:
        return yaml.safe_load(SR.read_regular(path, SR.RESULT_CAP, "a YAML file").decode("utf-8"))
    except FileNotFoundError:
        raise TallyError(f"{where}: file not found ({fix})")
    except SR.Unreadable as e:
        raise TallyError(f"{where}: {e} ({fix})")
    except UnicodeDecodeError as e:
        raise TallyError(f"{where}: not UTF-8 text (byte at offset {e.start}); save it as UTF-8")
    except (OSError, yaml.YAMLError) as e:
        raise TallyError(f"{where}: cannot read it as YAML: {SR.clip(str(e), 300)}")


_POLICY_KEYS = {"pass_threshold", "infra", "timeouts", "limits", "nonzero_exit"}


def load_policy(path: str | os.PathLike = DEFAULT_POLICY) -> Policy:
    """Read and validate the outcome policy; every problem names the file and the key."""
    path = Path(path)
    where = f"policy {path}"
    doc = _read_yaml(path, where, f"pass --policy, default {DEFAULT_POLICY}")
    if not isinstance(doc, dict):
        raise TallyError(f"{where}: expected a mapping with keys {sorted(_POLICY_KEYS)}")
    unknown = set(doc) - _POLICY_KEYS
    if unknown:
        raise TallyError(f"{where}: unknown key(s) {sorted(unknown)} (known: {sorted(_POLICY_KEYS)}); a typo here would silently drop a rule")

    threshold = doc.get("pass_threshold", 1.0)
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 < threshold <= 1:
        raise TallyError(f"{where}: pass_threshold must be a number in (0, 1], got {threshold!r}")

    def section(name: str, keys: set[str]) -> dict:
        value = doc.get(name) or {}
        if not isinstance(value, dict):
            raise TallyError(f"{where}: {name} must be a mapping with keys {sorted(keys)}")
        extra = set(value) - keys
        if extra:
            raise TallyError(f"{where}: {name} has unknown key(s) {sorted(extra)} (known: {sorted(keys)})")
        return value

    def names(sec: dict, sec_name: str) -> tuple[str, ...]:
        value = sec.get("types") or []
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() == v and v for v in value):
            raise TallyError(f"{where}: {sec_name}.types must be a list of exception type names")
        return tuple(value)

    def patterns(sec: dict, sec_name: str, key: str) -> tuple[Pattern, ...]:
        out = []
        for i, item in enumerate(sec.get(key) or []):
            if not isinstance(item, dict) or not isinstance(item.get("pattern"), str) or not item.get("why"):
                raise TallyError(f"{where}: {sec_name}.{key}[{i}] must be a mapping with 'pattern' and 'why'")
            try:
                out.append(Pattern(re.compile(item["pattern"]), str(item["why"]).strip()))
            except re.error as e:
                raise TallyError(f"{where}: {sec_name}.{key}[{i}] is not a valid regex ({e}): {item['pattern']!r}")
        return tuple(out)

    def side_names(sec: dict, key: str) -> tuple[str, ...]:
        value = sec.get(key) or []
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() == v and v for v in value):
            raise TallyError(f"{where}: infra.{key} must be a list of exception type names")
        return tuple(value)

    infra = section("infra", {"types", "message_patterns", "server_types", "interrupted_types"})
    timeouts = section("timeouts", {"types"})
    limits = section("limits", {"types"})
    nonzero = section("nonzero_exit", {"types", "limit_message_patterns"})
    infra_types = names(infra, "infra")
    timeout_types, limit_types, nonzero_types = (
        names(timeouts, "timeouts"), names(limits, "limits"), names(nonzero, "nonzero_exit"))

    # A name in two classes would make the order of the rules, not the file, decide.
    classes = {"infra": set(infra_types), "limits": set(limit_types), "nonzero_exit": set(nonzero_types)}
    seen: dict[str, str] = {}
    for cls, members in classes.items():
        for name in sorted(members):
            if name in seen:
                raise TallyError(f"{where}: {name} is listed in both {seen[name]} and {cls}; keep it in one")
            seen[name] = cls
    stray = set(timeout_types) & set(infra_types)
    if stray:
        raise TallyError(f"{where}: timeouts.types {sorted(stray)} are also infra types; a timeout is the model's result")
    dupes = sorted({n for n in infra_types if infra_types.count(n) > 1})
    if dupes:
        raise TallyError(f"{where}: infra.types lists {dupes} more than once")
    server_types, interrupted_types = side_names(infra, "server_types"), side_names(infra, "interrupted_types")
    for key, members in (("server_types", server_types), ("interrupted_types", interrupted_types)):
        stray = sorted(set(members) - set(infra_types))
        if stray:
            raise TallyError(f"{where}: infra.{key} lists {stray}, which infra.types does not: a side is "
                             f"one of the infra types; add them there or remove them here")
    both = sorted(set(server_types) & set(interrupted_types))
    if both:
        raise TallyError(f"{where}: {both} are in both infra.server_types and infra.interrupted_types; keep each in one")

    return Policy(
        path=str(path),
        pass_threshold=float(threshold),
        infra_types=infra_types,
        infra_patterns=patterns(infra, "infra", "message_patterns"),
        timeout_types=frozenset(timeout_types),
        limit_types=frozenset(limit_types),
        nonzero_exit_types=frozenset(nonzero_types),
        nonzero_limit_patterns=patterns(nonzero, "nonzero_exit", "limit_message_patterns"),
        server_types=frozenset(server_types),
        interrupted_types=frozenset(interrupted_types),
    )


# What harbor's in-run retries (harbor run --max-retries) never include, though the policy counts it
# as infra: a cancelled trial was stopped (Ctrl-C, the governor, MAX_COST), and retrying it in the run
# would undo the stop. harbor 0.26.0 re-raises it past its retry loop (trial/trial.py Trial.run) and
# excludes it by default as well; mop-up retries it.
NEVER_RETRIED_IN_RUN = ("CancelledError",)


def retry_include(policy: Policy) -> tuple[str, ...]:
    """The exception types harbor may retry inside a run (--retry-include, each): the policy's infra
    types, never harbor's "all but excluded", which would re-roll a NonZeroAgentExitCodeError the policy
    counts as the model's own failure (docs/reference-runs.md §7). A type is retried only when it is
    infra by its name: one infra by its message alone (infra.message_patterns) is mop-up's."""
    return tuple(t for t in policy.infra_types if t not in NEVER_RETRIED_IN_RUN)


@dataclass(frozen=True)
class Verdict:
    outcome: str  # passed | failed | errored
    reason: str


def load_verdicts(path: str | os.PathLike | None) -> dict[str, Verdict]:
    """Manual per-task verdicts: `verdicts: {task: {outcome: errored, reason: "..."}}`."""
    if path is None:
        return {}
    path = Path(path)
    where = f"verdicts {path}"
    doc = _read_yaml(path, where, "check the --verdicts path")
    if doc is None:
        return {}
    if not isinstance(doc, dict) or set(doc) != {"verdicts"} or not isinstance(doc["verdicts"], (dict, type(None))):
        raise TallyError(f"{where}: expected one top-level key `verdicts:` mapping task -> {{outcome, reason}}")
    out = {}
    for task, v in (doc["verdicts"] or {}).items():
        if not isinstance(v, dict) or set(v) != {"outcome", "reason"}:
            raise TallyError(f"{where}: {task}: give exactly `outcome:` and `reason:`")
        if v["outcome"] not in ("passed", "failed", "errored"):
            raise TallyError(f"{where}: {task}: outcome must be passed, failed or errored, got {v['outcome']!r}")
        if not isinstance(v["reason"], str) or not v["reason"].strip():
            raise TallyError(f"{where}: {task}: a verdict needs a reason (who decided, and why)")
        out[str(task)] = Verdict(v["outcome"], v["reason"].strip())
    return out


# --------------------------------------------------------------------------- reading


@dataclass
class Trial:
    """One trial dir, as far as its result.json (or its absence) tells."""

    trial_dir: str
    job_dir: str
    task: str
    status: str  # finished | unfinished | unreadable
    finished_at: datetime | None = None
    reward: float | None = None
    exception_type: str | None = None
    exception_message: str | None = None
    tokens: tuple[int | None, int | None, int | None] | None = None
    agent_seconds: float | None = None
    error: str | None = None  # why an unreadable result.json could not be used
    outcome: str | None = None  # set by classify
    rule: str | None = None
    reason: str | None = None
    result_id: str | None = None  # harbor's TrialResult.id: one attempt, wherever its dir is
    trial_seconds: float | None = None  # started_at to finished_at: the whole trial, as the board times it
    retried: bool = False  # an attempt harbor retried inside its job (kept under .retried/): never a slot's

    def sort_key(self) -> tuple[datetime, str]:
        # Latest finished_at wins; a trial without a usable timestamp sorts first; equal
        # timestamps fall back to the path so the choice never depends on scan order.
        return (self.finished_at or _EPOCH, self.trial_dir)


@dataclass
class ScanNotes:
    warnings: list[str] = field(default_factory=list)
    unreadable: list[dict] = field(default_factory=list)
    unreadable_warnings: list[str] = field(default_factory=list)  # one per unreadable, said last
    naive: list[str] = field(default_factory=list)
    missing_fields: dict[tuple[str, ...], list[str]] = field(default_factory=dict)

    def refuse(self, path: str, error: str, consequence: str) -> None:
        """Record a file or dir that could not be used, and what that means for the tally."""
        self.unreadable.append({"path": SR.shown(path), "error": error})
        self.unreadable_warnings.append(f"{SR.shown(path)}: {consequence}")


# What a trial's figures may be, read from files anyone could have edited: outside these they are
# left out with a note, never computed with (9999-12-31T23:59:59-14:00 overflowed, 1e999 tokens
# could not be counted, n_attempts 100000000 grew the tally to 3.4 GB).
YEARS = (2000, 2199)      # a trial's timestamps
TOKENS_CAP = 10 ** 15     # tokens of one trial
MAX_ATTEMPTS = 100        # harbor's -k: the leaderboard asks for 5


def parse_timestamp(value: Any) -> tuple[datetime | None, bool]:
    """(UTC datetime or None, was_naive). Harbor writes trial times as UTC with `Z`; a time
    outside YEARS is no time."""
    if not isinstance(value, str):
        return None, False
    try:
        dt = datetime.fromisoformat(value)
        utc = dt.replace(tzinfo=timezone.utc) if dt.tzinfo is None else dt.astimezone(timezone.utc)
    except (ValueError, OverflowError):
        return None, False
    if not YEARS[0] <= utc.year <= YEARS[1]:
        return None, False
    return utc, dt.tzinfo is None


def count_of(value: Any, cap: int) -> int | None:
    """A whole count in [0, cap] (an int, or a float with no fraction), else None: never a
    bool, a NaN, an infinity or a negative number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        return None
    return int(value) if 0 <= value <= cap else None


def _task_from_config(trial_dir: str) -> str | None:
    """The task name harbor would give, from the trial's config.json (written at start)."""
    try:
        task = SR.read_json_object(os.path.join(trial_dir, "config.json"), what="a config.json").get("task") or {}
    except (OSError, SR.Unreadable):
        return None
    if isinstance(task, dict):
        if isinstance(task.get("name"), str):  # package task: "org/name"
            return SR.clip(task["name"])
        if isinstance(task.get("path"), str) and task["path"].rstrip("/"):
            return SR.clip(os.path.basename(task["path"].rstrip("/")))
    return None


def _task_from_dir_name(name: str) -> str:
    # `<task[:32]>__<7 chars>`: exact for names up to 32 chars; longer ones are matched
    # back to a full name seen in a result.json by `_resolve_truncated`.
    return SR.shown(name.rsplit("__", 1)[0] if "__" in name else name)


def _task_of(trial_dir: str) -> str:
    return _task_from_config(trial_dir) or _task_from_dir_name(os.path.basename(trial_dir))


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _short_repr(value: Any) -> str:
    # A hostile result.json can hold a 60 MB "timestamp": never echo it whole.
    return SR.clip(repr(value), 200)


def read_result_object(path: str) -> dict:
    """A result.json as a JSON object with at least one TrialResult field, or Unreadable.

    FileNotFoundError passes through: no result.json is an unfinished trial, not an error.
    """
    data = SR.read_json_object(path, SR.RESULT_CAP)
    if not data.keys() & _RESULT_FIELD_SET:
        raise SR.Unreadable(f"a JSON object with none of TrialResult's fields ({', '.join(RESULT_FIELDS[:2])}, ...)")
    return data


def read_trial(trial_dir: str, job_dir: str, notes: ScanNotes) -> Trial:
    """Read one trial dir's result.json; never raises on bad content, notes it instead.

    `trial_dir` and `job_dir` are the real paths; the Trial carries them as `shown()`.
    """
    path = os.path.join(trial_dir, "result.json")
    shown_dir, shown_job = SR.shown(trial_dir), SR.shown(job_dir)
    try:
        data = read_result_object(path)
    except FileNotFoundError:
        return Trial(shown_dir, shown_job, _task_of(trial_dir), "unfinished")
    except SR.Unreadable as e:
        return _unreadable(trial_dir, job_dir, path, str(e), notes)
    path = SR.shown(path)

    if not data.keys() >= _RESULT_FIELD_SET:
        missing = tuple(k for k in RESULT_FIELDS if k not in data)
        notes.missing_fields.setdefault(missing, []).append(path)

    task = data.get("task_name")
    task = SR.clip(task) if isinstance(task, str) and task else _task_of(trial_dir)

    finished_at, naive = parse_timestamp(data.get("finished_at"))
    if naive:
        notes.naive.append(path)
    elif finished_at is None and "finished_at" in data:
        notes.warnings.append(
            f"{path}: finished_at {_short_repr(data.get('finished_at'))} is not an ISO-8601 time of the years "
            f"{YEARS[0]}-{YEARS[1]}; this trial ranks below every timestamped attempt of its task")

    reward = None
    verifier = data.get("verifier_result")
    if isinstance(verifier, dict) and isinstance(verifier.get("rewards"), dict):
        rewards = verifier["rewards"]
        if "reward" in rewards:
            reward = _number(rewards["reward"])
            if reward is None or not math.isfinite(reward):
                notes.warnings.append(f"{path}: verifier reward {_short_repr(rewards['reward'])} is not a number; "
                                      f"treated as no reward")
                reward = None
        elif rewards:
            notes.warnings.append(
                f"{path}: verifier rewards {_short_repr(sorted(rewards))} have no 'reward' key; treated as no reward")
    elif verifier is not None:
        notes.warnings.append(f"{path}: verifier_result is not an object; treated as no reward")

    exc_type = exc_msg = None
    exc = data.get("exception_info")
    if isinstance(exc, dict):
        exc_type = exc.get("exception_type") if isinstance(exc.get("exception_type"), str) else None
        exc_msg = exc.get("exception_message") if isinstance(exc.get("exception_message"), str) else None
        if exc_type is None:
            exc_type = "(exception_info without exception_type)"
            notes.warnings.append(f"{path}: exception_info has no exception_type")

    tokens = None
    agent = data.get("agent_result")
    if isinstance(agent, dict):
        fields = ("n_input_tokens", "n_cache_tokens", "n_output_tokens")
        tokens = tuple(count_of(agent.get(name), TOKENS_CAP) for name in fields)
        bad = [f"{name} {_short_repr(agent[name])}" for name, n in zip(fields, tokens)
               if n is None and agent.get(name) is not None]
        if bad:
            notes.warnings.append(f"{path}: {', '.join(bad)} is not a token count (0 to {TOKENS_CAP:.0e}); "
                                  f"left out of the token totals")

    agent_seconds = None
    timing = data.get("agent_execution")
    if isinstance(timing, dict):
        start, _ = parse_timestamp(timing.get("started_at"))
        end, _ = parse_timestamp(timing.get("finished_at"))
        if start and end and end >= start:
            agent_seconds = (end - start).total_seconds()

    result_id = data.get("id") if isinstance(data.get("id"), str) else None
    started_at, _ = parse_timestamp(data.get("started_at"))
    trial_seconds = (finished_at - started_at).total_seconds() if started_at and finished_at and \
        finished_at >= started_at else None
    return Trial(shown_dir, shown_job, task, "finished", finished_at, reward, exc_type, exc_msg, tokens,
                 agent_seconds, result_id=SR.clip(result_id, 100) if result_id else None, trial_seconds=trial_seconds)


def _unreadable(trial_dir: str, job_dir: str, path: str, error: str, notes: ScanNotes) -> Trial:
    notes.refuse(path, error, f"unreadable result.json ({error}); the trial counts as unfinished")
    return Trial(SR.shown(trial_dir), SR.shown(job_dir), _task_of(trial_dir), "unreadable", error=error)


def scan_job_dir(job_dir: str | os.PathLike, notes: ScanNotes,
                 settle: Callable[[Trial], None] | None = None) -> list[Trial]:
    """Every trial dir directly under job_dir (one level: never walks into agent/ etc.).

    `settle` is applied to each trial as soon as it is read (tally classifies it there and
    caps its message, so a run of huge messages never sits in memory whole).
    """
    job_dir = os.path.abspath(job_dir)
    if os.path.islink(job_dir):
        # A run's job dir is read where it is: a link could lead anywhere (~/.cache/huggingface,
        # another run), and what is read here is what submission and publish would copy.
        error = f"symlink to {SR.link_target(job_dir)}, not followed"
        notes.refuse(job_dir, error, f"{error} (a job dir is read only where it is); no trial of it is counted")
        return []
    try:
        dirs, refused, others = SR.trial_dir_entries(job_dir)
    except SR.Unreadable as e:
        notes.refuse(job_dir, str(e), f"{e}; no trial of this job dir is counted")
        return []
    for path, error in refused:
        notes.refuse(path, error, f"{error}; not counted")
    for path in others:
        notes.warnings.append(f"{SR.shown(path)}: not a trial dir (no result.json or config.json); skipped")
    trials = []
    for path in dirs:
        if SR.shown(path) != path:
            notes.warnings.append(f"{SR.shown(path)}: the name is not valid UTF-8, shown with \\x escapes "
                                  f"(rename the dir for mop-up to act on it)")
        trial = read_trial(path, job_dir, notes)
        if settle:
            settle(trial)
        trials.append(trial)
    return trials + retried_attempts(job_dir, {t.result_id for t in trials if t.result_id}, notes, settle)


def retried_attempts(job_dir: str, live_ids: set[str], notes: ScanNotes,
                     settle: Callable[[Trial], None] | None = None) -> list[Trial]:
    """The attempts harbor retried inside job_dir, as tools/retried.py kept them (retried_attempts_dir):
    each a Trial of the job marked `retried`, an infra error that never fills a slot (harbor ran the
    same trial again in its place). A copy whose result id is a trial's still in the job is that
    trial (the last attempt harbor kept), not another attempt: left out. None when nothing is kept."""
    kept = retried_attempts_dir(job_dir)
    if not os.path.lexists(kept):
        return []
    if kept.is_symlink() or not kept.is_dir():
        error = "not a directory of kept attempts (a symlink or a file), not followed"
        notes.refuse(str(kept), error, f"{error}; none of it is counted")
        return []
    try:
        dirs, refused, _ = SR.trial_dir_entries(str(kept))
    except SR.Unreadable as e:
        notes.refuse(str(kept), str(e), f"{e}; no attempt kept there is counted")
        return []
    for path, error in refused:
        notes.refuse(path, error, f"{error}; not counted")
    out = []
    for path in dirs:
        trial = read_trial(path, job_dir, notes)
        if trial.status != "finished":
            notes.warnings.append(f"{trial.trial_dir}: a kept attempt without a readable result.json "
                                  f"(tools/retried.py copies only finished ones); not counted")
            continue
        if trial.result_id in live_ids:
            continue
        trial.retried = True
        if settle:
            settle(trial)
        out.append(trial)
    return out


def _looks_like_trial_dir(path: Path) -> bool:
    return (path / "agent").is_dir() and (path / "config.json").is_file() and "__" in path.name


# --------------------------------------------------------------------------- classification


def classify(trial: Trial, policy: Policy, timeouts_unscored: bool = False) -> tuple[str, str, str]:
    """(outcome, rule, reason) of one finished trial under the policy; see the policy file."""
    etype, msg, reward = trial.exception_type, trial.exception_message, trial.reward
    if etype is not None:
        if etype in policy.infra_types:
            return "errored", "infra-type", f"{etype} is an infra type"
        hit = policy.infra_match(msg)
        if hit:
            return "errored", "infra-message", f"{etype} message matches an infra pattern: {hit.why}"
        if timeouts_unscored and etype in policy.timeout_types:
            return "errored", "timeout-unscored", f"{etype} counted as an unscored error (--timeouts-unscored)"
    if reward is not None:
        verdict = "passed" if reward >= policy.pass_threshold else "failed"
        suffix = f" despite {etype}" if etype else ""
        return verdict, "reward", f"reward {reward:g}{suffix} (pass threshold {policy.pass_threshold:g})"
    if etype is None:
        return "unclassified", "no-reward-no-exception", "finished with neither a verifier reward nor an exception"
    if etype in policy.limit_types:
        return "failed", "limit-type", f"{etype} is a model/agent limit; no reward, counted as a failure"
    if etype in policy.nonzero_exit_types:
        hit = policy.nonzero_limit_match(msg)
        if hit:
            return "failed", "nonzero-exit-limit", f"{etype} without a reward whose message names a limit: {hit.why}"
        return "errored", "nonzero-exit-infra", f"{etype} without a reward and without a limit in its message"
    return "unclassified", "no-rule", f"the policy has no rule for {etype} without a reward"


# The sides an infra error can be on (env/outcome-policy.yaml, infra.server_types and
# infra.interrupted_types): what strains with more trials at once, what the model server did, and
# what a stop left behind.
SIDES = ("sandbox", "server", "interrupted")


def infra_side(trial: Trial, policy: Policy) -> str:
    """The side of an infra-errored trial: "server" for a type of infra.server_types,
    "interrupted" for one of infra.interrupted_types, else "sandbox" (every other infra type, and
    every infra message pattern and non-zero exit without a limit: the sandbox or its image)."""
    if trial.rule == "infra-type":
        if trial.exception_type in policy.server_types:
            return "server"
        if trial.exception_type in policy.interrupted_types:
            return "interrupted"
    return "sandbox"


def count_sides(trials: Iterable[Trial], policy: Policy) -> dict[str, int]:
    """{side: infra-errored trials} over these (classified) trials."""
    out = dict.fromkeys(SIDES, 0)
    for t in trials:
        if t.status == "finished" and not SL.is_settled(t):
            out[infra_side(t, policy)] += 1
    return out


# --------------------------------------------------------------------------- tally


def _iso(dt: datetime | None) -> str | None:
    # UTC with "Z", as harbor writes it (isoformat: several times faster than strftime).
    return dt.replace(tzinfo=None).isoformat() + "Z" if dt else None


def _resolve_truncated(trials: list[Trial]) -> None:
    """Map a result-less dir named `<task[:32]>__id` back to the task's full name."""
    full = {t.task for t in trials if t.status == "finished"}
    by_prefix: dict[str, set[str]] = {}
    for name in full:
        if len(name) > 32:
            by_prefix.setdefault(name[:32].rstrip("_-"), set()).add(name)
    for t in trials:
        if t.status != "finished" and t.task not in full and len(by_prefix.get(t.task, ())) == 1:
            t.task = next(iter(by_prefix[t.task]))


def tally(
    job_dirs: list[str | os.PathLike],
    policy: Policy,
    verdicts: dict[str, Verdict] | None = None,
    timeouts_unscored: bool = False,
    run: str | None = None,
    verdicts_path: str | None = None,
    attempts: int | None = None,
    max_task_retries: int = DEFAULT_MAX_TASK_RETRIES,
) -> dict:
    """The whole report (the `--json` document) for the given job dirs.

    `attempts` is k, the slots per task; None: the first job's n_attempts (1 when unknown).
    `max_task_retries` (MAX_TASK_RETRIES; 0: no limit): a task whose infra error survived that many
    attempts in a row per open slot (slots.is_final_error) is a final error: its open slots stay
    errored, are not open for the headline, and are no retry target.
    """
    verdicts = verdicts or {}
    notes = ScanNotes()
    dirs: list[str] = []
    for d in job_dirs:
        a = os.path.abspath(d)
        if os.path.realpath(a) not in {os.path.realpath(x) for x in dirs}:
            dirs.append(a)

    def settle(t: Trial) -> None:
        if t.status == "finished":
            t.outcome, t.rule, t.reason = classify(t, policy, timeouts_unscored)
        else:
            t.outcome = t.status
            t.rule = t.status
            t.reason = "no result.json: the trial never finished" if t.status == "unfinished" else t.error
        # Classified on the whole message; only a capped one is carried on.
        t.exception_message = SR.clip(t.exception_message)
        t.exception_type = SR.clip(t.exception_type, 200)

    trials: list[Trial] = []
    for d in dirs:
        trials.extend(scan_job_dir(d, notes, settle))
    _resolve_truncated(trials)
    k = attempts or _job_attempts(dirs, notes)

    by_task: dict[str, list[Trial]] = {}
    for t in trials:
        by_task.setdefault(t.task, []).append(t)

    warnings = list(notes.warnings)
    per_task = []
    slot_outcomes: list[list[str]] = []
    open_slots = 0  # slots mop-up would still fill (a verdict or a final error closes its task's)
    latest_trials: list[Trial] = []  # the counted trials of each task, for the totals
    slot_trials: list[Trial] = []  # the trials in a slot (k > 1): what a submission holds
    for task in sorted(by_task):
        group = sorted(by_task[task], key=Trial.sort_key)
        finished = [t for t in group if t.status == "finished"]
        slots = SL.fill(group, k)
        entry: dict[str, Any] = {"task": task}
        if finished:
            # The latest settled trial; with none, the latest finished (an infra error).
            latest = slots.counted[-1] if slots.counted else finished[-1]
            latest_trials.extend(slots.counted or [latest])
            if latest.finished_at is not None and any(
                    t is not latest and t.finished_at == latest.finished_at for t in finished):
                warnings.append(f"{task}: two attempts finished at the same time {_iso(latest.finished_at)}; "
                                f"took {latest.trial_dir} (last by path)")
            outcome, rule, reason = latest.outcome, latest.rule, latest.reason
            entry.update(reward=latest.reward, exception_type=latest.exception_type,
                         exception_message=latest.exception_message, finished_at=_iso(latest.finished_at),
                         trial_dir=latest.trial_dir, job_dir=latest.job_dir)
            scored_trials = [t for t in finished if t.outcome in ("passed", "failed") and SL.is_settled(t)]
            scored = {t.outcome for t in scored_trials}
            if len(scored) > 1 and k == 1:
                history = ", ".join(f"{t.outcome} at {_iso(t.finished_at) or '(no finished_at)'}" for t in scored_trials)
                warnings.append(f"{task}: scored attempts disagree ({history}); the latest counts: {latest.outcome}")
            if outcome not in ("passed", "failed") and scored and k == 1:
                warnings.append(f"{task}: the latest attempt is {outcome} ({latest.exception_type or rule}) "
                                f"but an earlier attempt was scored ({', '.join(sorted(scored))}); the latest counts")
            if slots.shadowed and k == 1:
                after = slots.shadowed[-1]
                warnings.append(f"{task}: an infra error ({after.exception_type or after.rule}) finished after the "
                                f"settled attempt ({outcome}); the settled attempt counts and the task is not retried "
                                f"(an infra error no longer hides a settled attempt: docs/design.md decision 13)")
        else:
            outcome, rule = "unfinished", "no-finished-trial"
            reason = f"{len(group)} trial dir(s), none with a readable result.json"
            entry.update(reward=None, exception_type=None, exception_message=None, finished_at=None,
                         trial_dir=None, job_dir=None)
        entry["computed_outcome"] = outcome
        verdict = verdicts.get(task)
        if verdict:
            outcome, rule, reason = verdict.outcome, "verdict", f"manual verdict: {verdict.reason}"
        streak = SL.infra_streak(group)
        final = not verdict and SL.is_final_error(slots, streak, max_task_retries)
        entry.update(outcome=outcome, rule=rule, reason=reason, attempts=len(finished),
                     verdict=verdict.reason if verdict else None, infra_streak=streak, final_error=final,
                     trials=[{"trial_dir": t.trial_dir, "job_dir": t.job_dir, "finished_at": _iso(t.finished_at),
                              "reward": t.reward, "exception_type": t.exception_type,
                              "outcome": t.outcome, "rule": t.rule, "retried": t.retried} for t in group])
        outcomes = slots.outcomes(verdict.outcome if verdict else None)
        slot_outcomes.append(outcomes)
        slot_trials.extend([] if verdict else slots.counted)
        open_slots += 0 if verdict or final else slots.open
        if k > 1:
            n_scored = sum(1 for o in outcomes if o in ("passed", "failed"))
            entry.update(slots=outcomes, slots_text=SL.glyphs(outcomes),
                         slot_trials=[t.trial_dir for t in slots.counted] + [None] * slots.open,
                         passed_attempts=outcomes.count("passed"), scored_attempts=n_scored,
                         pass_fraction=outcomes.count("passed") / n_scored if n_scored else None,
                         rerolled=[t.trial_dir for t in slots.rerolled])
        per_task.append(entry)

    for task in sorted(set(verdicts) - set(by_task)):
        warnings.append(f"verdict for {task} ignored: no trial of that task in these job dirs")
    if notes.naive:
        warnings.append(f"{len(notes.naive)} result.json file(s) have a finished_at without a time zone; "
                        f"read as UTC: " + ", ".join(notes.naive))
    for missing, paths in sorted(notes.missing_fields.items()):
        warnings.append(f"{len(paths)} result.json file(s) lack field(s) {', '.join(missing)} "
                        f"(not harbor 0.26's TrialResult?): " + ", ".join(paths))
    warnings.extend(notes.unreadable_warnings)
    warnings.extend(_planned_vs_found(dirs, set(by_task)))

    if k == 1:
        counts = {o: sum(1 for e in per_task if e["outcome"] == o) for o in OUTCOMES}
        errored_breakdown = {
            "infra": sum(1 for e in per_task if e["outcome"] == "errored" and e["rule"] in _INFRA_RULES
                         and not e["final_error"]),
            "final": sum(1 for e in per_task if e["outcome"] == "errored" and e["final_error"]),
            "timeout": sum(1 for e in per_task if e["outcome"] == "errored" and e["rule"] == "timeout-unscored"),
            "verdict": sum(1 for e in per_task if e["outcome"] == "errored" and e["rule"] == "verdict"),
        }
    else:  # every count is of attempt slots, tasks × k of them
        counts = {o: sum(outs.count(o) for outs in slot_outcomes) for o in OUTCOMES}
        errored_breakdown = SL.slot_errors(per_task, by_task)
    scored = counts["passed"] + counts["failed"]
    latest = latest_trials
    finished_all = [t for t in trials if t.status == "finished"]
    report = {
        "run": SR.shown(run or os.path.basename(dirs[0])) if (run or dirs) else None,
        "accounting": ACCOUNTING_UNSCORED if timeouts_unscored else ACCOUNTING_SCORED,
        "policy": SR.shown(policy.path),
        "verdicts": verdicts_path and SR.shown(verdicts_path),
        "pass_threshold": policy.pass_threshold,
        "job_dirs": [SR.shown(d) for d in dirs],
        "tasks": len(per_task),
        **counts,
        "scored": scored,
        "pass_rate": counts["passed"] / scored if scored else None,
        "errored_breakdown": errored_breakdown,
        "exceptions": _count_types(latest),
        "exceptions_all_trials": _count_types(finished_all),
        "infra_by_side": count_sides(finished_all, policy),
        "tokens": _sum_tokens(latest),
        "tokens_all_trials": _sum_tokens(finished_all),
        "trials_without_tokens": sum(1 for t in finished_all if not t.tokens or None in t.tokens),
        "agent_seconds": round(sum(t.agent_seconds or 0 for t in latest), 3),
        "agent_seconds_all_trials": round(sum(t.agent_seconds or 0 for t in finished_all), 3),
        "trial_dirs": len(trials),
        "retried_in_run": sum(1 for t in trials if t.retried),
        "max_task_retries": max_task_retries,
        "final_errors": [e["task"] for e in per_task if e["final_error"]],
        "warnings": warnings,
        "unreadable": notes.unreadable,
        "per_task": per_task,
    }
    if k > 1:
        report.update(n_attempts=k, slots=len(per_task) * k,
                      rerolled_trials=sum(len(e["rerolled"]) for e in per_task),
                      **SL.run_stats(slot_outcomes, k),
                      leaderboard={**SL.leaderboard_figure(slot_outcomes, k, open_slots), **board_totals(slot_trials)})
    return report


_INFRA_RULES = SL.INFRA_RULES


def board_totals(trials: list[Trial]) -> dict:
    """The board's per-row figures besides the rate, over the trials in a slot (what a submission holds):
    the mean trial duration (started_at to finished_at, each trial's whole time) and the token totals."""
    timed = [t.trial_seconds for t in trials if t.trial_seconds is not None]
    return {"mean_trial_secs": round(sum(timed) / len(timed), 1) if timed else None, "trials_timed": len(timed),
            "slot_trials": len(trials), "tokens": _sum_tokens(trials),
            "trials_without_tokens": sum(1 for t in trials if not t.tokens or None in t.tokens)}


def _job_attempts(dirs: list[str], notes: ScanNotes) -> int:
    """k: n_attempts of the run's first job (its config.json); 1 when unknown or out of range (noted)."""
    if not dirs:
        return 1
    path = os.path.join(dirs[0], "config.json")
    try:
        value = SR.read_json_object(path, what="a config.json").get("n_attempts", 1)
    except (OSError, SR.Unreadable):
        return 1
    k = count_of(value, MAX_ATTEMPTS)
    if k is None or k < 1:
        notes.warnings.append(f"{SR.shown(path)}: n_attempts {_short_repr(value)} is not a number of attempts "
                              f"(1 to {MAX_ATTEMPTS}); the tally counts 1 per task")
        return 1
    return k


def _count_types(trials: Iterable[Trial]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for t in trials:
        if t.exception_type:
            counts[t.exception_type] = counts.get(t.exception_type, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _sum_tokens(trials: Iterable[Trial]) -> dict[str, int]:
    total = {"input": 0, "cache": 0, "output": 0}
    for t in trials:
        if t.tokens:
            for key, value in zip(total, t.tokens):
                total[key] += value or 0
    return total


def _planned_vs_found(dirs: list[str], tasks: set[str]) -> list[str]:
    """Warn when the first job planned more tasks than have any trial dir (never started)."""
    if not dirs:
        return []
    try:
        planned = SR.read_json_object(os.path.join(dirs[0], "result.json")).get("n_total_trials")
        attempts = SR.read_json_object(os.path.join(dirs[0], "config.json"), what="a config.json").get("n_attempts", 1)
    except (OSError, SR.Unreadable):
        return []  # a job being written, or a hostile one: the planned count is only a hint
    out = []
    job = SR.shown(dirs[0])
    if isinstance(planned, int) and isinstance(attempts, int) and attempts >= 1 and len(tasks) < planned // attempts:
        out.append(f"{job}/result.json plans {planned // attempts} task(s) but only {len(tasks)} have a trial "
                   f"dir: {planned // attempts - len(tasks)} never started (resume the job)")
    return out


def retry_targets(report: dict) -> list[dict]:
    """Tasks mop-up should retry, each its per_task entry plus `missing`, the attempts to run.

    k = 1: the task's counted trial errored by an infra rule, or it is unfinished (missing 1).
    k > 1: the task has open slots, errored or unfinished (missing: how many). Verdicts and final
    errors (past MAX_TASK_RETRIES: the tally's `final_error`) excluded: this is the one place that
    decides what is left, for mop-up, make reproduce and AUTO_STOP alike.
    """
    rows = [e for e in report["per_task"] if not e.get("final_error")]
    if report.get("n_attempts", 1) > 1:
        return [{**e, "missing": e["slot_trials"].count(None)} for e in rows
                if not e["verdict"] and None in e["slot_trials"]]
    return [{**e, "missing": 1} for e in rows
            if e["outcome"] == "unfinished" or (e["outcome"] == "errored" and e["rule"] in _INFRA_RULES)]


def resolve_job_dirs(job_dirs: tuple[str, ...], jobs_dir: str | None, job_name: str | None,
                     model: str | None = None) -> list[Path]:
    """The explicit JOB_DIRs plus every job dir of --jobs-dir/--job-name; errors name the fix.

    A job dir found by the run's name that is another run's (refuse_foreign_job_dirs; `model`, the
    run's MODEL, when given) is refused: explicit JOB_DIRs are the caller's own choice."""
    if bool(jobs_dir) != bool(job_name):
        raise TallyError("--jobs-dir and --job-name go together (the run's job dirs are <jobs-dir>/<job-name>, "
                         "<job-name>-shard-<i> and <job-name>-retry-<N>)")
    if not job_dirs and not jobs_dir:
        raise TallyError("no job dirs given: pass JOB_DIR arguments, or --jobs-dir and --job-name (e.g. RUN=<name> via make tally)")
    found: list[Path] = []
    for d in job_dirs:
        p = Path(d)
        if not p.is_dir():
            raise TallyError(f"job dir not found: {p} (check the path; harbor writes <jobs-dir>/<job-name>)")
        if _looks_like_trial_dir(p):
            raise TallyError(f"{p} is a trial dir, not a job dir: pass its parent {p.parent}")
        found.append(p)
    if jobs_dir:
        run_dirs = run_job_dirs(jobs_dir, job_name)
        if not run_dirs:
            raise TallyError(
                f"no job dir for job name {job_name!r} under {jobs_dir} (looked for {job_name}, "
                f"{job_name}{SHARD_INFIX}<i> and {job_name}{RETRY_INFIX}<N>, flat and under {NESTED_DIR}/): check "
                f"JOB_NAME/JOBS_DIR in the run file")
        refuse_foreign_job_dirs(run_dirs, model)
        found.extend(run_dirs)
    return found
