"""What a campaign resolves to before anything runs: its runs described, grouped by server, the
trials-at-once budget and each run's N_CONCURRENT within it.

The budget is the campaign file's MAX_AT_ONCE, else the largest number of trials at once whose
predicted sandbox infra rate stays at or under MAX_INFRA_RATE, on make plan's own infra curve
(tools/money/plan.py's JSON for each run, through scripts/campaign.sh estimate: the curve make plan
fits, whatever it is fitted to; the smallest over the campaign's runs, as the namespace is one).
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from tools import fmt
from tools.campaign import campaign_runs
from tools.campaign.campaign_file import Campaign, CampaignError
from tools.campaign.campaign_runs import Allocation, Group, RunInfo
from tools.money import plan_evidence

# The most trials at once the curve is searched to (make plan's own candidates stop at 8 a shard).
MOST_AT_ONCE = 1000


@dataclass
class Resolved:
    campaign: Campaign
    runs: list[RunInfo]
    groups: list[Group]
    budget: int
    budget_why: str
    alloc: dict[str, Allocation]
    notes: list[str] = field(default_factory=list)
    estimates: dict = field(default_factory=dict)  # (run, N_CONCURRENT) → make plan's JSON

    def info(self, run: str) -> RunInfo:
        return next(r for r in self.runs if r.run == run)

    def bench_settings(self, run: str, api_base: str) -> dict[str, str]:
        """What a run's make reproduce is told inside the campaign: the campaign's server, its share of the
        budget, and no ceiling of its own (MAX_COST empty). A run file's MAX_COST is for the run alone, paying
        its own server at its own N_CONCURRENT: at a smaller share it would refuse the run as below its median,
        and a shared server's bill would trip its owner's ceiling alone. Inside a campaign the one ceiling is
        the campaign's, over every run and server, and the supervisor enforces it (campaign_spend)."""
        return {"API_BASE": api_base, "N_CONCURRENT": str(self.alloc[run].n_concurrent), "MAX_COST": ""}

    def group_of(self, run: str) -> Group:
        return next(g for g in self.groups if run in g.names)


def estimate(repo: Path, run: str, env: dict[str, str], n_concurrent: int) -> dict:
    """make plan's JSON for `run` at `n_concurrent` (its own server and shards), or {"error": why}."""
    from tools.campaign.campaign_children import child_env  # noqa: PLC0415
    proc = subprocess.run([str(repo / "scripts" / "campaign.sh"), "estimate"], cwd=repo,
                          env=child_env(env, run, N_CONCURRENT=str(n_concurrent)), capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=600)
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        return {"error": lines[-1] if lines else f"exit {proc.returncode}"}
    return json.loads(proc.stdout)


def curve_budget(doc: dict, max_infra_rate: float) -> int:
    """The largest trials at once whose sandbox-side infra rate, on the plan's curve, is at most the rate."""
    c = doc["infra_curve"]
    curve = plan_evidence.InfraCurve(tuple(c["at_once"]), tuple(c["rates"]))
    ok = [n for n in range(1, MOST_AT_ONCE + 1) if float(curve(n)) <= max_infra_rate + 1e-9]
    return max(ok, default=1)


def default_budget(repo: Path, runs: list[RunInfo], env: dict[str, str], estimates: dict) -> tuple[int, str]:
    """The budget from make plan's infra curve of each run, the smallest; and the words that say why."""
    found = []
    for info in runs:
        nc = int(info.settings["N_CONCURRENT"])
        doc = estimates.setdefault((info.run, nc), estimate(repo, info.run, env, nc))
        if "error" in doc:
            continue
        rate = float(info.settings["MAX_INFRA_RATE"])
        found.append((curve_budget(doc, rate), rate, info.run, doc))
    if not found:
        raise CampaignError("no run of the campaign could be planned (make plan RUN=<run> says why), so no "
                            "sandbox budget can be read off the infra curve: set MAX_AT_ONCE=<trials at once> "
                            "in the campaign file")
    budget, rate, run, doc = min(found, key=lambda f: f[0])
    c = doc["infra_curve"]
    points = ", ".join(f"{fmt.percent(r)} at {a:g}" for a, r in zip(c["at_once"], c["rates"]))
    return budget, (f"MAX_AT_ONCE not set: the largest trials at once whose predicted sandbox infra rate stays at or "
                    f"under MAX_INFRA_RATE={rate:g}, on make plan's infra curve for {run} ({points}; fitted to "
                    f"{doc['evidence']['source']})")


def resolve(repo: Path, campaign: Campaign, env: dict[str, str], recorded: dict | None = None) -> Resolved:
    """The campaign's runs, groups, budget and split (a run already started keeps the N_CONCURRENT
    campaign.json recorded for it, so a resume never changes a run under way)."""
    runs = []
    for run in campaign.runs:
        try:
            runs.append(campaign_runs.describe(repo, run, env))
        except campaign_runs.DescribeError as e:
            raise CampaignError(f"campaign {campaign.name}: run {run} is refused: {e}") from None
    groups = campaign_runs.group(runs)
    estimates: dict = {}
    if campaign.max_at_once:
        budget, why = campaign.max_at_once, f"MAX_AT_ONCE={campaign.max_at_once} (campaigns/{campaign.name}.env)"
    else:
        budget, why = default_budget(repo, runs, env, estimates)
    try:
        alloc = campaign_runs.allocate(groups, budget)
    except campaign_runs.BudgetError as e:
        raise CampaignError(str(e)) from None
    for run, record in (recorded or {}).get("runs", {}).items():
        if run in alloc and record.get("status") != "pending" and isinstance(record.get("n_concurrent"), int):
            if record["n_concurrent"] != alloc[run].n_concurrent:
                alloc[run].note = f"N_CONCURRENT {record['n_concurrent']}, as it was started with (campaign.json)"
                alloc[run].n_concurrent = record["n_concurrent"]
    return Resolved(campaign, runs, groups, budget, why, alloc, campaign_runs.separate_notes(groups), estimates)
