"""cost_sandboxes: which HF sandbox jobs a run's own trials prove theirs (make cost, MAX_COST, make watch).

HF labels a sandbox hf-sandbox=1, hf-sandbox-mode=dedicated and a random hf-sandbox-nonce, nothing
more (huggingface_hub 2.4.0 Sandbox.create; harbor 0.26.0's hf-sandbox environment passes no labels
of its own): a sandbox names neither its run nor its trial, and any run in the namespace makes
them. Counting every sandbox created while a run's harbor ran made eight sandboxes of another run
stop a run far below its MAX_COST. So a run counts a sandbox only when one of its own trial dirs
(the tally's, and mop-up's archive) proves it (docs/cost.md §5):

  - its result.json records a SandboxError huggingface_hub raised about the job Sandbox.create had
    just started ("Sandbox job <id> terminated during startup" / "did not become ready" / "runs
    sbx-server protocol", "Job <id> does not expose the sandbox server port"): that job, outright;
  - else each sandbox the trial created: one per "Creating HF Sandbox: image=…, flavor=…,
    idle_timeout=…, namespace=…" line of its trial.log (harbor's hf_sandbox logs it at DEBUG, which
    trial.log records, just before each Sandbox.create; harbor 0.25.0's line ends at idle_timeout),
    or one when its config is harbor's hf-sandbox environment and its log does not say (an older
    harbor), none for another environment. Each is matched to a sandbox created while the trial
    set up its environment (its result.json's environment_setup; a trial with no result.json yet:
    since harbor wrote its dir), of that image and flavor when the log names them, and of that
    namespace when the log or the trial's config names one (--ek namespace=, which the sandbox is
    run and billed under: a sandbox of another namespace is never the trial's): the sandbox created
    nearest the trial's start first, one sandbox to one trial at most, so a run never counts more
    sandboxes than its trials created.

Every other sandbox created while the run ran (while one of its trials ran, or since the harbor
running now started) is another's: counted nowhere, and how many is said.

Jobs are cost_hf.normalise_job's dicts (id, created_at, image, space, flavor, namespace).
"""

from __future__ import annotations

import bisect
import os
import re
import stat
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from tools import safe_read
from tools.results import tally_trials

# A sandbox is created while its trial sets up its environment; the job's created_at and the
# trial's clock (another machine's) may disagree by a little.
SLACK_SECS = 30

# harbor 0.26.0 adds ", namespace=<ns>" (None: the token owner's account) to harbor 0.25.0's line.
SANDBOX_CREATED = re.compile(
    r"^Creating HF Sandbox: image=([^\s,]{1,300}), flavor=([A-Za-z0-9._-]{1,60}), idle_timeout=[^\s,]{0,40}"
    r"(?:, namespace=([A-Za-z0-9._-]{1,100}))?$", re.MULTILINE)
# What harbor logs for a sandbox created under the token owner's own account (no --ek namespace).
NO_NAMESPACE = "None"
# huggingface_hub 2.4.0's SandboxErrors about the job Sandbox.create has just started (_find_server_url,
# _SandboxServer.wait_ready, _check_server_protocol): each names it.
SANDBOX_NAMED = re.compile(r"(?:Sandbox job ([A-Za-z0-9_-]{1,100}) (?:terminated during startup|did not become "
                           r"ready|runs sbx-server protocol)|Job ([A-Za-z0-9_-]{1,100}) does not expose the sandbox "
                           r"server port)")
# How a Space is named as an image (huggingface_hub 2.4.0 _jobs_api._SPACE_IMAGE_PREFIXES): the job then
# carries space_id, not docker_image.
SPACE_IMAGE_PREFIXES = ("https://huggingface.co/spaces/", "https://hf.co/spaces/", "huggingface.co/spaces/",
                        "hf.co/spaces/")
# Bytes of trial.log read, every poll, for every trial: the environment starts first, so its line is
# the log's first (a real harbor trial's, tests/test_cost.py).
LOG_HEAD = 64 * 1024
# A trial starts at most two environments (harbor 0.26.0 trial.py: the agent's, and a separate
# verifier's): more "Creating HF Sandbox" lines than that are not harbor's and claim nothing.
SANDBOXES_PER_TRIAL = 2


def trial_time(value: Any) -> datetime | None:
    """A trial's time (harbor writes UTC ISO-8601), through the tally's own reading; else None."""
    return tally_trials.parse_timestamp(value)[0] if isinstance(value, str) else None


@dataclass
class Slot:
    """One sandbox a trial created: when it was created (lo..hi; hi None: the trial runs now), and
    its image and flavor when the trial's log names them."""

    trial: str
    lo: datetime
    hi: datetime | None
    anchor: datetime  # when the trial began to set it up: the nearest sandbox is taken first
    when: str  # for found_by: "while it set up its environment", …
    image: str | None
    flavor: str | None
    namespace: str | None = None  # the namespace the sandbox runs under, when the log or config names one


@dataclass
class Claim:
    """What one of the run's trial dirs proves about the sandboxes it created."""

    trial: str  # <job dir name>/<trial dir name>
    task: str
    span: tuple[datetime, datetime | None]  # when it ran, slack included: "while the run ran"
    slots: list[Slot]
    job_ids: list[str]  # sandbox jobs its result.json names
    attempt: str | None = None  # its result.json's id: one attempt, whichever dir holds it


def written_at(trial_dir: str, names: tuple[str, ...]) -> list[datetime]:
    """When each of these files of the trial dir was last written (regular files only)."""
    out = []
    for name in names:
        try:
            st = os.lstat(os.path.join(trial_dir, name))
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and 0 < st.st_mtime < 1e11:
            out.append(datetime.fromtimestamp(st.st_mtime, timezone.utc))
    return out


def sandbox_creations(trial_dir: str) -> list[tuple[str, str, str | None]]:
    """[(image, flavor, namespace or None)] of the "Creating HF Sandbox" lines at the start of the
    trial's trial.log; the namespace is None when the line names none (harbor 0.25.0, or None)."""
    try:
        text = safe_read.read_regular(os.path.join(trial_dir, "trial.log"), LOG_HEAD, "a trial.log", head=True)
    except (OSError, safe_read.Unreadable):
        return []
    found = SANDBOX_CREATED.findall(text.decode("utf-8", "replace"))[:SANDBOXES_PER_TRIAL]
    return [(image, flavor, ns if ns and ns != NO_NAMESPACE else None) for image, flavor, ns in found]


def configured_namespace(config: Any) -> str | None:
    """The namespace a trial's config runs its hf-sandbox under (--ek namespace=), or None."""
    env = config.get("environment") if isinstance(config, dict) else None
    kwargs = env.get("kwargs") if isinstance(env, dict) else None
    ns = kwargs.get("namespace") if isinstance(kwargs, dict) else None
    return ns if isinstance(ns, str) and re.fullmatch(r"[A-Za-z0-9._-]{1,100}", ns) else None


def makes_hf_sandboxes(config: Any) -> bool:
    """Whether a trial's config runs harbor's hf-sandbox environment; no config to say: taken as yes."""
    env = config.get("environment") if isinstance(config, dict) else None
    if not isinstance(env, dict):
        return True
    # harbor's EnvironmentFactory prefers import_path to type: another class (its log says if it made one).
    return env.get("import_path") is None and env.get("type") == "hf-sandbox"


def named_sandbox(result: dict) -> list[str]:
    """The sandbox job a SandboxError of the trial's result.json names, if any."""
    info = result.get("exception_info") if isinstance(result.get("exception_info"), dict) else {}
    message = info.get("exception_message")
    if info.get("exception_type") != "SandboxError" or not isinstance(message, str):
        return []
    m = SANDBOX_NAMED.match(message)
    return [m.group(1) or m.group(2)] if m else []


def trial_claim(trial_dir: str, trial: str, task: str, running_since: datetime | None) -> Claim | None:
    """The trial's claim, from its result.json (its times, a named sandbox), trial.log (each sandbox
    it created) and config; None when nothing in it says when it ran."""
    slack = timedelta(seconds=SLACK_SECS)
    try:
        result = safe_read.read_json_object(os.path.join(trial_dir, "result.json"))
    except (OSError, safe_read.Unreadable, ValueError):
        result = {}
    config = result.get("config")
    if not isinstance(config, dict):
        try:
            config = safe_read.read_json_object(os.path.join(trial_dir, "config.json"), what="a config.json")
        except (OSError, safe_read.Unreadable, ValueError):
            config = None
    made = sandbox_creations(trial_dir)
    each = 1 if makes_hf_sandboxes(config) else 0
    started = trial_time(result.get("started_at"))
    if started:
        finished = trial_time(result.get("finished_at"))
        span = (started - slack, finished + slack if finished else None)
        env = result.get("environment_setup") if isinstance(result.get("environment_setup"), dict) else {}
        setup, setup_end = trial_time(env.get("started_at")), trial_time(env.get("finished_at")) or finished
        if setup:
            first = (setup - slack, setup_end + slack if setup_end else None, setup, "while it set up its environment")
        else:  # its environment never started: a sandbox only if its log says so
            first, each = (*span, started, "while it ran"), 0
        job_ids = named_sandbox(result)
    else:
        # No result.json yet (running, or stopped mid-trial): from when harbor wrote its dir, to
        # now if the harbor running now started it, else to the last write of its files.
        written = written_at(trial_dir, ("lock.json", "config.json", "trial.log", "exception.txt"))
        begun = min(written_at(trial_dir, ("lock.json", "config.json")) or written, default=None)
        if begun is None:
            return None
        running = running_since is not None and begun >= running_since - slack
        span = (begun - slack, None if running else max(written) + slack)
        first, job_ids = (*span, begun, "since it began (it has no result.json yet)"), []
    wanted = made or [(None, None, None)] * each
    namespace = configured_namespace(config)
    slots = [Slot(trial, *(first if i == 0 else (*span, span[0], "while it ran")), image, flavor, ns or namespace)
             for i, (image, flavor, ns) in enumerate(wanted)]
    attempt = result.get("id") if isinstance(result.get("id"), str) else None
    return Claim(trial, task, span, slots, job_ids, attempt)


def archived_trials(state_dir: Path) -> list[tuple[str, str]]:
    """[(trial dir, <job>/<trial>)] of mop-up's archive (state/<run>/archive/<batch>/<job>/<trial>):
    trials of the run moved aside before a retry, whose sandboxes the run paid for. No link followed."""
    out = []
    for batch in _subdirs(state_dir / "archive"):
        for job in _subdirs(batch):
            try:
                trials, _, _ = safe_read.trial_dir_entries(str(job))
            except safe_read.Unreadable:
                continue
            out += [(t, f"{job.name}/{os.path.basename(t)}") for t in trials]
    return out


def _subdirs(path: Path) -> list[Path]:
    try:
        with os.scandir(path) as it:
            return sorted(Path(e.path) for e in it if e.is_dir(follow_symlinks=False))
    except OSError:
        return []


def run_claims(report: dict, state_dir: Path | None, running_since: datetime | None = None) -> list[Claim]:
    """A claim for every attempt of the run: the tally's trial dirs (the attempts harbor retried in the
    run, kept under .retried/, among them), and mop-up's archive. One attempt claims once, whichever
    of its dirs is read first (an attempt harbor kept in its job and a copy of it kept by a harbor
    stopped before its job's end have one result id: one claim, never two sandboxes for it)."""
    dirs = [(t["trial_dir"], f"{os.path.basename(t['job_dir'])}/{os.path.basename(t['trial_dir'])}", e["task"])
            for e in report.get("per_task", []) for t in e.get("trials", [])]
    if state_dir is not None:
        dirs += [(d, name, os.path.basename(d).rsplit("__", 1)[0]) for d, name in archived_trials(state_dir)]
    claims, seen = [], set()
    for d, name, task in dirs:
        claim = trial_claim(d, name, task, running_since)
        if claim is None or (claim.attempt is not None and claim.attempt in seen):
            continue
        seen.add(claim.attempt)
        claims.append(claim)
    return claims


def fits(slot: Slot, job: dict) -> bool:
    """The job could be the slot's sandbox: created in its window, with its image and flavor if known."""
    c = job["created_at"]
    if c is None or c < slot.lo or (slot.hi is not None and c > slot.hi):
        return False
    if slot.flavor is not None and job["flavor"] != slot.flavor:
        return False
    if slot.namespace is not None and job["namespace"] is not None and job["namespace"] != slot.namespace:
        return False
    if slot.image is None or job["image"] == slot.image:
        return True
    return bool(job["space"]) and any(slot.image == p + job["space"] for p in SPACE_IMAGE_PREFIXES)


@dataclass
class Attribution:
    mine: list[tuple[dict, Claim, str]]  # (sandbox job, the trial that proves it, how)
    others: list[dict]  # sandboxes created while the run ran that no trial of it proves its own


def attribute(jobs: list[dict], claims: list[Claim], *, since: datetime | None = None,
              until: datetime | None = None) -> Attribution:
    """Which sandbox jobs are the run's (the module's docstring). `since`: harbor runs from then on,
    so a sandbox created since is among those said; `until`: those created later are too new to
    be said to be another's (the trial that made one may postdate the read of the trial dirs)."""
    by_id = {j["id"]: j for j in jobs}
    taken: set[str] = set()
    mine: list[tuple[dict, Claim, str]] = []
    free = {id(s): s for c in claims for s in c.slots}
    for c in claims:
        for jid in c.job_ids:
            if jid in by_id and jid not in taken:
                taken.add(jid)
                left = [s for s in c.slots if id(s) in free]
                used = next((s for s in left if fits(s, by_id[jid])), left[0] if left else None)
                if used is not None:
                    del free[id(used)]
                mine.append((by_id[jid], c, f"trial {c.trial}: its result.json names this sandbox job (SandboxError)"))
    dated = sorted((j for j in jobs if j["created_at"] and j["id"] not in taken), key=lambda j: j["created_at"])
    times = [j["created_at"] for j in dated]
    pairs = []
    for s in free.values():
        first = bisect.bisect_left(times, s.lo)
        last = bisect.bisect_right(times, s.hi) if s.hi is not None else len(times)
        pairs += [(abs((job["created_at"] - s.anchor).total_seconds()), s.trial, job["id"], id(s), s, job)
                  for job in dated[first:last] if fits(s, job)]
    claim_of = {id(s): c for c in claims for s in c.slots}
    # Nearest first; equal distances by trial and job name, so the answer never depends on order read.
    for _, _, jid, sid, s, job in sorted(pairs, key=lambda p: p[:3]):
        if jid in taken or sid not in free:
            continue
        taken.add(jid)
        del free[sid]
        what = f", image {s.image}, flavor {s.flavor} (its trial.log)" if s.image else ""
        mine.append((job, claim_of[sid], f"trial {s.trial}: created {s.when}{what}"))
    during = while_any([c.span for c in claims] + ([(since, None)] if since else []))
    others = [j for j in dated if j["id"] not in taken and (until is None or j["created_at"] <= until)
              and during(j["created_at"])]
    return Attribution(mine, others)


def while_any(spans: list[tuple[datetime, datetime | None]]):
    """A test of whether a time falls in one of the spans (hi None: still open): the spans merged
    and searched by bisection, so thousands of sandboxes against thousands of trials stay cheap."""
    merged: list[list] = []
    for lo, hi in sorted(spans, key=lambda sp: sp[0]):
        if merged and (merged[-1][1] is None or lo <= merged[-1][1]):
            merged[-1][1] = None if hi is None or merged[-1][1] is None else max(hi, merged[-1][1])
        else:
            merged.append([lo, hi])
    starts = [lo for lo, _ in merged]

    def test(t: datetime) -> bool:
        i = bisect.bisect_right(starts, t) - 1
        return i >= 0 and (merged[i][1] is None or t <= merged[i][1])
    return test


def unattributed_note(names: list[str], counted_in: str = "") -> str:
    """The one line that says how many sandboxes created while the run ran are not counted."""
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return (f"{len(names)} sandbox(es) created while the run ran could not be attributed to it: not counted"
            f"{counted_in} ({shown}; no trial of the run names or matches them: docs/cost.md §5)")
