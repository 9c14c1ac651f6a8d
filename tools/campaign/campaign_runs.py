"""A campaign's runs as its supervisor sees them: each run's server command, the groups of runs
that share one server, and the trials-at-once budget split among them.

Each run is described by scripts/campaign.sh describe (the run's settings resolved and checked by
tools/settings.py, its `hf jobs run` argv built by scripts/argv.sh serve_argv, the very builder
make serve launches with): nothing here rebuilds a command. Two runs share a server when their
server commands are identical once the per-run words are left out: the labels (run=, model=,
SERVER_LABELS, …) and --timeout (the owner's server is launched with the longest timeout of its
group). Everything else (image, flavor, port, namespace, the engine's argv with SERVER_ARGS,
SERVER_EXTRA_ARGS, SERVER_DP and SERVER_TP in it) must be equal word for word.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from tools import fmt
from tools import safe_read

# The words of `hf jobs run` that belong to one run, not to the server it launches.
PER_RUN_OPTIONS = ("--label", "--timeout")
PER_RUN_FLAGS = ("--detach", "-q")
# The settings that shape a server command, to say why two runs of one model are served apart.
SERVER_SETTINGS = ("SERVER", "SERVER_IMAGE", "SERVER_FLAVOR", "MODEL", "SERVER_ENGINE", "SERVER_ARGS",
                   "SERVER_EXTRA_ARGS", "SERVER_DP", "SERVER_TP", "PORT", "HF_NAMESPACE")


# A run's instance (state/<run>/instance, drawn by scripts/lib-instance.sh ensure_run_instance): 16 hex
# digits on one line, the INSTANCE_SYNTAX that scripts/lib-instance.sh load_run_instance checks.
INSTANCE_RE = re.compile(r"[0-9a-f]{16}")
INSTANCE_CAP = 64  # bytes: the id and its newline; lib-instance.sh reads no more than this either


def recorded_instance(state_dir: str | Path) -> tuple[str | None, str | None]:
    """(the run's instance, None) from state/<run>/instance; (None, None) when there is none yet; (None, why)
    when the file is not an instance id: read bounded, never passed on (it goes into an argv and a label)."""
    path = Path(state_dir) / "instance"
    try:
        raw = safe_read.read_regular(path, INSTANCE_CAP, "a run instance id")
    except FileNotFoundError:
        return None, None
    except (OSError, safe_read.Unreadable) as e:
        return None, f"{safe_read.printable(str(path))} cannot be read ({e})"
    text = raw.decode("utf-8", "replace").strip()
    if not INSTANCE_RE.fullmatch(text):
        return None, (f"{safe_read.printable(str(path))} is not a run instance id (16 hex digits): it holds "
                      f"'{safe_read.clip(safe_read.printable(text), 40)}'")
    return text, None


class DescribeError(Exception):
    """A run the campaign cannot describe (its settings refused): the run's own refusal."""


@dataclass
class RunInfo:
    run: str
    server_argv: list[str]
    serve_shown: str
    settings: dict[str, str]
    jobs_dir: str
    state_dir: str
    project_label: str
    instance: str = ""
    verdicts: str = ""

    @property
    def demand(self) -> int:
        """Trials the run has running at once: N_CONCURRENT in each of its N_SHARDS shards."""
        return int(self.settings["N_CONCURRENT"]) * int(self.settings["N_SHARDS"])

    @property
    def timeout_secs(self) -> float:
        return fmt.parse_duration(self.settings["SERVER_TIMEOUT"]) or 0.0


@dataclass
class Group:
    """The runs that share one server: the first of them owns it (make serve RUN=<owner>)."""

    key: tuple[str, ...]
    runs: list[RunInfo] = field(default_factory=list)

    @property
    def owner(self) -> RunInfo:
        return self.runs[0]

    @property
    def names(self) -> list[str]:
        return [r.run for r in self.runs]

    @property
    def timeout(self) -> str:
        """The owner's server lives as long as its longest-lived run needs (SERVER_TIMEOUT, the largest)."""
        return max(self.runs, key=lambda r: r.timeout_secs).settings["SERVER_TIMEOUT"]


def server_key(argv: list[str]) -> tuple[str, ...]:
    """The server command without the words of one run: what two runs must share to share a server."""
    out, i = [], 0
    while i < len(argv):
        word = argv[i]
        if word == "--":
            out.extend(argv[i:])
            break
        if word in PER_RUN_OPTIONS:
            i += 2
            continue
        if word not in PER_RUN_FLAGS:
            out.append(word)
        i += 1
    return tuple(out)


def describe(repo: Path, run: str, env: dict[str, str]) -> RunInfo:
    """One run through scripts/campaign.sh describe (its settings refused: DescribeError, its words)."""
    env = {k: v for k, v in env.items() if k != "RUN_INSTANCE"}  # one run's identity, never each of the campaign's
    proc = subprocess.run([str(repo / "scripts" / "campaign.sh"), "describe"], cwd=repo, env={**env, "RUN": run},
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300)
    if proc.returncode != 0:
        raise DescribeError(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else
                            f"run {run}: scripts/campaign.sh describe failed (exit {proc.returncode})")
    doc = json.loads(proc.stdout)
    return RunInfo(doc["run"], doc["server_argv"], doc["serve_shown"], doc["settings"], doc["jobs_dir"],
                   doc["state_dir"], doc["project_label"], doc.get("instance") or "", doc.get("verdicts") or "")


def group(runs: list[RunInfo]) -> list[Group]:
    """The runs by server, in the campaign's order: a group per distinct server command."""
    groups: dict[tuple[str, ...], Group] = {}
    for info in runs:
        key = server_key(info.server_argv)
        groups.setdefault(key, Group(key)).runs.append(info)
    return list(groups.values())


def why_apart(a: RunInfo, b: RunInfo) -> str:
    """Why two runs get two servers: the server settings that differ (or 'their commands differ')."""
    differ = [f"{n} ({a.run}: {a.settings.get(n) or '(empty)'}; {b.run}: {b.settings.get(n) or '(empty)'})"
              for n in SERVER_SETTINGS if a.settings.get(n) != b.settings.get(n)]
    return "; ".join(differ) if differ else "their server commands differ"


def separate_notes(groups: list[Group]) -> list[str]:
    """For each group whose model another group serves too: why it is a server of its own."""
    notes = []
    for i, g in enumerate(groups):
        for earlier in groups[:i]:
            if earlier.owner.settings["MODEL"] == g.owner.settings["MODEL"]:
                notes.append(f"{g.owner.run} is served apart from {earlier.owner.run} (same model, "
                             f"{g.owner.settings['MODEL']}): {why_apart(earlier.owner, g.owner)}")
                break
    return notes


# --------------------------------------------------------------------------- the sandbox budget


@dataclass
class Allocation:
    run: str
    n_concurrent: int   # what the run is benched with (its own, or lowered to share the budget)
    shards: int
    own: int            # its own N_CONCURRENT
    note: str = ""

    @property
    def demand(self) -> int:
        return self.n_concurrent * self.shards


class BudgetError(Exception):
    """A run that cannot fit the budget even at N_CONCURRENT=1."""


def allocate(groups: list[Group], budget: int) -> dict[str, Allocation]:
    """Each run's N_CONCURRENT within `budget` trials at once.

    A group's runs share its server, so they are benched side by side: when their trials at once
    together pass the budget, each is lowered to an even share of it (N_CONCURRENT = its share ÷ its
    shards, at least 1, never raised). Runs of different groups are never lowered for each other:
    a group waits until the budget has room (one after another), so no second GPU bills for a
    server whose runs crawl. A run whose shards alone pass the budget is refused."""
    out: dict[str, Allocation] = {}
    for g in groups:
        runs = g.runs
        for info in runs:
            shards = int(info.settings["N_SHARDS"])
            if shards > budget:
                raise BudgetError(f"run {info.run} has N_SHARDS={shards}, more shards than the campaign's {budget} "
                                  f"trials at once (MAX_AT_ONCE): lower its N_SHARDS, or raise MAX_AT_ONCE")
        total = sum(r.demand for r in runs)
        if total <= budget:
            for info in runs:
                nc = int(info.settings["N_CONCURRENT"])
                out[info.run] = Allocation(info.run, nc, int(info.settings["N_SHARDS"]), nc)
            continue
        shares = even_shares(budget, len(runs))
        for info, share in zip(runs, shares):
            nc, shards = int(info.settings["N_CONCURRENT"]), int(info.settings["N_SHARDS"])
            lowered = max(1, min(nc, share // shards))
            note = (f"N_CONCURRENT {nc} → {lowered}: {len(runs)} runs share {g.owner.run}'s server within "
                    f"{budget} trials at once") if lowered != nc else ""
            out[info.run] = Allocation(info.run, lowered, shards, nc, note)
        if sum(out[r.run].demand for r in runs) > budget:
            for info in runs:  # even at one trial a shard the group passes it: its runs go one after another
                a = out[info.run]
                a.note = (f"{g.owner.run}'s {len(runs)} runs do not fit {budget} trials at once side by side: "
                          "one after another on the server")
    return out


def even_shares(budget: int, n: int) -> list[int]:
    """`budget` split in `n` whole shares, the first ones one larger."""
    return [budget // n + (1 if i < budget % n else 0) for i in range(n)]


def start_order(groups: list[Group], alloc: dict[str, Allocation], budget: int) -> list[list[str]]:
    """The runs in waves, as the supervisor starts them when each run takes as long as any other:
    a run starts once its trials fit what the running ones leave of the budget, in the campaign's
    order, a group's runs together. What is shown; the supervisor decides as runs end."""
    waves, pending = [], [r.run for g in groups for r in g.runs]
    while pending:
        wave, used = [], 0
        for run in list(pending):
            if used + alloc[run].demand <= budget or not wave and used == 0:
                wave.append(run)
                used += alloc[run].demand
                pending.remove(run)
            elif wave:
                break
        waves.append(wave)
    return waves
