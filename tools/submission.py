#!/usr/bin/env python3
"""submission: a run's job dirs laid out as a Terminal-Bench leaderboard submission.

Usage:
  python -m tools.submission build --jobs-dir D --job-name N --out OUT --version V
      --agent-display-name A --agent-org-display-name O --agent-url U
      --model-name M --model-provider P --model-display-name MD --model-org-display-name MO
      [--run RUN] [--where local|hf] [--dry-run]

The layout and metadata.yaml are the leaderboard's own, from the README of its Hub dataset
(https://huggingface.co/datasets/harborframework/terminal-bench-2-leaderboard, "Submission
Structure" and "Required: metadata.yaml"):

    submissions/terminal-bench/<version>/<agent>__<model>/
        metadata.yaml         agent_url, agent_display_name, agent_org_display_name,
                              models: [{model_name, model_provider, model_display_name,
                                        model_org_display_name}]
        <job-folder>/         every job dir of the run: its own files and its counted trial dirs

The job dirs are the run's, found as the tally finds them (tools/tally_jobs.py run_job_dirs:
the job, its retry jobs, both layouts). The leaderboard's resolution rate is passed over every
trial submitted (an errored one counts as not passed), so each job dir is copied with only the
trial dirs the tally counts: per task its k slot-filling trials, the latest k settled ones
(tools/slots.py fill over the tally's own per-task grouping; k is the first job's n_attempts).
Every other trial dir is left out and named with why: infra-errored, unfinished (no
result.json), unreadable, re-rolled (an older settled attempt), shadowed (an infra error after
the slots filled), as harbor's own --max-retries deletes a retried attempt. A job's own files
(config.json, result.json, lock.json, job.log) are copied; symlinks are copied as links, never
followed; a link or hard link that could lead out of the run is left out and named; nothing in
the run's own dirs is moved or changed.

Refused, with nothing written and the make command that fixes it named: a task with an open
slot (fewer than k settled trials: make mopup); a passing trial without a valid ATIF
agent/trajectory.json (harbor's Trajectory model; make pull PULL=all for a remote run); a
timeout multiplier or a timeout or resource override in the job's config.json or any submitted
trial's (check-submission's rules); tasks of the dataset the run never ran (the dataset's task
list from the lock.json of a job that ran it unfiltered; without one, coverage is only noted);
a credential in any file (tools/credentials.py). Then the tree is checked with check-submission
(tools/report.py check_submission, which also wants k >= 5) and the verdict printed: the tree
stays either way, so a rejected one can be looked at.

Exit codes: 0 the submission is built and meets the rules (or --dry-run printed its plan, a
refusal included); 1 refused (nothing written), built and not meeting the rules (the verdict
says why), or a user error, named.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

import click
import yaml

from tools import credentials as CR
from tools import pin as PIN
from tools import report as R
from tools import report_submission as RS
from tools import safe_read as SR
from tools import slots as SL
from tools import tally_core
from tools import tally_jobs
from tools import tally_policy

LEADERBOARD_README = "https://huggingface.co/datasets/harborframework/terminal-bench-2-leaderboard"
TRAJECTORY = "trajectory.json"          # agent/trajectory.json: harbor's ATIF trajectory of a trial
TRAJECTORY_CAP = 256 << 20              # real ones are megabytes; a bigger one is not read
LOCK_CAP = 64 << 20                     # as tools/pin.py reads a lock.json
# DatasetConfig fields that run only part of a dataset: such a job's lock.json lists only that part.
DATASET_FILTERS = ("task_names", "exclude_task_names", "n_tasks")


@dataclass(frozen=True)
class Metadata:
    """metadata.yaml's fields, as the leaderboard's README names them (one model)."""

    agent_url: str
    agent_display_name: str
    agent_org_display_name: str
    model_name: str
    model_provider: str
    model_display_name: str
    model_org_display_name: str

    def problems(self) -> list[str]:
        """Every field is required by the leaderboard: the empty ones, by setting name."""
        settings = {"agent_url": "AGENT_URL", "agent_display_name": "AGENT_DISPLAY_NAME",
                    "agent_org_display_name": "AGENT_ORG_DISPLAY_NAME", "model_name": "MODEL",
                    "model_provider": "MODEL_PROVIDER", "model_display_name": "MODEL_DISPLAY_NAME",
                    "model_org_display_name": "MODEL_ORG_DISPLAY_NAME"}
        return [f"{field} is empty (set {setting})" for field, setting in settings.items()
                if not getattr(self, field).strip()]


def metadata_yaml(meta: Metadata) -> str:
    """metadata.yaml's text: a comment saying where the format comes from, then the fields."""
    data = {
        "agent_url": meta.agent_url,
        "agent_display_name": meta.agent_display_name,
        "agent_org_display_name": meta.agent_org_display_name,
        "models": [{
            "model_name": meta.model_name,
            "model_provider": meta.model_provider,
            "model_display_name": meta.model_display_name,
            "model_org_display_name": meta.model_org_display_name,
        }],
    }
    header = (f"# Terminal-Bench leaderboard metadata (format: {LEADERBOARD_README}, README).\n"
              f"# Written by make submission from the run's settings.\n")
    return header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=1000)


# What the leaderboard shows for the agents this repository runs, when the run file does not
# say: the agent's name as its authors write it, and the repository it ships in.
KNOWN_AGENTS = {
    "terminus-2": ("Terminus 2", "Terminal-Bench", "https://github.com/harbor-framework/harbor"),
    "mini-swe-agent": ("mini-SWE-agent", "SWE-agent", "https://github.com/SWE-agent/mini-swe-agent"),
}
# harbor records the model as litellm's provider/model; this repository's servers are
# OpenAI-compatible, so every trial's model_info.provider is "openai" (harbor run --model openai/...).
DEFAULT_MODEL_PROVIDER = "openai"


def resolve_metadata(agent: str, model: str, agent_display_name: str = "", agent_org_display_name: str = "",
                     agent_url: str = "", model_provider: str = "", model_display_name: str = "",
                     model_org_display_name: str = "") -> Metadata:
    """metadata.yaml's fields from a run's settings: a setting given wins, else it is derived
    from AGENT (KNOWN_AGENTS) and MODEL (its namespace and name); what cannot be derived stays
    empty, and Metadata.problems() names its setting."""
    known = KNOWN_AGENTS.get(agent, ("", "", ""))
    namespace, _, name = model.rpartition("/")
    return Metadata(
        agent_url=agent_url or known[2],
        agent_display_name=agent_display_name or known[0],
        agent_org_display_name=agent_org_display_name or known[1],
        model_name=model,
        model_provider=model_provider or DEFAULT_MODEL_PROVIDER,
        model_display_name=model_display_name or name,
        model_org_display_name=model_org_display_name or namespace,
    )


def version_of(dataset_repo: str) -> str:
    """The leaderboard version dir from the dataset's name: .../terminal-bench-2.1 gives 2.1."""
    m = re.search(r"terminal-bench-([0-9]+(?:\.[0-9]+)*)(?:\.git)?/*$", dataset_repo or "")
    if not m:
        R.fail(f"cannot tell the Terminal-Bench version from DATASET_REPO {dataset_repo!r}: "
               f"set LEADERBOARD_VERSION (e.g. 2.0)")
    return m[1]


def name_part(text: str) -> str:
    """A display name as one path component: spaces become '-', only [A-Za-z0-9._-] stay."""
    part = re.sub(r"[^A-Za-z0-9._-]", "", re.sub(r"\s+", "-", text.strip()))
    return part.strip(".") or "unnamed"


def submission_dir(out: Path, version: str, meta: Metadata) -> Path:
    """OUT/submissions/terminal-bench/<version>/<agent>__<model>/."""
    if not re.fullmatch(r"[0-9]+(\.[0-9]+)*", version):
        R.fail(f"leaderboard version must look like 2.0 or 2.1, got {version!r} "
               f"(set LEADERBOARD_VERSION)")
    name = f"{name_part(meta.agent_display_name)}__{name_part(meta.model_display_name)}"
    return out / "submissions" / "terminal-bench" / version / name


# --------------------------------------------------------------------------- which trials


@dataclass(frozen=True)
class Selection:
    """Which trial dirs of the run the leaderboard counts: per task, its k slot-filling trials
    (the latest k settled, tools/slots.py fill), and why every other trial dir is left out."""

    k: int
    tasks: list[str]
    kept: set[str]                # trial dirs in a slot (as the tally names them: shown absolute paths)
    passed: list[str]             # of those, the passing ones (they need a trajectory)
    left_out: dict[str, str]      # trial dir -> why it is not submitted
    open: dict[str, int]          # task -> its settled trials, when fewer than k


@dataclass(frozen=True)
class _Seen:
    """A trial as the tally's report lists it, in the shape slots.fill reads (status, outcome, rule)."""

    trial_dir: str
    status: str
    outcome: str
    rule: str
    exception_type: str | None
    retried: bool = False


def _seen(t: dict) -> _Seen:
    # The tally sets a trial's outcome to its status when it has no usable result.json.
    status = t["outcome"] if t["outcome"] in ("unfinished", "unreadable") else "finished"
    return _Seen(t["trial_dir"], status, t["outcome"], t["rule"], t["exception_type"], t.get("retried", False))


def select_trials(job_dirs: list[Path]) -> Selection:
    """The tally's own grouping and slot rule (tools/tally_core.py tally, tools/slots.py fill),
    with the default outcome policy: k is the first job's n_attempts, as for make tally."""
    report = tally_core.tally(job_dirs, tally_policy.load_policy())
    k = report.get("n_attempts", 1)
    unreadable = {u["path"]: u["error"] for u in report["unreadable"]}
    kept, passed, left_out, open_slots = set(), [], {}, {}
    for entry in report["per_task"]:
        slots = SL.fill([_seen(t) for t in entry["trials"]], k)
        kept |= {t.trial_dir for t in slots.counted}
        passed += [t.trial_dir for t in slots.counted if t.outcome == "passed"]
        if slots.open:
            open_slots[entry["task"]] = len(slots.counted)
        rerolled, shadowed = {t.trial_dir for t in slots.rerolled}, {t.trial_dir for t in slots.shadowed}
        for t in map(_seen, entry["trials"]):
            if t.trial_dir not in kept:
                left_out[t.trial_dir] = _why_left_out(t, k, rerolled, shadowed, unreadable)
    return Selection(k, [e["task"] for e in report["per_task"]], kept, passed, left_out, open_slots)


def _why_left_out(t: _Seen, k: int, rerolled: set, shadowed: set, unreadable: dict) -> str:
    if t.trial_dir in rerolled:
        return (f"re-rolled: an older settled attempt ({t.outcome}); the task's latest {k} settled "
                f"trials fill its slots")
    if t.status == "unfinished":
        return "no result.json (a trial harbor never finished)"
    if t.status == "unreadable":
        error = unreadable.get(SR.shown(os.path.join(t.trial_dir, "result.json")), "unreadable")
        return f"unreadable result.json ({error})"
    what = t.exception_type or t.rule
    if t.trial_dir in shadowed:
        return f"an infra error ({what}) after the task's {k} slots were filled; not an attempt"
    return f"an infra error ({what}): unscored, never counted; its slot is filled by another attempt (make mopup)"


def _tally_name(path: str | os.PathLike) -> str:
    """A trial dir as the tally's report names it (tally_trials.scan_job_dir: absolute, shown)."""
    return SR.shown(os.path.abspath(path))


# --------------------------------------------------------------------------- what is refused


def mopup_fix(run: str) -> str:
    """The command that fills open slots; a bundled example is never mopped up (refuse_bundled_example)."""
    if run.startswith("example-"):
        return (f"make mopup RUN=<your run> (run {run} is a bundled example, never mopped up: make submission "
                f"RUN=example-leaderboard-complete shows a bundled run with every slot filled)")
    return f"make mopup RUN={run}"


def open_slot_problem(sel: Selection, run: str) -> list[str]:
    if not sel.open:
        return []
    slots = sum(sel.k - n for n in sel.open.values())
    shown = ", ".join(f"{task} ({n} of {sel.k} settled)" for task, n in list(sorted(sel.open.items()))[:10])
    more = f" (+{len(sel.open) - 10} more)" if len(sel.open) > 10 else ""
    return [f"{len(sel.open)} of {len(sel.tasks)} tasks have open attempt slots ({slots} of "
            f"{len(sel.tasks) * sel.k} slots have no settled trial): {shown}{more}; fill them with "
            f"{mopup_fix(run)}"]


def trajectory_problem(trial: Path, outside: set[Path]) -> str | None:
    """Why a passing trial's agent/trajectory.json is not a valid ATIF trajectory (harbor's own
    Trajectory model: schema_version ATIF-v1.0 to v1.8, an agent, at least one step), or None."""
    from harbor.models.trajectories.trajectory import Trajectory
    from pydantic import ValidationError

    path = trial / "agent" / TRAJECTORY
    if any(p in outside or p.is_symlink() for p in (trial / "agent", path)):
        return "a link, left out of the copy"
    try:
        raw = SR.read_regular(path, TRAJECTORY_CAP, "a trajectory.json")
    except FileNotFoundError:
        return "missing"
    except SR.Unreadable as e:
        return str(e)
    try:
        Trajectory.model_validate_json(raw)
    except ValidationError as e:
        return f"not ATIF: {RS.validation_summary(e)}"
    return None


def trajectory_problems(trials: list[Path], outside: set[Path], run: str, where: str) -> list[str]:
    bad = [(t, why) for t in trials if (why := trajectory_problem(t, outside))]
    if not bad:
        return []
    shown = ", ".join(f"{SR.shown(str(t))}/ ({why})" for t, why in bad[:10])
    more = f" (+{len(bad) - 10} more)" if len(bad) > 10 else ""
    fix = (f"bring them home with make pull RUN={run} PULL=all (PULL=results, which a run with N_ATTEMPTS=1 "
           f"pulls by default, leaves them out)"
           if where == "hf" else
           f"a local run has no other copy of what its agent wrote, so run those tasks again (a run benched as "
           f"an HF Job: make pull RUN={run} PULL=all brings its trajectories home)")
    return [f"{len(bad)} passing trials lack a valid ATIF agent/{TRAJECTORY}, which the leaderboard needs for "
            f"every passing trial: {shown}{more}; {fix}"]


def override_problems(job_dirs: list[Path], trials: list[Path], run: str) -> list[str]:
    """check-submission's config rules (timeout multipliers, timeout and resource overrides) on
    every job's config.json and every submitted trial's: the same problem in many trials is one line."""
    problems = [p for d in job_dirs for p in RS.config_problems(d, run)]
    by_rest: dict[str, list[Path]] = {}
    for trial in trials:
        path = trial / "config.json"
        for p in RS.config_file_problems(path, run, whose="trial"):
            by_rest.setdefault(p.removeprefix(f"{path}: "), []).append(trial)
    for rest, where in by_rest.items():
        problems.append(f"{len(where)} submitted trials' config.json (e.g. {SR.shown(str(where[0]))}/config.json): "
                        f"{rest}")
    return problems


def dataset_tasks(job_dirs: list[Path], shard_plan: Path | None = None) -> tuple[set[str] | None, str]:
    """The dataset's whole task list as the run recorded it, and where: the lock.json of a job
    that ran its datasets unfiltered (harbor's JobLock lists every trial it planned; a retry
    job's --include-task-name, -n or -x lists only some), else the split of a sharded run made
    from the whole dataset (state/<run>/shards.json, tools/shards.py). (None, why) when neither."""
    from harbor.models.job.lock import JobLock

    for d in job_dirs:
        try:
            cfg = SR.read_json_object(d / "config.json", what="a config.json")
            datasets = cfg.get("datasets")
            if not (isinstance(datasets, list) and datasets and all(
                    isinstance(ds, dict) and not any(ds.get(f) for f in DATASET_FILTERS) for ds in datasets)):
                continue
            lock = JobLock.model_validate(SR.read_json_object(d / "lock.json", LOCK_CAP, "a lock.json"))
        except (OSError, SR.Unreadable, ValueError):
            continue  # harbor writes both when a job starts; without them this job cannot tell
        names = {SR.clip(t.task.name) for t in lock.trials}
        if names:
            return names, f"{SR.shown(str(d))}/lock.json"
    if shard_plan is not None and os.path.lexists(shard_plan):
        try:
            kept = SR.read_json_object(shard_plan, LOCK_CAP, "a shards.json")
            source, shards = kept.get("task_source"), kept.get("shards")
            names = {SR.clip(t) for s in shards for t in s["tasks"] if isinstance(t, str)}
        except (OSError, SR.Unreadable, ValueError, TypeError, KeyError):
            names, source = set(), None
        # A split of TASKS is the tasks someone chose, not the dataset's.
        if names and isinstance(source, str) and source != "TASKS":
            return names, f"{SR.shown(str(shard_plan))} (the shards' split of {SR.clip(source)})"
    return None, "no job dir records the dataset's whole task list (a lock.json of a job that ran it unfiltered)"


def coverage(sel: Selection, job_dirs: list[Path], run: str,
             shard_plan: Path | None = None) -> tuple[str, list[str]]:
    """(a note on how much of the dataset the run covers, the refusal when tasks are missing)."""
    dataset, where = dataset_tasks(job_dirs, shard_plan)
    if dataset is None:
        return (f"the dataset's coverage cannot be checked: {where}; the run has {len(sel.tasks)} tasks", [])
    missing = sorted(dataset - set(sel.tasks))
    note = (f"the run covers {len(dataset) - len(missing)} of {len(dataset)} tasks of its dataset "
            f"(as {where} lists them)")
    if not missing:
        return note, []
    more = f" (+{len(missing) - 10} more)" if len(missing) > 10 else ""
    return note, [f"{note}: {len(missing)} missing, e.g. {', '.join(missing[:10])}{more}; run them with "
                  f"{mopup_fix(run)}"]


def registry_problems(dataset: str, job_dirs: list[Path], run: str) -> list[str]:
    """Why a registry dataset (DATASET=org/name[@ref]) is not the one version the leaderboard is bound to
    (Hub leaderboards bind dataset versions): its run file names no version or a tag, which can move
    (every resume resolved it again), or the run's jobs ran several versions, or another than the
    digest it pins. Each with the pin line to write. Nothing for a git or local dataset."""
    if not dataset:
        return []
    name, ref = PIN.split_registry(dataset)
    recorded = set()
    for d in job_dirs:
        try:
            lock = PIN.read_lock(d)
        except PIN.PinError:
            continue  # an unreadable lock.json: check-submission and the tally say so
        recorded |= {r for r in (lock or {}).get("registry", []) if r[0] == name and PIN.DIGEST.fullmatch(r[1])}
    ran = sorted(v for _, v in recorded)
    if len(ran) > 1:
        return [f"the run's jobs ran {len(ran)} versions of {name} ({', '.join(ran)}): a resume resolved an unpinned "
                f"dataset again, and the leaderboard is bound to one version; no one version reproduces this run"]
    line = f"DATASET={name}@{ran[0]}" if ran else f"DATASET={name}@<version>"
    if not PIN.registry_pinned(ref):
        why = f"@{ref} is a tag, which can move" if ref else "it names no version, so every resume resolved the latest"
        return [f"the registry dataset {dataset} is not pinned ({why}), and the leaderboard is bound to one dataset "
                f"version: pin it in runs/{run}.env with {line} ({'the version its jobs ran; ' if ran else ''}make "
                f"pin RUN={run} writes it; terminal-bench 2.1's leaderboard version is revision 6: @6)"]
    if PIN.DIGEST.fullmatch(ref) and ran and ran[0] != ref:
        return [f"runs/{run}.env pins {dataset}, but the run's jobs ran {name}@{ran[0]}: submit the run of the version "
                f"you pin, or pin the one that ran: {line}"]
    return []


# --------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class Plan:
    dest: Path                        # the <agent>__<model> dir
    metadata: str                     # metadata.yaml's text
    copies: list[tuple[Path, Path]]   # (job dir of the run, its copy in dest)
    trials: list[Path]                # the trial dirs copied: every task's k slot-filling trials
    left_out: list[tuple[Path, str]]  # dirs of the job dirs not copied (other trials, other dirs), and why
    linked_jobs: list[Path]           # job dir names that are symlinks: never followed, not copied
    outside: list[tuple[Path, str]]   # what could lead out of the run's tree, not copied, and why
    k: int                            # attempts per task (the first job's n_attempts)
    tasks: int
    coverage: str                     # how much of the dataset the run covers, or why that is unknown
    problems: list[str]               # why the leaderboard would not count it as it stands: a refusal


def job_entries(job_dir: Path, sel: Selection) -> tuple[list[Path], list[tuple[Path, str]]]:
    """(the trial dirs of a job that fill slots, every other dir in it with why it is left out).
    Files at the job's top (config.json, result.json, lock.json, job.log) are copied."""
    try:
        trials, refused, others = SR.trial_dir_entries(str(job_dir))
    except SR.Unreadable as e:
        R.fail(f"{job_dir}: {e}; nothing was written")
    kept, left = [], []
    for t in map(Path, trials):
        name = _tally_name(t)
        if name in sel.kept:
            kept.append(t)
        else:
            left.append((t, sel.left_out.get(name, "not read by the tally")))
    left += [(Path(p), why) for p, why in refused]
    left += [(Path(p), "not a trial dir (no result.json, config.json or <task>__<id> name)") for p in others]
    return kept, left


def leads_outside(job_dir: Path, skip: set[Path] = frozenset()) -> list[tuple[Path, str]]:
    """What in a job dir (less `skip`, what is left out anyway) could carry something from outside
    the run into the submission, and why: a symlink whose target is absolute or leaves the job dir
    (an upload reads through it: the HF token, /etc/passwd), and a file with a second hard link
    (its other name may be a token file). Symlinks inside the job are copied as links; nothing is
    ever followed."""
    found = []
    root = os.path.realpath(job_dir)
    for where, dirs, files in os.walk(job_dir):
        dirs[:] = [d for d in dirs if Path(where) / d not in skip]
        for name in sorted(dirs + [f for f in files if Path(where) / f not in skip]):
            path = Path(where) / name
            try:
                st = os.lstat(path)
                if stat.S_ISLNK(st.st_mode):
                    target = os.readlink(path)
                    resolved = os.path.realpath(os.path.join(where, target))
                    if os.path.isabs(target) or os.path.commonpath([root, resolved]) != root:
                        found.append((path, f"a symlink to {SR.link_target(path)}, out of the job dir"))
                elif stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
                    found.append((path, "a hard link: its other name may be outside the run"))
            except (OSError, ValueError) as e:
                found.append((path, f"cannot be inspected ({getattr(e, 'strerror', None) or e})"))
    return found


def check_out(out: Path) -> None:
    """OUT is a directory of the user's: not a file, a device, a pseudo filesystem, or /."""
    real = Path(os.path.realpath(out))
    if real == Path("/") or any(real == Path(p) or Path(p) in real.parents for p in ("/proc", "/sys", "/dev")):
        R.fail(f"OUT={out} is {'the filesystem root' if real == Path('/') else 'a system directory'}: give a "
               f"directory of your own (OUT=. builds ./submissions/...)")
    if os.path.lexists(out) and not out.is_dir():
        R.fail(f"OUT={out} exists and is not a directory: give a directory (OUT=. builds ./submissions/...)")


def run_dirs(jobs_dir: Path, job_name: str, out: Path, dest: Path,
             model: str | None = None) -> tuple[list[Path], list[Path]]:
    """(the run's job dirs to submit, those whose name is a symlink); refusals change nothing. A job
    dir of the run's name that is another run's (its config.json names another job, or records
    another model than `model`, the run's MODEL) is refused: its trials are not the run's."""
    try:
        job_dirs = tally_jobs.run_job_dirs(jobs_dir, job_name)
        tally_jobs.refuse_foreign_job_dirs(job_dirs, model)
    except tally_jobs.TallyError as e:
        R.fail(str(e))
    # A job dir name that is a symlink could lead anywhere (~/.cache/huggingface, another run):
    # never followed, never copied, listed.
    linked = [d for d in job_dirs if d.is_symlink()]
    job_dirs = [d for d in job_dirs if not d.is_symlink()]
    if not job_dirs:
        R.fail(f"no job dir of {job_name!r} under {jobs_dir}: nothing to submit (make bench, or make pull)")
    seen: dict[str, Path] = {}
    for d in job_dirs:
        if d.name in seen:
            R.fail(f"two job dirs named {d.name}: {seen[d.name]} and {d}; a submission holds each "
                   f"job folder once. Move one aside, then run make submission again")
        seen[d.name] = d
    resolved_dest = dest.resolve()
    for d in job_dirs:
        src = d.resolve()
        if resolved_dest == src or src in resolved_dest.parents or resolved_dest in src.parents:
            R.fail(f"OUT ({out}) overlaps the run's job dir {d}: pick an OUT outside the jobs dir")
    return job_dirs, linked


def plan_submission(jobs_dir: Path, job_name: str, out: Path, version: str, meta: Metadata,
                    run: str | None = None, where: str = "local", shard_plan: Path | None = None,
                    model: str | None = None, dataset: str = "", rebuild: bool = False) -> Plan:
    """What build writes, decided before anything is: refusals change nothing. `rebuild`: the
    destination is make submit's own tree, which it removes before building: its being there
    is not a refusal (make submit's dry run plans over it)."""
    problems = meta.problems()
    if problems:
        R.fail("the leaderboard's metadata.yaml needs every field: " + "; ".join(problems))
    check_out(out)
    dest = submission_dir(out, version, meta)
    job_dirs, linked = run_dirs(jobs_dir, job_name, out, dest, model)
    if os.path.lexists(dest) and not rebuild:
        R.fail(f"{dest} already exists; nothing was changed. Remove it (rm -r -- {shlex.quote(str(dest))}) "
               f"or give another OUT=dir")
    run = run or "<run>"
    try:
        sel = select_trials(job_dirs)
    except tally_jobs.TallyError as e:
        R.fail(str(e))
    trials, left_out = [], []
    for d in job_dirs:
        kept, left = job_entries(d, sel)
        trials += kept
        left_out += left
    skip = {p for p, _ in left_out}
    outside = [found for d in job_dirs for found in leads_outside(d, skip)]
    passing = set(sel.passed)
    passed = [t for t in trials if _tally_name(t) in passing]
    note, missing = coverage(sel, job_dirs, run, shard_plan)
    problems = (open_slot_problem(sel, run) + trajectory_problems(passed, {p for p, _ in outside}, run, where)
                + override_problems(job_dirs, trials, run) + missing + registry_problems(dataset, job_dirs, run))
    plan = Plan(dest=dest, metadata=metadata_yaml(meta), copies=[(d, dest / d.name) for d in job_dirs],
                trials=trials, left_out=left_out, linked_jobs=linked, outside=outside, k=sel.k,
                tasks=len(sel.tasks), coverage=note, problems=problems)
    if not problems:
        # The tree is for upload: nothing in it may hold a credential (tools/credentials.py).
        findings = CR.scan_files([str(p) for p in copied_files(plan)])
        if findings:
            R.fail(CR.refusal(findings, "make submission", nothing="written"))
    return plan


def skipped(plan: Plan) -> set[Path]:
    return {p for p, _ in plan.left_out} | {p for p, _ in plan.outside}


def copied_files(plan: Plan) -> list[Path]:
    """The regular files build copies: the job dirs less what is left out."""
    skip = skipped(plan)
    files = []
    for src, _ in plan.copies:
        for where, dirs, names in os.walk(src):
            dirs[:] = [d for d in dirs if Path(where) / d not in skip]
            files += [Path(where) / n for n in names if Path(where) / n not in skip]
    return files


def build(plan: Plan) -> None:
    """Write the tree: into a temp dir beside it, then renamed into place (all or nothing)."""
    tmp = plan.dest.with_name(f".{plan.dest.name}.tmp-{os.getpid()}")
    try:
        plan.dest.parent.mkdir(parents=True, exist_ok=True)
        tmp.mkdir()
        (tmp / "metadata.yaml").write_text(plan.metadata, encoding="utf-8")
        left_out = skipped(plan)
        for src, dst in plan.copies:
            # symlinks=True: a link is copied as a link, never followed out of the job.
            # shutil refuses a FIFO or device (SpecialFileError) instead of hanging on it.
            shutil.copytree(src, tmp / dst.name, symlinks=True,
                            ignore=lambda where, names: [n for n in names if Path(where) / n in left_out])
        os.rename(tmp, plan.dest)
    except (OSError, shutil.Error) as e:
        shutil.rmtree(tmp, ignore_errors=True)  # only the temp dir this call made
        R.fail(f"cannot build {plan.dest}: {SR.clip(str(e), 500)}; nothing was written there")


def left_out_line(path: Path, why: str) -> str:
    return f"left out {SR.shown(str(path))}/: {why}"


def linked_job_line(job: Path) -> str:
    return (f"left out {SR.shown(str(job))}: a symlink to {SR.link_target(job)}, never followed (a job dir is "
            f"copied only where it is)")


def outside_line(path: Path, why: str) -> str:
    return f"left out {SR.shown(str(path))}: {why}"


def report_lines(plan: Plan) -> list[str]:
    """What is left out and why, and the dataset's coverage: said by build and by a dry run."""
    return ([left_out_line(p, why) for p, why in plan.left_out] + [linked_job_line(j) for j in plan.linked_jobs]
            + [outside_line(p, why) for p, why in plan.outside] + [plan.coverage])


def refusal_lines(plan: Plan) -> list[str]:
    trials = "trial" if plan.k == 1 else "trials"
    return ([f"refused, nothing was written: the leaderboard's resolution rate is passed over every trial "
             f"submitted, so each task must hold exactly its {plan.k} slot-filling {trials}, as the rules want them"]
            + plan.problems)


DRY_RUN_HINT = ("make submission RUN={run} DRY_RUN=1 lists every trial dir it would submit or leave out, "
                "and why")


def trial_count(plan: Plan) -> str:
    """The tree's trial dirs as counted, said against tasks × k only where they are that many."""
    n, slots = len(plan.trials), plan.tasks * plan.k
    if n == slots:
        return f"{n} trial dirs: {plan.tasks} tasks × {plan.k} attempts"
    return (f"{n} trial dirs of {plan.tasks} tasks ({slots - n} of their {plan.tasks} × {plan.k} = {slots} attempt "
            f"slots hold no trial)")


def rejection(plan: Plan) -> str | None:
    """What check-submission would say of the built tree, where the plan already tells: fewer than
    MIN_TRIALS trials per task (k is the run's n_attempts)."""
    if plan.k < RS.MIN_TRIALS:
        return (f"built, then rejected by check-submission: {plan.k} trial(s) per task, and the leaderboard wants at "
                f"least {RS.MIN_TRIALS} (set N_ATTEMPTS=5 in runs/<run>.env and bench the run with it)")
    return None


def dry_run_text(plan: Plan) -> str:
    lines = [f"would create {plan.dest}/",
             f"would write {plan.dest / 'metadata.yaml'}:"]
    lines += [f"    {line}" for line in plan.metadata.splitlines()]
    for src, dst in plan.copies:
        n = sum(1 for t in plan.trials if t.parent == src)
        lines.append(f"would copy {src}/ to {dst}/ ({n} trial dirs and the job's own files)")
    lines.append(f"would submit {trial_count(plan)}")
    lines += report_lines(plan)
    if plan.problems:
        lines += ["would be " + refusal_lines(plan)[0].replace("nothing was written", "writing nothing")]
        lines += [f"  - {p}" for p in plan.problems]
    else:
        lines.append(f"would then check it: python -m tools.report check-submission {plan.dest}/<job> ...")
        if rejection(plan):
            lines.append(f"would be {rejection(plan)}")
    return "\n".join(lines) + "\n"


@click.group(help=__doc__.split("\n\n")[0])
def cli() -> None:
    pass


def settings_options(f):
    """The run's settings the metadata comes from (empty: derived, see resolve_metadata)."""
    for name, help_text in reversed([
        ("--agent", "harbor's agent name (AGENT)"), ("--model", "the HF model id served (MODEL)"),
        ("--dataset-repo", "the dataset's URL (DATASET_REPO)"),
        ("--dataset", "the registry dataset, org/name[@version] (DATASET)"),
        ("--agent-display-name", "AGENT_DISPLAY_NAME"), ("--agent-org-display-name", "AGENT_ORG_DISPLAY_NAME"),
        ("--agent-url", "AGENT_URL"), ("--model-provider", "MODEL_PROVIDER"),
        ("--model-display-name", "MODEL_DISPLAY_NAME"), ("--model-org-display-name", "MODEL_ORG_DISPLAY_NAME"),
        ("--version", "LEADERBOARD_VERSION"),
    ]):
        f = click.option(name, default="", help=help_text)(f)
    return f


@cli.command("build")
@click.option("--jobs-dir", required=True, type=click.Path(path_type=Path))
@click.option("--job-name", required=True)
@click.option("--out", required=True, type=click.Path(path_type=Path),
              help="The submission goes under OUT/submissions/terminal-bench/<version>/.")
@settings_options
@click.option("--run", default=None, help="The run's name, for the advice (runs/<run>.env, make mopup RUN=...).")
@click.option("--where", default="local", help="Where harbor ran (WHERE): hf's trajectories come with make pull.")
@click.option("--shard-plan", type=click.Path(path_type=Path), default=None,
              help="A sharded run's split (state/<run>/shards.json): the dataset's task list when no job ran it whole.")
@click.option("--dry-run", is_flag=True, help="Print what would be written, and write nothing.")
@click.option("--refusal-exit", is_flag=True,
              help="With --dry-run: exit 1 when the run would be refused or its tree rejected (make submit's dry run).")
@click.option("--rebuild", is_flag=True,
              help="With --dry-run: the destination is make submit's own tree, removed before a build.")
def build_cmd(jobs_dir, job_name, out, run, where, shard_plan, dry_run, refusal_exit, rebuild, **settings):
    """Build the submission tree of a run, then check it against the leaderboard rules."""
    meta = resolve_metadata(**{k: v for k, v in settings.items() if k not in ("dataset_repo", "version", "dataset")})
    version = settings["version"] or version_of(settings["dataset_repo"])
    plan = plan_submission(jobs_dir, job_name, out, version, meta, run=run, where=where, shard_plan=shard_plan,
                           model=settings["model"] or None, dataset=settings["dataset"], rebuild=dry_run and rebuild)
    if dry_run:
        # A dry run prints its plan, a refusal included, and exits 0: it was asked what would happen.
        # make submit's asks whether the submission would go through: a refusal is its exit code.
        R.echo(dry_run_text(plan), nl=False)
        if refusal_exit and (plan.problems or rejection(plan)):
            sys.exit(1)
        return
    if plan.problems:
        for line in refusal_lines(plan) + [plan.coverage, DRY_RUN_HINT.format(run=run or "<run>")]:
            R.echo(f"submission: {line}", err=True)
        sys.exit(1)
    build(plan)
    R.echo(f"submission: built {plan.dest}/ (metadata.yaml, {len(plan.copies)} job dirs, {trial_count(plan)})",
           err=True)
    # The board's own figure over what the tree holds (tools/slots.py leaderboard_figure): first.
    held = tally_core.tally([str(dst) for _, dst in plan.copies], tally_policy.load_policy(), run=run)
    if held.get("n_attempts", 1) > 1:
        for line in SL.headline_lines(held):
            R.echo(f"submission: {line.strip()}", err=True)
    for line in report_lines(plan):
        R.echo(f"submission: {line}", err=True)
    verdict = R.check_submission([dst for _, dst in plan.copies], run=run)
    R.echo(R.submission_markdown(f"submission {plan.dest}", verdict), nl=False)
    if not verdict["ok"]:
        R.echo("submission: the tree is built, so you can look at it; fix the problems above "
               "and build it again before you open a pull request", err=True)
        sys.exit(1)


if __name__ == "__main__":
    cli()
