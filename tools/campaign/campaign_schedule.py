"""make plan CAMPAIGN=<name>: the order and overlap of a campaign's servers and benches, for the
cheapest schedule that meets the campaign's DEADLINE, with server reuse and the sandbox budget in it.

Each run's length and sandbox spend are make plan's own estimate of it at the N_CONCURRENT it would
be benched with (tools/money/plan.py --own, through scripts/campaign.sh estimate: the model make print
and make reproduce state, fitted to the run's job dirs or the reference, docs/plan.md); a server's
price per hour is read off its owner's estimate (its spend less its sandboxes', over its wall-clock).
The schedule is the supervisor's own rule, played out on those lengths (campaign_supervisor): runs
start in the campaign's order once their trials fit what the running ones leave of the budget, a
group's server is launched for its first run and loads for READY_TIMEOUT (make plan's upper bound)
before any of them benches, and is stopped when its last run ends. The candidates are the budgets
from 1 to the campaign's (MAX_AT_ONCE, else the infra curve's): fewer trials at once lower the
infra rate and the sandboxes, and lengthen what every server bills. The cheapest at the median whose
p90 (every run at its p90 length, the plan's criterion) meets DEADLINE is recommended, else the
fastest, with how much it misses by. Nothing is launched or written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tools import fmt
from tools.campaign import campaign_plan, campaign_runs
from tools.campaign.campaign_file import CampaignError
from tools.campaign.campaign_plan import Resolved


@dataclass
class Timeline:
    budget: int
    n_concurrent: dict[str, int]
    starts: dict[str, float]
    ends: dict[str, float]
    servers: dict[str, tuple[float, float]]  # owner → (launched, stopped)

    @property
    def makespan(self) -> float:
        return max(self.ends.values(), default=0.0)


def simulate(r: Resolved, budget: int, alloc: dict, bench: dict[str, float], loading: float) -> Timeline:
    """The supervisor's rule on fixed bench lengths (seconds per run)."""
    order = [(g, info.run) for g in r.groups for info in g.runs]
    t, used, i = 0.0, 0, 0
    running: list[tuple[float, str, int, str]] = []
    starts, ends, launched, stopped = {}, {}, {}, {}
    while i < len(order) or running:
        while i < len(order):
            g, run = order[i]
            demand = alloc[run].demand
            if used + demand > budget and used > 0:
                break
            owner = g.owner.run
            launched.setdefault(owner, t)
            starts[run] = max(t, launched[owner] + loading)
            ends[run] = starts[run] + bench[run]
            running.append((ends[run], run, demand, owner))
            used += demand
            i += 1
        running.sort()
        t, run, demand, owner = running.pop(0)
        used -= demand
        group = r.group_of(run)
        if all(x in ends and ends[x] <= t for x in group.names):
            stopped[owner] = t
    return Timeline(budget, {run: a.n_concurrent for run, a in alloc.items()}, starts, ends,
                    {o: (launched[o], stopped.get(o, t)) for o in launched})


class Estimates:
    """make plan's estimate per (run, N_CONCURRENT), asked once each."""

    def __init__(self, repo: Path, r: Resolved, env: dict[str, str]):
        self.repo, self.r, self.env = repo, r, env
        self.docs = dict(r.estimates)

    def doc(self, run: str, nc: int) -> dict:
        if (run, nc) not in self.docs:
            self.docs[(run, nc)] = campaign_plan.estimate(self.repo, run, self.env, nc)
        doc = self.docs[(run, nc)]
        if "error" in doc:
            raise CampaignError(f"run {run} cannot be planned at N_CONCURRENT={nc}: {doc['error']} "
                                f"(make plan RUN={run} N_CONCURRENT={nc} says more)")
        return doc

    def bench_secs(self, run: str, nc: int, key: str) -> float:
        d = self.doc(run, nc)
        return max(0.0, d["own"][key] - d["loading_secs"])

    def sandbox_usd(self, run: str, nc: int) -> float:
        d = self.doc(run, nc)
        p = d["prices"]
        return d["own"]["sandbox_hours_median"] * (p["sandbox_usd_per_hour"] + p["exposed_port_usd_per_hour"])

    def server_usd_per_hour(self, owner: str, nc: int) -> float:
        d = self.doc(owner, nc)
        hours = d["own"]["wall_clock_median_secs"] / 3600
        return max(0.0, d["own"]["usd_median"] - self.sandbox_usd(owner, nc)) / hours if hours else 0.0

    def loading(self) -> float:
        return max(self.doc(i.run, int(i.settings["N_CONCURRENT"]))["loading_secs"] for i in self.r.runs)


def candidate(r: Resolved, est: Estimates, budget: int) -> dict:
    alloc = campaign_runs.allocate(r.groups, budget)
    loading = est.loading()
    median = simulate(r, budget, alloc, {run: est.bench_secs(run, a.n_concurrent, "wall_clock_median_secs")
                                         for run, a in alloc.items()}, loading)
    p90 = simulate(r, budget, alloc, {run: est.bench_secs(run, a.n_concurrent, "wall_clock_p90_secs")
                                      for run, a in alloc.items()}, loading)
    gpu = sum((end - start) / 3600 * est.server_usd_per_hour(owner, alloc[owner].n_concurrent)
              for owner, (start, end) in median.servers.items())
    sandboxes = sum(est.sandbox_usd(run, a.n_concurrent) for run, a in alloc.items())
    return {"budget": budget, "timeline": median, "p90_secs": p90.makespan, "usd": gpu + sandboxes,
            "gpu_usd": gpu, "sandbox_usd": sandboxes}


def choose(rows: list[dict], deadline: float | None) -> tuple[dict, str]:
    if deadline is None:
        best = min(rows, key=lambda row: (row["usd"], row["p90_secs"]))
        return best, "the cheapest (no DEADLINE in the campaign file)"
    meets = [row for row in rows if row["p90_secs"] <= deadline]
    if meets:
        best = min(meets, key=lambda row: (row["usd"], row["p90_secs"]))
        return best, f"the cheapest whose p90 meets DEADLINE={fmt.elapsed(deadline)}"
    best = min(rows, key=lambda row: (row["p90_secs"], row["usd"]))
    return best, (f"none meets DEADLINE={fmt.elapsed(deadline)} at p90: the fastest, which misses it by "
                  f"{fmt.elapsed(best['p90_secs'] - deadline)}")


def timeline_lines(r: Resolved, t: Timeline) -> list[str]:
    events = []
    for n, g in enumerate(r.groups, 1):
        start, end = t.servers[g.owner.run]
        s = g.owner.settings
        events.append((start, f"serve  server {n} ({s['SERVER']} on {s['SERVER_FLAVOR']}, owned by {g.owner.run}) "
                              f"until +{fmt.elapsed(end)}: {fmt.elapsed(end - start)} up, shared by {' '.join(g.names)}"))
        for run in g.names:
            events.append((t.starts[run], f"bench  {run} N_CONCURRENT={t.n_concurrent[run]} on server {n} until "
                                          f"+{fmt.elapsed(t.ends[run])} ({fmt.elapsed(t.ends[run] - t.starts[run])})"))
    return [f"  +{fmt.elapsed(at):>9}  {text}" for at, text in sorted(events, key=lambda e: e[0])]


def plan_lines(repo: Path, r: Resolved, env: dict[str, str]) -> list[str]:
    est = Estimates(repo, r, env)
    rows = [candidate(r, est, b) for b in range(1, r.budget + 1)]
    best, why = choose(rows, r.campaign.deadline_secs)
    out = [f"campaign {r.campaign.name}: {len(r.runs)} run(s) on {len(r.groups)} server(s); trials at once at most "
           f"{r.budget} ({r.budget_why})", "",
           "| MAX_AT_ONCE | N_CONCURRENT per run | wall-clock median | p90 | GPU $ | sandbox $ | total $ (median) |",
           "|---|---|---|---|---|---|---|"]
    for row in rows:
        t = row["timeline"]
        out.append(f"| {row['budget']} | {' '.join(f'{k}={v}' for k, v in t.n_concurrent.items())} | "
                   f"{fmt.elapsed(t.makespan)} | {fmt.elapsed(row['p90_secs'])} | {fmt.dollars(row['gpu_usd'])} | "
                   f"{fmt.dollars(row['sandbox_usd'])} | {fmt.dollars(row['usd'])} |")
    out += ["", f"recommended: MAX_AT_ONCE={best['budget']}, {why}: {fmt.dollars(best['usd'])} at the median, "
                f"{fmt.elapsed(best['timeline'].makespan)} (p90 {fmt.elapsed(best['p90_secs'])}). Its order and overlap:"]
    out += timeline_lines(r, best["timeline"])
    out += [f"note: {note}" for note in r.notes]
    out.append(f"set MAX_AT_ONCE={best['budget']} in campaigns/{r.campaign.name}.env, then make campaign "
               f"CAMPAIGN={r.campaign.name} DRY_RUN=1 shows every command. MAX_COST={r.campaign.max_cost:g} against "
               f"the median {fmt.dollars(best['usd'])}"
               + (": below it, the campaign would stop part-way" if r.campaign.max_cost < best["usd"] else "") + ".")
    return out
