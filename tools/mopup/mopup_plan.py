"""mopup_plan: what mop-up retries (what is left of each task's attempts) and how (the plan).

What is left, `left_to_retry` (make reproduce's supervisor asks the same through
`what_is_left` before every pass): read from the tally (tools/results/tally_core.py, the same report
make tally prints), which decides it once: per task, `open_slots` is the number of attempts it
lacks, and `settled` / `infra` on each of its trials say which dirs hold no slot:
  * k = 1 (harbor's default): 1 for a task whose latest attempt errored by an infra rule or
    never finished (the tally's retry targets);
  * k > 1 (N_ATTEMPTS, harbor's -k): a task has k slots filled by its settled trials
    (tools/results/slots.py); it lacks k - settled of them. Settled trials are never re-run;
  * a task harbor planned that no trial dir names (a bench killed before it started it)
    lacks all k.
A task with a manual verdict, or a final error, lacks nothing.

How, `build_plan`: resume the job in place when harbor's resume would run exactly the
missing attempts (mopup_harbor.simulate_resume replays it: harbor runs, per task, k minus
the finished trials left in the job, so the task's unsettled trial dirs leave it first);
otherwise standalone retry jobs, one per distinct missing count m, each `-k m` with that
group's --include-task-name's (with k = 1, one job of every task, without -k).
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import click

from tools import fmt
from tools.results import tally_core
from tools.results import tally_jobs
from tools.results import tally_policy
from tools.mopup.mopup_harbor import (job_result_readable, lock_blockers, lock_mismatch, config_differences,
                                planned_trial_configs, read_job_config, read_json_object, redacted_secrets,
                                refuse_special_files, simulate_resume, task_of, trial_dirs_of, trial_task)
from tools.results.retried import PLUGIN as KEEP_RETRIED_PLUGIN

# Passed to `harbor job resume -f`: exception types are Python class names, which cannot
# contain '-', so this matches no trial. Without an explicit -f, harbor's default
# `-f CancelledError` would rmtree those trials itself; mop-up archives them first instead.
NO_MATCH_FILTER = "mopup-archived-first-matches-nothing"


# --- what is left --------------------------------------------------------------------------------


def tally_run(jobs_dir: Path, job_name: str, verdicts: Path | None, model: str | None = None,
              max_task_retries: int = tally_core.DEFAULT_MAX_TASK_RETRIES) -> dict:
    """make tally's report of the run (the default policy and accounting), from the library. With
    `model` (the run's MODEL), a job dir of another run under the run's name is refused;
    `max_task_retries` (MAX_TASK_RETRIES) decides the final errors, which are not retried."""
    try:
        policy = tally_policy.load_policy()
        loaded = tally_policy.load_verdicts(verdicts)
        dirs = tally_jobs.resolve_job_dirs((), str(jobs_dir), job_name, model)
    except tally_jobs.TallyError as exc:
        raise click.ClickException(f"tally failed: {exc}")
    return tally_core.tally(dirs, policy, loaded, False, run=job_name,
                            verdicts_path=str(verdicts) if verdicts else None, max_task_retries=max_task_retries)


def left_to_retry(report: dict, planned: list, unstarted: set[str] = frozenset()) -> dict[str, dict]:
    """Per task to retry: {task, outcome, exception_type, trial_dirs, missing[, slots, note]}.

    `missing` is how many attempts to run (see the module docstring); `trial_dirs` are the
    task's unsettled trial dirs (with k = 1, all of its dirs). `planned` is harbor's own plan
    of the job (TrialConfigs), for the tasks no trial dir names; [] when it cannot be had.
    `unstarted` names more such tasks: a sharded run's tasks whose shard never made its job.
    """
    k = report.get("n_attempts", 1)
    tasks: dict[str, dict] = {}
    for t in tally_core.retry_targets(report):  # the tally's own selection, with each task's `missing`
        if k == 1:
            tasks[t["task"]] = {"task": t["task"], "outcome": t["outcome"], "exception_type": t.get("exception_type"),
                                "trial_dirs": [x["trial_dir"] for x in t.get("trials", [])] or [t.get("trial_dir")],
                                "missing": t["missing"]}
        else:
            infra = [x for x in t["trials"] if x["infra"]]
            tasks[t["task"]] = {"task": t["task"], "outcome": t["slots"][-1],
                                "exception_type": infra[-1]["exception_type"] if infra else None,
                                "trial_dirs": [x["trial_dir"] for x in t["trials"] if not x["settled"]],
                                "missing": t["missing"], "slots": t["slots_text"]}
    known = {e["task"] for e in report["per_task"]}
    for name in sorted(({task_of(c) for c in planned} | set(unstarted)) - known - set(tasks)):
        tasks[name] = {"task": name, "outcome": "unfinished", "exception_type": None, "trial_dirs": [],
                       "note": "never started", "missing": k}
    refused = []
    for name in sorted(tasks):
        if tally_jobs.NOT_A_NAME.search(name):
            refused.append(f"{name!r} (a control character or a leading '-': not one task's name)")
        elif tally_jobs.GLOB_CHARS.search(name):
            refused.append(f"{name!r} (a glob character: it would match more than itself)")
    if refused:
        raise click.ClickException(
            f"mop-up cannot give harbor's --include-task-name these task names: {'; '.join(refused)}. Nothing was "
            f"changed. A name comes from the trial's result.json (task_name), else its dir: harbor never writes "
            f"such a name, so look at those trial dirs (make tally lists them) before anything is re-run.")
    return dict(sorted(tasks.items()))


def what_is_left(jobs_dir: Path, job_name: str, verdicts: Path | None = None,
                 split: Path | None = None, model: str | None = None,
                 max_task_retries: int = tally_core.DEFAULT_MAX_TASK_RETRIES) -> dict[str, dict]:
    """left_to_retry of the run as it is on disk now (the plan's own selection, for make reproduce
    and AUTO_STOP). `split`: a sharded run's kept split (state/<run>/shards.json, tools/run/shards.py);
    `model`, `max_task_retries`: the run's MODEL and MAX_TASK_RETRIES (tally_run)."""
    report = tally_run(jobs_dir, job_name, verdicts, model, max_task_retries)
    shards = shard_dirs(jobs_dir, job_name)
    if shards:
        return left_to_retry(report, planned_of_shards(shards)[0], unstarted_shard_tasks(split, shards))
    planned: list = []
    config, _, _ = read_job_config(main_job_dir(jobs_dir, job_name))
    if config is not None:
        try:
            planned = planned_trial_configs(config)[1]
        except Exception:  # a --repo dataset offline: the plan cannot list never-started tasks either
            planned = []
    return left_to_retry(report, planned)


def shard_dirs(jobs_dir: Path, job_name: str) -> list[Path]:
    """A sharded run's first-pass job dirs (<job>-shard-<i>, and <job> itself if it also ran), in
    order; [] for a run that is not sharded."""
    if not Path(jobs_dir).is_dir():
        return []  # main_job_dir says what is missing, as for a run that is not sharded
    first = [d for d in job_dirs_or_fail(jobs_dir, job_name) if tally_jobs.retry_number(job_name, d.name) == 0]
    return first if any(tally_jobs.shard_number(job_name, d.name) for d in first) else []


def unstarted_shard_tasks(split: Path | None, shards: list[Path]) -> set[str]:
    """The tasks of the kept split's shards that never made their job (no config.json): a bench
    stopped between launching its shards. Nothing when the split cannot be read."""
    if split is None or not os.path.lexists(split):
        return set()
    from tools import safe_read  # noqa: PLC0415

    try:
        kept = safe_read.read_json_object(split, 16 << 20, "a shards.json")
        started = {d.name for d in shards if os.path.lexists(d / "config.json")}
        return {t for s in kept["shards"] if s["job_name"] not in started for t in s["tasks"] if isinstance(t, str)}
    except (OSError, safe_read.Unreadable, ValueError, TypeError, KeyError):
        return set()


def planned_of_shards(shards: list[Path]) -> tuple[list, list[str]]:
    """(the trial configs harbor planned across a sharded run's first-pass jobs, why some could not
    be listed). Each shard planned its own tasks; together they are the run's."""
    planned: list = []
    problems: list[str] = []
    for d in shards:
        config, _, blocker = read_job_config(d)
        if config is None:
            problems.append(f"{d.name}: {blocker}")
            continue
        try:
            planned += planned_trial_configs(config)[1]
        except Exception as exc:  # a --repo dataset offline
            problems.append(f"harbor cannot resolve {d.name}'s dataset now ({type(exc).__name__}: {exc})")
    return planned, problems


# --- the plan ---------------------------------------------------------------------------------


def main_job_dir(jobs_dir: Path, job_name: str) -> Path:
    """The run's job dir, flat or nested; one without config.json too (the plan then says why it cannot resume)."""
    candidates = (jobs_dir / job_name, jobs_dir / "jobs" / job_name)
    for candidate in candidates:
        if os.path.lexists(candidate / "config.json"):
            return candidate
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    raise click.ClickException(
        f"no job '{job_name}' under {jobs_dir} (looked for {job_name}/config.json and jobs/{job_name}/config.json). "
        "Run `make bench RUN=…` first, or set JOBS_DIR/JOB_NAME to where the job is."
    )


def resume_blockers(job_dir: Path, frozen_raw: dict, current: dict, config, task_configs: list, planned: list,
                    leaving: list[Path], missing: Counter, n_concurrent: int) -> list[str]:
    """Every reason `harbor job resume` would not run exactly the `missing` attempts; [] when it would."""
    blockers = [f"setting changed since the job was created: {d}" for d in config_differences(frozen_raw, current)]
    blockers += lock_blockers(job_dir)
    blockers += [f"a secret was frozen redacted ({s}); a resume would send the redacted string"
                 for s in redacted_secrets(frozen_raw)]
    if blockers or not planned:
        return blockers
    would_run, error = simulate_resume(job_dir, planned, set(leaving))
    error = error or lock_mismatch(job_dir, config, task_configs, planned, n_concurrent)
    if error:
        return [error]
    extra = sorted(t for t in would_run if would_run[t] and not missing[t])
    lacking = sorted(t for t in missing if missing[t] and not would_run[t])
    other = sorted(t for t in missing if missing[t] and would_run[t] and would_run[t] != missing[t])
    if extra:
        blockers.append(f"a resume would also re-run {', '.join(extra)}, already settled by another job of the run")
    if lacking:
        blockers.append(f"a resume would not re-run {', '.join(lacking)} (their trials are in another job of the run)")
    if other:  # k > 1: settled attempts of these tasks are in another job of the run
        blockers.append("a resume would run " + ", ".join(f"{would_run[t]} attempt(s) of {t}" for t in other)
                        + ", not the " + ", ".join(str(missing[t]) for t in other)
                        + " their slots lack (some of their settled trials are in another job of the run)")
    return blockers


def build_plan(jobs_dir: Path, job_name: str, mode: str, n_concurrent: int, current: dict, run: str,
               verdicts: Path | None = None, split: Path | None = None, model: str | None = None,
               max_task_retries: int = tally_core.DEFAULT_MAX_TASK_RETRIES) -> dict:
    """The plan (the JSON mop-up writes): what is left of each task, and how it is run (module doc)."""
    shards = shard_dirs(jobs_dir, job_name)
    job_dir = shards[0] if shards else main_job_dir(jobs_dir, job_name)
    refuse_special_files(job_dirs_or_fail(jobs_dir, job_name))
    report = tally_run(jobs_dir, job_name, verdicts, model, max_task_retries)
    k = report.get("n_attempts", 1)
    config, frozen_raw, config_blocker = (None, None, None) if shards else read_job_config(job_dir)
    task_configs, planned, blockers, warnings = harbors_plan(shards, config, config_blocker)
    if k > 1 and current.get("n_attempts", 1) != k:
        warnings.append(f"N_ATTEMPTS is {current.get('n_attempts', 1)} now, but the run's job ran with -k {k}: "
                        f"mop-up fills the {k} slots per task that make tally counts")

    tasks = left_to_retry(report, planned, unstarted_shard_tasks(split, shards) if shards else set())
    selected = sorted(tasks)
    missing = Counter({name: t["missing"] for name, t in tasks.items()})
    leaving, task_of_dir = leaving_the_job(job_dir, tasks, k)
    if config is not None:
        blockers += resume_blockers(job_dir, frozen_raw, current, config, task_configs, planned,
                                    leaving, missing, n_concurrent)
    chosen = chosen_mode(mode, blockers) if selected else "none"
    now = fmt.utc_now()
    plan = {
        "run": run,
        "created_at": now.isoformat(),
        "batch": now.strftime("%Y%m%dT%H%M%S%fZ"),
        "jobs_dir": str(jobs_dir),
        "job_name": job_name,
        "job_dir": str(job_dir),
        "mode": chosen,
        "requested_mode": mode,
        "why_not_resume": blockers,
        "warnings": warnings,
        "n_attempts": k,
        "missing_attempts": sum(missing.values()),
        "tasks": [tasks[name] for name in selected],
        "max_task_retries": max_task_retries,
        "final_errors": [{"task": e["task"], "infra_streak": e["infra_streak"]}
                         for e in report["per_task"] if e["final_error"]],
        "archive": [],
        "concurrency": None,
        "retry_job_name": None,
        "retry_jobs": [],
        "resume_argv": None,
        "trial_dirs_before": sorted(str(d) for jd in job_dirs_or_fail(jobs_dir, job_name) for d in trial_dirs_of(Path(jd))),
    }
    if chosen == "resume":
        plan.update(resume_in_place(job_dir, config, leaving, task_of_dir, n_concurrent))
    elif chosen == "retry-job":
        plan["retry_jobs"] = retry_jobs(jobs_dir, job_name, tasks)
        plan["retry_job_name"] = plan["retry_jobs"][0]["job_name"]
    return plan


def harbors_plan(shards: list[Path], config, config_blocker: str | None) -> tuple[list, list, list[str], list[str]]:
    """(the job's task configs, the trial configs harbor planned, why a resume cannot work, warnings):
    for the never-started tasks, and for simulating a resume."""
    if shards:
        # One retry job fills what every shard left: resuming N jobs in place would run N harbors
        # for one pass, and a shard's resume cannot see the others' slots.
        planned, problems = planned_of_shards(shards)
        blockers = [f"the run is sharded ({len(shards)} first-pass job dirs): one retry job covers every shard",
                    *problems]
        warnings = ["tasks that never started in those shards cannot be listed; they are not in this plan"] \
            if problems else []
        return [], planned, blockers, warnings
    if config is None:
        return [], [], [config_blocker], ["tasks that never started cannot be listed without the job's config.json; "
                                          "they are not in this plan"]
    try:
        task_configs, planned = planned_trial_configs(config)
    except Exception as exc:  # a --repo dataset needs the network; harbor's resume would fail the same way
        return [], [], [f"harbor cannot resolve the job's dataset now ({type(exc).__name__}: {exc})"], [
            "tasks that never started cannot be listed without the dataset; they are not in this plan"]
    return task_configs, planned, [], []


def leaving_the_job(job_dir: Path, tasks: dict[str, dict], k: int) -> tuple[list[Path], dict[Path, str]]:
    """(the dirs that leave the job for an in-place resume, each trial dir's task).

    In place, a selected task's unsettled dirs leave the job (so harbor re-runs that many
    attempts), and so does every dir without result.json (harbor would rmtree it). With
    k = 1 that is every dir of the task. A dir's task is the tally's when the tally names
    the dir (it also reads a task from the dir's name), else its files'."""
    tally_task = {d: t["task"] for t in tasks.values() for d in t["trial_dirs"] if d}
    task_of_dir = {d: tally_task.get(str(d)) or trial_task(d) for d in trial_dirs_of(job_dir)}
    if k == 1:
        leaving = [d for d, task in task_of_dir.items() if task in tasks or not (d / "result.json").exists()]
    else:  # the settled trials stay: harbor counts them against the task's k planned attempts
        leaving = [d for d in task_of_dir if str(d) in tally_task or not (d / "result.json").exists()]
    return leaving, task_of_dir


def chosen_mode(mode: str, blockers: list[str]) -> str:
    """MOPUP_MODE as it applies: auto resumes unless something blocks it; resume refuses then."""
    if mode == "auto":
        return "retry-job" if blockers else "resume"
    if mode == "resume" and blockers:
        raise click.ClickException(
            "MOPUP_MODE=resume, but resuming the job in place cannot work:\n  - " + "\n  - ".join(blockers)
            + "\nRun with MOPUP_MODE=auto (or retry-job) for a standalone retry job instead.")
    return mode


def resume_in_place(job_dir: Path, config, leaving: list[Path], task_of_dir: dict[Path, str],
                    n_concurrent: int) -> dict:
    """The plan's fields for an in-place resume: what leaves the job, the concurrency patch, harbor's argv."""
    out: dict = {"archive": [{"src": str(d), "job": job_dir.name, "task": task_of_dir[d],
                              "finished": (d / "result.json").exists()} for d in leaving]}
    if not job_result_readable(job_dir):
        out["unreadable_job_result"] = str(job_dir / "result.json")
    # Both files, each on its own: an interrupted patch may have left one behind.
    frozen_n = config.n_concurrent_trials
    locked_n = (read_json_object(job_dir / "lock.json")[0] or {}).get("n_concurrent_trials")
    if frozen_n != n_concurrent or locked_n not in (None, n_concurrent):
        out["concurrency"] = {"from": frozen_n, "lock_from": locked_n, "to": n_concurrent}
    out["resume_argv"] = ["harbor", "job", "resume", "-p", str(job_dir), "--filter-error-type", NO_MATCH_FILTER]
    if config.retry.max_retries > 0:
        # The job retries in the run (its frozen retry config): its retried attempts are kept as
        # make bench keeps them (docs/design.md decision 27). A plugin is no part of the config.
        out["resume_argv"] += ["--plugin", KEEP_RETRIED_PLUGIN]
    return out


def job_dirs_or_fail(jobs_dir: Path, job_name: str) -> list[Path]:
    """The run's job dirs (tally_jobs.run_job_dirs), a missing jobs dir a click error with the fix."""
    try:
        return tally_jobs.run_job_dirs(jobs_dir, job_name)
    except tally_jobs.TallyError as exc:
        raise click.ClickException(str(exc))


def retry_jobs(jobs_dir: Path, job_name: str, tasks: dict[str, dict]) -> list[dict]:
    """One retry job per distinct missing count m, fewest first: {job_name, attempts: m, tasks}.

    Numbered from the run's first unused <job_name>-retry-<N> on; harbor runs `-k m` of each
    of the job's tasks, so every task gets exactly the attempts its slots lack.
    """
    first = tally_jobs.retry_number(job_name, tally_jobs.next_retry_job_name(jobs_dir, job_name))
    groups: dict[int, list[str]] = {}
    for name in sorted(tasks):
        groups.setdefault(tasks[name]["missing"], []).append(name)
    return [{"job_name": tally_jobs.retry_job_name(job_name, first + i), "attempts": m, "tasks": names}
            for i, (m, names) in enumerate(sorted(groups.items()))]


def final_errors_line(plan: dict) -> list[str]:
    """The tasks the plan leaves alone as final errors (past MAX_TASK_RETRIES), and how to give them one more try."""
    final = plan.get("final_errors") or []
    if not final:
        return []
    limit = plan["max_task_retries"]
    return [f"not retried, final errors (their infra error survived {limit} attempts in a row per open slot, "
            f"MAX_TASK_RETRIES={limit}): " + ", ".join(f"{f['task']} ({f['infra_streak']})" for f in final)
            + f"; make mopup RUN={plan['run']} MAX_TASK_RETRIES={limit + 1} tries each once more"]


def describe_plan(plan: dict, state_dir: Path) -> str:
    lines = []
    n = len(plan["tasks"])
    if plan["mode"] == "none":
        final = " (final errors aside)" if plan.get("final_errors") else ""
        lines.append(f"nothing to retry in run '{plan['run']}': no task is errored (infra) or unfinished{final}."
                     if plan.get("n_attempts", 1) == 1 else
                     f"nothing to retry in run '{plan['run']}': every task's {plan['n_attempts']} attempt slots are "
                     f"settled (or decided by a verdict){final}.")
        return "\n".join(lines + final_errors_line(plan))
    k = plan.get("n_attempts", 1)
    if k == 1:
        lines.append(f"plan: retry {n} task(s) of job {plan['job_name']} ({plan['job_dir']})")
    else:
        lines.append(f"plan: run {plan['missing_attempts']} missing attempt(s) of {n} task(s) of job {plan['job_name']} "
                     f"({plan['job_dir']}); each task has {k} slots, its settled trials are never re-run")
    for t in plan["tasks"]:
        why = t.get("exception_type") or t.get("note") or "no result.json"
        where = ", ".join(str(d) for d in t["trial_dirs"] if d) or "-"
        if k == 1:
            lines.append(f"  {t['task']:<32} {t['outcome']:<10} {why:<28} {where}")
        else:
            lines.append(f"  {t['task']:<32} {t['missing']} of {k} missing  {t.get('slots', '')!s:<{k}}  {why:<28} {where}")
    lines += final_errors_line(plan)
    lines.append(f"why they errored, from their sandboxes' logs: make sandboxes RUN={plan['run']}")
    if plan["mode"] == "resume":
        lines.append("mechanism: resume the job in place (its frozen config matches what would run now)")
        if plan["archive"]:
            lines.append(f"first, move {len(plan['archive'])} trial dir(s) out of the job to {state_dir / 'archive' / plan['batch']}/:")
            for a in plan["archive"]:
                lines.append(f"  {a['src']}{'' if a['finished'] else '   (no result.json: harbor would delete it)'}")
        if plan.get("unreadable_job_result"):
            lines.append(f"{plan['unreadable_job_result']} is unreadable (harbor was killed writing it): "
                         "it goes to the archive too, and harbor writes a new one")
        if plan["concurrency"]:
            c = plan["concurrency"]
            was = c["from"] if c["lock_from"] in (None, c["from"]) else f"{c['from']} (lock.json: {c['lock_from']})"
            lines.append(f"n_concurrent_trials {was} -> {c['to']} in config.json and lock.json (backups in the archive)")
        if k > 1:
            lines.append(f"harbor runs {k} attempts of each task minus its finished trials left in the job: "
                         "exactly the missing ones")
        lines.append(f"new trials land in {plan['job_dir']}/<task>__<id>/")
    else:
        lines.append("mechanism: a standalone retry job, because resuming the job in place cannot work:"
                     if plan["why_not_resume"] else "mechanism: a standalone retry job (MOPUP_MODE=retry-job)")
        lines += [f"  - {b}" for b in plan["why_not_resume"]]
        if any(b.startswith("setting changed") for b in plan["why_not_resume"]):
            lines.append("note: these tasks run with today's settings; the rest of the run ran with the old ones")
        if k == 1:
            lines.append("nothing leaves any job; new trials land in "
                         f"{Path(plan['jobs_dir']) / plan['retry_job_name']}/<task>__<id>/")
        else:
            lines.append("one retry job per number of missing attempts m (harbor's -k m; 1 is its default, no flag); "
                         "nothing leaves any job; new trials land in:")
            for job in plan["retry_jobs"]:
                lines.append(f"  {Path(plan['jobs_dir']) / job['job_name']}/  -k {job['attempts']}: "
                             f"{', '.join(job['tasks'])}")
    for w in plan["warnings"]:
        lines.append(f"warning: {w}")
    return "\n".join(lines)


