"""tally_policy: what a trial means: the outcome policy (env/outcome-policy.yaml), manual
verdicts, and the classification of a finished trial under them.

`load_policy` reads and checks the policy file (every problem names the file and the key),
`classify` gives a trial its (outcome, rule, reason), `infra_side` and `count_sides` say which
side an infra error is on, `retry_include` which types harbor may retry inside a run, and
`load_verdicts` reads a run's manual verdicts. The policy is the one file tally and mop-up both
read (docs/design.md decision 9). Bad input raises TallyError with the fix in its message.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from tools import safe_read
from tools.results import slots
from tools.results.tally_jobs import TallyError
from tools.results.tally_trials import Trial

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_POLICY = REPO_ROOT / "env" / "outcome-policy.yaml"


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
    import yaml  # noqa: PLC0415  (only the tools that read a policy or verdicts need it: make print's estimate does not)

    try:
        return yaml.safe_load(safe_read.read_regular(path, safe_read.RESULT_CAP, "a YAML file").decode("utf-8"))
    except FileNotFoundError:
        raise TallyError(f"{where}: file not found ({fix})")
    except safe_read.Unreadable as e:
        raise TallyError(f"{where}: {e} ({fix})")
    except UnicodeDecodeError as e:
        raise TallyError(f"{where}: not UTF-8 text (byte at offset {e.start}); save it as UTF-8")
    except (OSError, yaml.YAMLError) as e:
        raise TallyError(f"{where}: cannot read it as YAML: {safe_read.clip(str(e), 300)}")


_POLICY_KEYS = {"pass_threshold", "infra", "timeouts", "limits", "nonzero_exit"}


def load_policy(path: str | os.PathLike = DEFAULT_POLICY) -> Policy:
    """Read and validate the outcome policy; every problem names the file and the key."""
    path = Path(path)
    where = f"policy {path}"
    doc = _policy_doc(path, where)
    threshold = doc.get("pass_threshold", 1.0)
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 < threshold <= 1:
        raise TallyError(f"{where}: pass_threshold must be a number in (0, 1], got {threshold!r}")
    infra = _section(doc, where, "infra", {"types", "message_patterns", "server_types", "interrupted_types"})
    timeouts = _section(doc, where, "timeouts", {"types"})
    limits = _section(doc, where, "limits", {"types"})
    nonzero = _section(doc, where, "nonzero_exit", {"types", "limit_message_patterns"})
    infra_types = _type_names(infra, "types", f"{where}: infra.types")
    timeout_types, limit_types, nonzero_types = (
        _type_names(timeouts, "types", f"{where}: timeouts.types"), _type_names(limits, "types", f"{where}: limits.types"),
        _type_names(nonzero, "types", f"{where}: nonzero_exit.types"))
    _check_classes(where, infra_types, timeout_types, limit_types, nonzero_types)
    server_types, interrupted_types = _sides(infra, where, infra_types)
    return Policy(
        path=str(path),
        pass_threshold=float(threshold),
        infra_types=infra_types,
        infra_patterns=_patterns(infra, "message_patterns", f"{where}: infra.message_patterns"),
        timeout_types=frozenset(timeout_types),
        limit_types=frozenset(limit_types),
        nonzero_exit_types=frozenset(nonzero_types),
        nonzero_limit_patterns=_patterns(nonzero, "limit_message_patterns", f"{where}: nonzero_exit.limit_message_patterns"),
        server_types=frozenset(server_types),
        interrupted_types=frozenset(interrupted_types),
    )


def _policy_doc(path: Path, where: str) -> dict:
    """The policy file as a mapping of known keys (a typo would silently drop a rule)."""
    doc = _read_yaml(path, where, f"pass --policy, default {DEFAULT_POLICY}")
    if not isinstance(doc, dict):
        raise TallyError(f"{where}: expected a mapping with keys {sorted(_POLICY_KEYS)}")
    unknown = set(doc) - _POLICY_KEYS
    if unknown:
        raise TallyError(f"{where}: unknown key(s) {sorted(unknown)} (known: {sorted(_POLICY_KEYS)}); a typo here would silently drop a rule")
    return doc


def _section(doc: dict, where: str, name: str, keys: set[str]) -> dict:
    value = doc.get(name) or {}
    if not isinstance(value, dict):
        raise TallyError(f"{where}: {name} must be a mapping with keys {sorted(keys)}")
    extra = set(value) - keys
    if extra:
        raise TallyError(f"{where}: {name} has unknown key(s) {sorted(extra)} (known: {sorted(keys)})")
    return value


def _type_names(section: dict, key: str, what: str) -> tuple[str, ...]:
    """A section's list of exception type names (`what`: the file and key, for the error)."""
    value = section.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() == v and v for v in value):
        raise TallyError(f"{what} must be a list of exception type names")
    return tuple(value)


def _patterns(section: dict, key: str, what: str) -> tuple[Pattern, ...]:
    out = []
    for i, item in enumerate(section.get(key) or []):
        if not isinstance(item, dict) or not isinstance(item.get("pattern"), str) or not item.get("why"):
            raise TallyError(f"{what}[{i}] must be a mapping with 'pattern' and 'why'")
        try:
            out.append(Pattern(re.compile(item["pattern"]), str(item["why"]).strip()))
        except re.error as e:
            raise TallyError(f"{what}[{i}] is not a valid regex ({e}): {item['pattern']!r}")
    return tuple(out)


def _check_classes(where: str, infra_types: tuple[str, ...], timeout_types: tuple[str, ...],
                   limit_types: tuple[str, ...], nonzero_types: tuple[str, ...]) -> None:
    """Each type in one class: a name in two would make the order of the rules, not the file, decide."""
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


def _sides(infra: dict, where: str, infra_types: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(infra.server_types, infra.interrupted_types): each a subset of the infra types, the two apart."""
    server_types = _type_names(infra, "server_types", f"{where}: infra.server_types")
    interrupted_types = _type_names(infra, "interrupted_types", f"{where}: infra.interrupted_types")
    for key, members in (("server_types", server_types), ("interrupted_types", interrupted_types)):
        stray = sorted(set(members) - set(infra_types))
        if stray:
            raise TallyError(f"{where}: infra.{key} lists {stray}, which infra.types does not: a side is "
                             f"one of the infra types; add them there or remove them here")
    both = sorted(set(server_types) & set(interrupted_types))
    if both:
        raise TallyError(f"{where}: {both} are in both infra.server_types and infra.interrupted_types; keep each in one")
    return server_types, interrupted_types


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



# The rule of a trial harbor finished with neither a reward nor an exception (see classify).
INTERRUPTED_UNRECORDED = "interrupted-unrecorded"


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
    if etype is None and not trial.verified:
        # harbor's Trial.run records every Exception and every CancelledError it catches; a trial
        # finished with no verifier result and no exception was ended by what it does not catch, a
        # KeyboardInterrupt (harbor turns SIGINT and SIGTERM into one, raised in whichever trial runs
        # at that instant): a stop of harbor, never an answer of the model. An interruption, retried
        # as CancelledError is (tests/test_mopup.py proves it on the pinned harbor). A verifier that
        # ran and gave no usable reward is the verifier's answer: unclassified, below.
        return ("errored", INTERRUPTED_UNRECORDED, "finished with neither a verifier reward nor an exception: harbor "
                "was stopped inside the trial (a KeyboardInterrupt, which harbor records no exception for)")
    if etype is None:
        return "unclassified", "no-reward-no-exception", "its verifier ran and gave no usable reward, and no exception"
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
    if trial.rule == INTERRUPTED_UNRECORDED:
        return "interrupted"
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
        if slots.is_infra(t):
            out[infra_side(t, policy)] += 1
    return out

