"""The campaign's one ceiling: the spend of every run and every server, summed, against MAX_COST.

Each run's spend is what make cost says it cost, measured by the code that enforces a run's own
MAX_COST (tools/money/cost_ceiling.py measure: every job of the run's manifest and labels, its
sandboxes, priced from hf jobs hardware). A shared server is its owner run's job (labelled
run=<owner>), so it is counted once, in its owner's spend; a run benched on it adds its sandboxes.
The campaign "would pass" its ceiling when the sum plus what every billing job burns until the
next check passes MAX_COST (cost_ceiling.would_pass's rule, over the sum).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tools import safe_read
from tools.campaign.campaign_runs import INSTANCE_RE, RunInfo, recorded_instance
from tools.money import cost_ceiling
from tools.money import cost_hf


@dataclass
class CampaignSpend:
    spent_usd: float
    burn_usd_per_hour: float
    per_run: dict[str, float]
    unknown: list[str] = field(default_factory=list)

    def projected(self, poll_s: float) -> float:
        return self.spent_usd + self.burn_usd_per_hour * poll_s / 3600


def scope_of(info: RunInfo, state_root: Path, notes: list[str] | None = None) -> cost_ceiling.Scope:
    """The run's scope as scripts/lib-run.sh cost_scope_json builds it (its instance read from its state).

    An instance that is not 16 hex digits (state/<run>/instance, or the one the run was described with) is
    left out, with a note in `notes`: the run's jobs are then found by their other labels."""
    instance = info.instance if INSTANCE_RE.fullmatch(info.instance or "") else None
    if info.instance and instance is None and notes is not None:
        notes.append(f"{info.run}: its instance '{safe_read.clip(safe_read.printable(info.instance), 40)}' is not a "
                     "run instance id (16 hex digits): left out")
    recorded, problem = recorded_instance(info.state_dir)
    if problem and notes is not None:
        notes.append(f"{info.run}: {problem}: left out")
    instance = recorded or instance
    age = info.settings.get("PRICES_MAX_AGE") or "86400"
    return cost_ceiling.Scope(run=info.run, state_dir=Path(info.state_dir), jobs_dir=info.jobs_dir,
                              job_name=info.settings["JOB_NAME"], namespace=info.settings.get("HF_NAMESPACE") or None,
                              project_label=info.project_label, instance=instance or None,
                              verdicts=info.verdicts or None, prices_cache=state_root / "prices.json",
                              prices_max_age=float(age))


def measure(runs: list[RunInfo], state_root: Path, hf=None) -> CampaignSpend:
    """Every run's spend now, summed; a run whose spend cannot be asked is said, and left out (the
    ceiling is then a lower bound, as a run's own is)."""
    hf = hf or cost_hf.LiveHf()
    spent = burn = 0.0
    per_run, unknown = {}, []
    for info in runs:
        try:
            s = cost_ceiling.measure(hf, scope_of(info, state_root, unknown))
        except (cost_hf.HfFailed, OSError, Exception) as e:  # noqa: BLE001  a watch never dies on a measure
            unknown.append(f"{info.run}: {str(e)[:200]}")
            continue
        per_run[info.run] = round(s.spent_usd, 4)
        spent += s.spent_usd
        burn += s.burn_usd_per_hour
        unknown += [f"{info.run}: {u}" for u in s.unknown]
    return CampaignSpend(round(spent, 4), round(burn, 4), per_run, unknown)


def would_pass(spend: CampaignSpend, ceiling: float, poll_s: float) -> bool:
    return spend.projected(poll_s) > ceiling
