"""sandbox_curve: the namespace's sandbox budget as make calibrate-sandboxes measured it, read with limits
and fitted the way make plan fits the reference (docs/sandbox-calibration.md).

make calibrate-sandboxes writes <state>/namespaces/<namespace>/sandbox-curve.json: per level of trials at
once, the trials that finished and how many of them ended in a sandbox-side infra error (the outcome
policy's infra_side). make plan then fits p_sandbox(C) through those points instead of the reference's
anecdotes (plan_evidence.fit_curve): the same form, piecewise-linear, flat outside its points, with these
limits, so that a few trials never make a curve the data do not show:

- each level's rate is (errors + 1/2) / (trials + 1), the add-half estimate: 0 errors of 8 trials is not
  0% (nothing shows the sandboxes never fail), 8 of 8 not 100%;
- a level with fewer than MIN_LEVEL_TRIALS finished trials is left out, and so is the whole file when
  no level is left; two levels that ran as many trials at once count as one;
- the rate never falls as the load grows: each point is at least the one below it (a running maximum:
  more trials at once never strain the sandboxes less, so a dip is read as noise, on the safe side);
- a ladder that stopped below the reference's highest point (70% at 8) keeps that point above its own,
  raised to its top rate when that is higher: past what was measured, the reference is all that is known;
- the run's own job dirs, when they hold finished trials at a known load, add their point (theirs wins
  at the same load), as they do to the reference's.

Everything in the file is data with limits (docs/design.md decision 22): a regular file of at most
CURVE_CAP, a JSON object of this kind and version, at most MAX_LEVELS levels, counts whole and in range,
names printable and short. A file that fails is named in the plan's notes and not used, never trusted.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tools import fmt
from tools import safe_read
from tools import settings_rules
from tools.money import cost_hf
from tools.money import plan_evidence
from tools.results import tally_trials

KIND = "sandbox-curve"
VERSION = 1
CURVE_CAP = 1 << 20         # a ladder of a few levels is a few KiB; 32 levels of 1,000 start times each fit
MAX_LEVELS = settings_rules.SANDBOX_MAX_LEVELS  # what SANDBOX_LEVELS may hold, checked by every verb
LEVEL_CAP = 1000            # trials at once of one level (SANDBOX_LEVELS' own bound)
TRIALS_CAP = 100_000        # finished trials of one level
MIN_LEVEL_TRIALS = 1
TEXT_CAP = 200


@dataclass(frozen=True)
class Level:
    at_once: int     # trials at once the level ran (its -n, at most its trials)
    trials: int      # finished trials, interruptions left out
    errors: int      # of them, sandbox-side infra errors

    @property
    def measured(self) -> float:
        return self.errors / self.trials

    @property
    def estimate(self) -> float:
        return (self.errors + 0.5) / (self.trials + 1)


@dataclass(frozen=True)
class Measured:
    path: str
    measured_at: str
    run: str
    namespace: str
    env_type: str
    sandbox_flavor: str
    levels: tuple[Level, ...]


class BadCurve(Exception):
    """Why a sandbox-curve.json is not used, in a phrase."""


def _text(doc: dict, key: str) -> str:
    value = doc.get(key)
    if not isinstance(value, str) or not value or len(value) > TEXT_CAP or safe_read.printable(value) != value:
        raise BadCurve(f"{key} is not a short line of printable text")
    return value


def _count(value, cap: int, what: str) -> int:
    n = tally_trials.count_of(value, cap)
    if n is None:
        raise BadCurve(f"{what} is not a whole number from 0 to {cap:,}")
    return n


def parse(doc, path: str) -> Measured:
    """The file's document as a Measured, or BadCurve naming the first thing wrong with it."""
    if not isinstance(doc, dict) or doc.get("kind") != KIND:
        raise BadCurve(f"not a {KIND} (its kind is not {KIND!r})")
    if doc.get("version") != VERSION:
        raise BadCurve(f"version {safe_read.clip(repr(doc.get('version')), 20)}, not {VERSION}")
    raw = doc.get("levels")
    if not isinstance(raw, list) or len(raw) > MAX_LEVELS:
        raise BadCurve(f"levels is not a list of at most {MAX_LEVELS}")
    levels: dict[int, Level] = {}
    for i, item in enumerate(raw, 1):
        if not isinstance(item, dict):
            raise BadCurve(f"level {i} is not an object")
        at_once = _count(item.get("at_once"), LEVEL_CAP, f"level {i}'s at_once")
        trials = _count(item.get("trials"), TRIALS_CAP, f"level {i}'s trials")
        errors = _count(item.get("sandbox_errors"), TRIALS_CAP, f"level {i}'s sandbox_errors")
        if errors > trials:
            raise BadCurve(f"level {i} has more sandbox errors ({errors}) than trials ({trials})")
        if at_once < 1 or trials < MIN_LEVEL_TRIALS:
            continue
        # Two levels that ran as many trials at once (a dataset with fewer tasks than a level: harbor ran
        # them all at once) are one measurement of that load.
        same = levels.get(at_once, Level(at_once, 0, 0))
        levels[at_once] = Level(at_once, same.trials + trials, same.errors + errors)
    if not levels:
        raise BadCurve("no level with a trial at one or more trials at once")
    return Measured(path, _text(doc, "measured_at"), _text(doc, "run"), _text(doc, "namespace"),
                    _text(doc, "env_type"), _text(doc, "sandbox_flavor"), tuple(levels[c] for c in sorted(levels)))


def read(path: Path | None, env_type: str, sandbox_flavor: str) -> tuple[Measured | None, str | None]:
    """(the measured curve, None) when the file holds one for this environment and flavor; (None, a note
    saying why not) when it exists and is not used; (None, None) when there is none."""
    if path is None:
        return None, None
    shown = safe_read.clip(safe_read.printable(cost_hf.rel(path)), TEXT_CAP)
    try:
        doc = safe_read.parse_json(safe_read.read_regular(path, CURVE_CAP, what="a sandbox curve"))
        measured = parse(doc, shown)
    except FileNotFoundError:
        return None, None
    except (OSError, safe_read.Unreadable, BadCurve) as e:
        return None, (f"the sandbox curve {shown} is not used: {safe_read.clip(str(e), 160)}; the reference's "
                      f"anecdotes are (run make calibrate-sandboxes again, or remove the file)")
    if measured.env_type != env_type or measured.sandbox_flavor != sandbox_flavor:
        return None, (f"the sandbox curve {shown} is not used: it was measured on {measured.env_type} "
                      f"({measured.sandbox_flavor}), and this run's sandboxes are {env_type} ({sandbox_flavor}); "
                      f"the reference's anecdotes are (make calibrate-sandboxes measures this one)")
    return measured, None


def fit(measured: Measured, evidence: plan_evidence.Evidence | None = None) -> plan_evidence.InfraCurve:
    """p_sandbox(C) through the measured levels (module docstring: the limits), in make plan's form."""
    points = {float(lv.at_once): lv.estimate for lv in measured.levels}
    if (evidence is not None and evidence.reference is None and evidence.sandbox_rate is not None
            and evidence.at_once is not None):
        points[float(evidence.at_once)] = evidence.sandbox_rate  # the run's own load wins at its load
    top = max(points)
    if top < plan_evidence.REFERENCE_HIGH_AT_ONCE:
        points[float(plan_evidence.REFERENCE_HIGH_AT_ONCE)] = plan_evidence.REFERENCE_HIGH_INFRA
    at_once, rates, highest = [], [], 0.0
    for c in sorted(points):
        highest = max(highest, points[c])
        at_once.append(c)
        rates.append(min(1.0, highest))
    return plan_evidence.InfraCurve(tuple(at_once), tuple(rates))


def words(measured: Measured | None) -> str:
    """The plan's line on the sandbox budget: measured, or the reference's anecdotes."""
    if measured is None:
        low_n, low_d = plan_evidence.REFERENCE_LOW_INFRA
        return (f"sandbox budget: the reference's anecdotes ({fmt.share(low_n, low_d)} at "
                f"{plan_evidence.REFERENCE_LOW_AT_ONCE}, about {plan_evidence.REFERENCE_HIGH_INFRA:.0%} at "
                f"{plan_evidence.REFERENCE_HIGH_AT_ONCE}; docs/reference-runs.md): make calibrate-sandboxes measures "
                f"this namespace's")
    date = measured.measured_at[:10]
    levels = ", ".join(f"{fmt.share(lv.errors, lv.trials)} at {lv.at_once}" for lv in measured.levels)
    top = measured.levels[-1].at_once
    past = (f"; above {top}, toward the reference's {plan_evidence.REFERENCE_HIGH_INFRA:.0%} at "
            f"{plan_evidence.REFERENCE_HIGH_AT_ONCE} (the ladder went no higher)"
            if top < plan_evidence.REFERENCE_HIGH_AT_ONCE else "")
    return (f"sandbox budget: measured by make calibrate-sandboxes on {date}: {levels} "
            f"(namespace {measured.namespace}, {measured.sandbox_flavor}, run {measured.run}; {measured.path}){past}")


def describe(measured: Measured | None) -> dict:
    """The JSON plan's account of it."""
    if measured is None:
        return {"source": "reference", "line": words(None)}
    return {"source": "measured", "line": words(measured), "path": measured.path, "measured_at": measured.measured_at,
            "namespace": measured.namespace, "levels": [{"at_once": lv.at_once, "trials": lv.trials,
                                                        "sandbox_errors": lv.errors,
                                                        "rate": round(lv.measured, 4),
                                                        "fitted": round(lv.estimate, 4)} for lv in measured.levels]}
