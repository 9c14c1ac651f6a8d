"""make reproduce's record of a run: its settings, its progress file and the words it ends with.

state/<run>/reproduce.json is the supervisor's memory across crashes, Ctrl-C and reboots: what
is read back must be exactly what is written (new_state and the steps), or a crash before the
cleanup leaves the server billing. The functions here are pure over that record and the job dirs'
names; tools/run/reproduce.py (the supervisor) and its collaborators act on them.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import signal
from pathlib import Path

from tools import fmt
from tools import safe_read
from tools.results import tally_core

STEPS = ("serve", "probe", "smoke", "bench", "mopup", "tally", "stop", "summary")
# scripts/lib-run.sh CEILING_EXIT: bench or mop-up stopped harbor at the run's spending ceiling.
CEILING_EXIT = 75


class Failure(Exception):
    """The pipeline cannot go on: one line for the user, who fixes the cause and runs it again."""


class BadState(Failure):
    """state/<run>/reproduce.json is not what the supervisor writes: refused, once the server it
    would have stopped is stopped."""


class CeilingReached(Exception):
    """A step stopped at MAX_COST (exit CEILING_EXIT, the message above): no relaunch, no next pass."""


class Interrupted(Exception):
    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@dataclasses.dataclass(frozen=True)
class Config:
    run: str
    repo: Path
    state_dir: Path
    jobs_dir: Path
    job_name: str
    api_base: str
    verdicts: Path | None
    mopup_passes: int
    max_relaunches: int
    idle_stop_after: int
    health_poll: float
    skip_smoke: str = ""  # why the smoke step is not run (it would run the bench's very tasks); "": run it
    model: str = ""  # the run's MODEL: a job dir of its name that records another model is refused
    max_task_retries: int = tally_core.DEFAULT_MAX_TASK_RETRIES  # MAX_TASK_RETRIES: final errors are not retried

    @property
    def state_file(self) -> Path:
        return self.state_dir / "reproduce.json"

    @property
    def server_json(self) -> Path:
        return self.state_dir / "server.json"


# --- the record ------------------------------------------------------------------------------------


def epoch_of(iso: str | None) -> float | None:
    if not iso:
        return None
    try:
        return dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def new_state(run: str) -> dict:
    return {"run": run, "created_at": fmt.stamp(), "updated_at": fmt.stamp(), "current_step": None,
            "steps": {}, "server": None, "servers": [], "relaunches": 0, "mopup_passes": [],
            "invocations": [], "last_server_step_ended_at": None, "tally_output": None}


# The type of every field of reproduce.json, and of the records in its containers: what the
# supervisor reads must be what it writes, or a crash before its cleanup leaves the server billing.
STATE_SHAPE = {"run": str, "created_at": str, "updated_at": str, "current_step": (str, type(None)),
               "steps": dict, "server": (dict, type(None)), "servers": list, "relaunches": int,
               "mopup_passes": list, "invocations": list, "last_server_step_ended_at": (str, type(None)),
               "tally_output": (str, type(None))}
RECORDS = ("steps", "servers", "mopup_passes", "invocations")  # each holds JSON objects


def shape_problems(state: dict) -> list[str]:
    """What in a loaded reproduce.json is not the shape this module writes (new_state, the steps)."""
    names = {str: "a string", dict: "an object", list: "a list", int: "a whole number", type(None): "null"}
    problems = []
    for key, kinds in STATE_SHAPE.items():
        kinds = kinds if isinstance(kinds, tuple) else (kinds,)
        value = state.get(key)
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            problems.append(f"{key} is {json.dumps(value)[:60]}, not {' or '.join(names[k] for k in kinds)}")
    for key in RECORDS:
        value = state.get(key)
        records = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
        if any(not isinstance(r, dict) for r in records):
            problems.append(f"{key} holds something other than objects")
    server = state.get("server")
    if isinstance(server, dict) and not isinstance(server.get("job"), str):
        problems.append("server has no job name")
    return problems


def load_state(path: Path, run: str) -> dict:
    try:
        # The project's bounded reader: a regular file (never a FIFO, which would block), at most STATE_CAP bytes.
        state = safe_read.parse_json(safe_read.read_regular(path, safe_read.STATE_CAP, "the supervisor state"))
    except FileNotFoundError:
        return new_state(run)
    except (OSError, safe_read.Unreadable) as e:
        raise BadState(f"{path} is not readable JSON ({e}): move it aside and run make reproduce RUN={run} "
                       "again (the job dirs and state/ stay; finished steps are found again from them)") from None
    if not isinstance(state, dict) or state.get("run") != run:
        raise BadState(f"{path} is not this run's supervisor state: move it aside and run it again")
    state = {**new_state(run), **state}
    problems = shape_problems(state)
    if problems:
        raise BadState(f"{path} is not the supervisor state make reproduce writes ({'; '.join(problems)}): move it "
                       f"aside and run make reproduce RUN={run} again (finished steps are found again from the "
                       f"job dirs)")
    return state


def step_done(state: dict, name: str) -> bool:
    return state["steps"].get(name, {}).get("status") in ("done", "skipped")


def relaunch_is_due(state: dict) -> bool:
    """A launch replaces a server that died or failed: it counts against MAX_RELAUNCHES. One that
    follows a server this supervisor stopped on purpose (Ctrl-C, the end) does not."""
    return bool(state["servers"]) and state["servers"][-1].get("status") != "stopped"


def summary_lines(state: dict, now: float) -> list[str]:
    lines = []
    for p in state["mopup_passes"]:
        lines.append(f"mop-up pass {p['pass']}: {p['status']}, {len(p.get('planned', []))} task(s) planned, "
                     f"{p.get('trials_rerun', 0)} trial(s) re-run")
    if not state["mopup_passes"]:
        lines.append("mop-up: no pass was needed")
    last_need = epoch_of(state.get("last_server_step_ended_at"))
    for s in state["servers"]:
        start = epoch_of(s.get("launched_at"))
        end = epoch_of(s.get("stopped_at")) or now
        up = fmt.elapsed(end - start if start else None)
        idle = ""
        if s.get("status") == "stopped" and last_need and end >= last_need and s is state["servers"][-1]:
            idle = f", idle {fmt.elapsed(end - last_need)} after the last step that needed it"
        lines.append(f"server {s['job']}: {s.get('status')}, up {up}{idle}")
    lines.append(f"server relaunches: {state['relaunches']}")
    return lines
