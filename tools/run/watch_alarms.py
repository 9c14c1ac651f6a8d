"""make watch's alarms: what in a frame a person must act on, in plain words.

Each alarm names what is wrong and what to do: a stall, trials written where the run's job dirs
are not looked for, the sandboxes' infra errors above MAX_INFRA_RATE, the model server's errors,
paid GPUs idle, the spend projected past MAX_COST.
"""

from __future__ import annotations

from datetime import datetime

from tools import fmt
from tools import safe_read
from tools.results import slots
from tools.results import tally_trials
from tools.run import watch_frame
from tools.run.watch_frame import Frame


# The most replicas a recorded SERVER_DP is read as (HF's flavors hold at most 8 GPUs; a bigger
# or malformed figure in a hand-edited manifest is not a count).
MAX_REPLICAS = 64


def live_server(events: list[dict]) -> dict | None:
    """The run's server as the manifest last recorded it, when no server-stop of its job came after:
    {job_id, replicas (its SERVER_DP), flavor}; None when none is recorded live."""
    server = None
    for e in events:
        if e.get("event") == "serve" and isinstance(e.get("job_id"), str):
            recorded = e.get("settings") if isinstance(e.get("settings"), dict) else {}
            dp = tally_trials.count_of(_int_or_none(recorded.get("SERVER_DP", "1")), MAX_REPLICAS)
            server = {"job_id": e["job_id"], "replicas": dp or 1, "flavor": safe_read.printable(str(recorded.get("SERVER_FLAVOR", fmt.UNKNOWN)))[:40]}
        elif e.get("event") == "server-stop" and server and e.get("job_id") == server["job_id"]:
            server = None
    return server


def _int_or_none(value) -> int | None:
    """A setting's text as a whole number (the manifest records settings as strings), else None."""
    text = str(value)
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 3 else None


def governor_stopped(events: list[dict]) -> dict[int, str]:
    """{shard: the reason it was stopped} for the shards whose last governor decision stopped or
    parked them (tools/run/shard_run.py records each as governor-stop, governor-park, governor-start)."""
    out: dict[int, str] = {}
    for e in events:
        shard = e.get("shard")
        if not isinstance(shard, int) or isinstance(shard, bool):
            continue
        if e.get("event") in ("governor-stop", "governor-park"):
            out[shard] = safe_read.clip(safe_read.printable(str(e.get("reason", ""))), 200)
        elif e.get("event") == "governor-start":
            out.pop(shard, None)
    return out


def idle_gpus(f: Frame, events: list[dict]) -> list[str]:
    """The alarm for paid GPUs with no work: a server recorded live, the run not finished, and
    fewer trials running than its replicas (each trial holds at most one replica busy at a time),
    with the shards the governor stopped, so that an idle GPU is never silent."""
    server = live_server(events)
    if not server or f.finished or f.running >= server["replicas"]:
        return []
    idle = server["replicas"] - f.running
    stopped = governor_stopped(events)
    why = (f"; the governor stopped shard{'s' * (len(stopped) > 1)} {', '.join(map(str, sorted(stopped)))} "
           f"({stopped[max(stopped)]})" if stopped else "")
    return [f"paid GPUs idle: {f.running} trial(s) running on the {server['replicas']} replica(s) of server job "
            f"{safe_read.printable(server['job_id'])[:40]} ({server['flavor']}): at least {idle} replica(s) bill with no "
            f"trial{why}"]


def alarms(f: Frame, finished: list[tally_trials.Trial], settled_at: list[datetime], now: datetime, max_cost: float | None,
           max_infra_rate: float, foreign: list[str]) -> list[str]:
    """The alarms of a frame; `finished` are the trials with a usable end (timed_trials)."""
    out = []
    if not f.finished and settled_at:
        recent = sorted((t for t in finished if t.agent_seconds and slots.is_settled(t)),
                        key=lambda t: watch_frame.aware(t.finished_at))[-10:]
        slowest = max((t.agent_seconds for t in recent), default=None)
        quiet = (now - settled_at[-1]).total_seconds()
        if slowest and quiet > slowest:
            out.append(f"stalled: no trial has settled for {fmt.elapsed(quiet)}, longer than the slowest of the "
                       f"last {len(recent)} took ({fmt.elapsed(slowest)}): is harbor running, is the server up? "
                       f"(make status RUN={f.run})")
    for where in foreign:
        out.append(f"misplaced trials: {where} is a job of this run (its config.json names it) where the run's job "
                   f"dirs are not looked for: a resume writing there looks idle here (the reference lost 8 hours so); "
                   f"move it next to the others, or set JOBS_DIR")
    if f.sandbox_rate_hour is not None and f.sandbox_rate_hour > max_infra_rate:
        out.append(f"sandbox infra errors: {fmt.percent(f.sandbox_rate_hour)} of the trials that finished in the last hour, "
                   f"above {fmt.percent(max_infra_rate)} (MAX_INFRA_RATE): the sandboxes are strained by the trials at once; "
                   f"lower N_CONCURRENT (a sharded bench's governor interrupts a shard)")
    if f.server_hour:
        out.append(f"model-server errors: {f.server_hour} trial(s) in the last hour failed at the model server "
                   f"(env/outcome-policy.yaml infra.server_types): the server's problem, not load on the sandboxes; "
                   f"the governor does not act on them. Check it: make status RUN={f.run}, make logs RUN={f.run}")
    if max_cost and f.projected_usd is not None and f.projected_usd > max_cost:
        out.append(f"ceiling: the spend is projected to reach {fmt.dollars(f.projected_usd)} by the end, past MAX_COST "
                   f"{fmt.dollars(max_cost)}: the run will be stopped there")
    return out
