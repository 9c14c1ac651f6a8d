"""tally_jobs: a run's job dirs, by name: which dirs are the run's, and which are another run's.

A run's job dirs (`run_job_dirs`): `<jobs-dir>/<job-name>`, a sharded run's `<job-name>-shard-<i>`
(`shard_job_name`), its retry jobs `<job-name>-retry-<N>` (`retry_job_name`, `next_retry_job_name`),
and the same under `<jobs-dir>/jobs/` (harbor's default --jobs-dir nests). A dir of the run's name
whose config.json names another job or records another model is another run's
(`refuse_foreign_job_dirs`). `resolve_job_dirs` is what every verb that takes JOB_DIRs or
--jobs-dir/--job-name finds. What a task's name may be for harbor's --include-task-name
(`GLOB_CHARS`, `NOT_A_NAME`) lives here too. Nothing here prints or exits: bad input raises
TallyError with the fix in its message.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Iterable

from tools import safe_read

# harbor's default --jobs-dir is "jobs", so a run started without --jobs-dir (or a resume
# run from the wrong cwd, reference pitfall) lands one level deeper than expected.
NESTED_DIR = "jobs"
RETRY_INFIX = "-retry-"
# A sharded run's first pass is N_SHARDS jobs <job>-shard-<i> instead of <job> (docs/scaling.md).
SHARD_INFIX = "-shard-"
# Where the attempts harbor retries inside a job (--max-retries) are kept, before harbor deletes
# them: <jobs-dir>/.retried/<job-name>/<trial-name>.<its result id>/ (tools/results/retried.py, the job
# plugin that copies them). No job name starts with a dot (JOB_NAME is checked), so it is no job's.
RETRIED_DIR = ".retried"

# harbor's --include-task-name takes a glob (fnmatch), so a task name holding one of these would
# match more than itself.
GLOB_CHARS = re.compile(r"[*?\[\]]")
# Nor can it take a name holding a control character (a newline splits it in two in mop-up's own
# lists: "t-sandbox\nt-pass" re-ran a passed task) or starting with '-' (read as an option).
NOT_A_NAME = re.compile(r"[\x00-\x1f\x7f]|^-")


class TallyError(Exception):
    """Bad input that prevents a tally; the message names the problem and the fix."""



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
    """Where tools/results/retried.py keeps the attempts harbor retried inside this job: beside the job, never
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
        config = safe_read.read_json_object(job_dir / "config.json", what="a config.json")
    except (OSError, safe_read.Unreadable):
        return None
    recorded = config.get(CONFIG_JOB_NAME)
    if isinstance(recorded, str) and recorded != job_dir.name:
        return (f"{safe_read.shown(str(job_dir))}/config.json names job {short_repr(recorded)}: harbor wrote it as that "
                f"job, and it was renamed or copied here since")
    agents = config.get(CONFIG_AGENTS)
    if model and isinstance(agents, list):
        for agent in agents:
            name = agent.get(CONFIG_MODEL_NAME) if isinstance(agent, dict) else None
            if isinstance(name, str) and not model_matches(name, model):
                return (f"{safe_read.shown(str(job_dir))} ran model {short_repr(name)} (its config.json), "
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


def _looks_like_trial_dir(path: Path) -> bool:
    return (path / "agent").is_dir() and (path / "config.json").is_file() and "__" in path.name



def short_repr(value: Any) -> str:
    # A hostile result.json can hold a 60 MB "timestamp": never echo it whole.
    return safe_read.clip(repr(value), 200)

