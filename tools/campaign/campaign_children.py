"""How the campaign supervisor runs the project's verbs: each a child of its own process group.

A child is a script of scripts/ (serve.sh, reproduce.sh, stop.sh, wait-ready.sh, report.sh) with
RUN and the campaign's settings in its environment, as values, never as shell text. Under make,
CLI_SETTINGS names what counts as make's command line, and the settings the campaign adds for a
run (API_BASE, N_CONCURRENT, SERVER_TIMEOUT) join it; a supervisor started directly (the tests)
has no CLI_SETTINGS, and the whole environment is its children's command line, as for every verb.
Each child dies with the supervisor: the kernel sends it SIGINT when the supervisor dies however
it dies (PR_SET_PDEATHSIG), which a make reproduce answers as Ctrl-C: harbor is stopped, its running
trials become retryable, and the run resumes where it stopped at the next make campaign.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import time
from pathlib import Path

PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """In the child before exec: SIGINT when the supervisor dies (Linux; elsewhere nothing)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGINT, 0, 0, 0)


def child_env(base: dict[str, str], run: str | None = None, **settings: str) -> dict[str, str]:
    """The environment of a verb the campaign starts: `base` with RUN and `settings` as its command line."""
    # RUN_INSTANCE names one run's identity on HF (scripts/lib-instance.sh): never each of the campaign's.
    env = {k: v for k, v in base.items() if k not in ("CAMPAIGN", "RUN_LOCK_HELD", "RUN_INSTANCE")}
    if run is not None:
        env["RUN"] = run
    env.update(settings)
    if "CLI_SETTINGS" in env:
        names = [n for n in env["CLI_SETTINGS"].split() if n not in ("CAMPAIGN", "RUN")] + list(settings)
        env["CLI_SETTINGS"] = " ".join(dict.fromkeys(names + (["RUN"] if run is not None else [])))
    return env


class Child:
    """One verb the campaign runs in the background (serve, a run's reproduce)."""

    def __init__(self, what: str, argv: list[str], env: dict[str, str], cwd: Path, log: Path | None):
        self.what = what
        out = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115  closed in reap
        self._out = out
        self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                     stderr=subprocess.STDOUT, process_group=0, preexec_fn=die_with_parent)
        self.started = time.monotonic()

    def poll(self) -> int | None:
        rc = self.proc.poll()
        if rc is not None and self._out not in (None, subprocess.DEVNULL):
            self._out.close()
            self._out = None
        return rc

    def signal(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signum)

    def stop(self, grace: float) -> int:
        """SIGINT (as Ctrl-C), then TERM and KILL `grace` seconds apart; its exit code."""
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
            self.signal(signum)
            try:
                self.proc.wait(timeout=grace)
                break
            except subprocess.TimeoutExpired:
                continue
        self.proc.wait()
        self.poll()
        return self.proc.returncode


def run_now(argv: list[str], env: dict[str, str], cwd: Path, timeout: float, capture: bool = False,
            log: Path | None = None) -> subprocess.CompletedProcess:
    """A short verb (stop, a dry run, the comparison), waited for; bounded by `timeout`."""
    out = subprocess.PIPE if capture else (open(log, "ab") if log else None)  # noqa: SIM115
    try:
        return subprocess.run(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                              stderr=subprocess.STDOUT if log and not capture else (subprocess.PIPE if capture else None),
                              text=True, timeout=timeout, preexec_fn=die_with_parent)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(argv, 124, "", f"no end within {timeout:g}s")
    finally:
        if out not in (None, subprocess.PIPE):
            out.close()
