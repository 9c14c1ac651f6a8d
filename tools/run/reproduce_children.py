"""How make reproduce runs the project's verbs: each a child under the run's lock.

Every step is a script of scripts/ run with RUN set, in its own process group, with the lock's
fd passed on (the child finds it already held). A signal to the supervisor is forwarded to the
running child once; the child's own handlers finish the job (harbor writes what it has).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Callable

from tools.run.reproduce_state import Config, Interrupted

LOCK_FD = 9


def fd_open(fd: int) -> bool:
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False


class Children:
    """The one running child of the supervisor, and the signal that stops it."""

    def __init__(self, cfg: Config, say: Callable[[str], None]):
        self.cfg = cfg
        self.say = say
        self.child: subprocess.Popen | None = None
        self.interrupted: int | None = None

    def env(self, **extra: str) -> dict:
        env = dict(os.environ, RUN=self.cfg.run, WHERE="local")
        env.update(extra)
        return env

    def script(self, name: str) -> str:
        return str(self.cfg.repo / "scripts" / name)

    def run_child(self, argv: list[str], *, watch=None, capture: bool = False, **extra: str):
        """Run one verb under the run's lock, in its own process group (a signal is forwarded once).
        With watch (the server's death watch, tools/run/reproduce_server.py), the server is checked
        while the child runs and its death recorded (the child runs on). Returns (exit code,
        server died, captured stdout)."""
        fds = (LOCK_FD,) if fd_open(LOCK_FD) else ()
        self.child = subprocess.Popen(argv, cwd=self.cfg.repo, env=self.env(**extra), pass_fds=fds,
                                      process_group=0, stdin=subprocess.DEVNULL,
                                      stdout=subprocess.PIPE if capture else None, text=capture)
        died = False
        try:
            while True:
                try:
                    out, _ = self.child.communicate(timeout=1) if capture else (None, None)
                    if not capture:
                        self.child.wait(timeout=1)
                    break
                except subprocess.TimeoutExpired:
                    pass
                if watch is not None and not self.interrupted and watch.died(Path(argv[0]).name):
                    died, watch = True, None
            rc = self.child.returncode
            return rc, died, out if capture else None
        finally:
            self.child = None
            if self.interrupted:
                raise Interrupted(self.interrupted)

    def on_signal(self, signum, _frame) -> None:
        if self.interrupted:
            return  # one forward is enough; the child's own handlers finish the job
        self.interrupted = signum
        if self.child is None:
            raise Interrupted(signum)
        self.say(f"{signal.Signals(signum).name}: passing it to the running step, then stopping the server")
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.child.pid, signum)

    def manifest(self, event: str, fields: dict) -> None:
        """One line in state/<run>/manifest.jsonl, by lib.sh's append_manifest (the same shape)."""
        lib = self.cfg.repo / "scripts" / "lib.sh"
        script = 'source "$1"; resolve_run; load_settings; append_manifest "$2" "$3"'
        subprocess.run(["bash", "-c", script, "reproduce", str(lib), event, json.dumps(fields)],
                       env=self.env(), cwd=self.cfg.repo, check=False, stdin=subprocess.DEVNULL, timeout=120)

    def remember(self) -> None:
        """The run becomes the last run used (lib.sh's remember_run): the caller does this once the
        run has job dirs to tally (a failed start never does, as a failed bench never does)."""
        lib = self.cfg.repo / "scripts" / "lib.sh"
        subprocess.run(["bash", "-c", 'source "$1"; resolve_run; remember_run', "reproduce", str(lib)],
                       env=self.env(), cwd=self.cfg.repo, check=False, stdin=subprocess.DEVNULL, timeout=120)
