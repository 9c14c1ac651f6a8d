"""harbor_guard's signals and waits: the interrupt passed on to harbor once, and a sleep a signal ends.

tools/run/harbor_guard.py (one harbor) and tools/run/shard_run.py (a sharded bench's harbors) share them,
with the exit codes both end with.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time

from tools import fmt

WATCH_FAILED_EXIT = 70  # EX_SOFTWARE: the watch itself failed; harbor was stopped first
CEILING_EXIT = 75  # tools/money/cost_ceiling.py CEILING_EXIT: stopped at MAX_COST
FORWARDED = (signal.SIGINT, signal.SIGTERM)


def in_terminal_foreground() -> bool:
    """Is this process in its controlling terminal's foreground process group?

    Then a SIGINT it gets is Ctrl-C, which the terminal sent to the whole group, harbor
    included: passing it on would hand harbor a second Ctrl-C in the middle of its cleanup.
    """
    try:
        fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
    except OSError:
        return False  # no controlling terminal: the signal came from kill, a script, a timeout
    try:
        return os.tcgetpgrp(fd) == os.getpgrp()
    except OSError:
        return False
    finally:
        os.close(fd)


class Interrupts:
    """The first SIGINT or SIGTERM this process gets, passed on to harbor once."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.forwarded = False
        self.sent: list[tuple[str, str]] = []  # the signal passed on to harbor, with its time
        self._from_terminal = False
        self._proc: subprocess.Popen | None = None

    def install(self) -> None:
        for sig in FORWARDED:
            # A signal ignored by whoever started us (a background job) stays ignored, for harbor too.
            if signal.getsignal(sig) is not signal.SIG_IGN:
                signal.signal(sig, self._on_signal)

    def attach(self, proc: subprocess.Popen) -> None:
        self._proc = proc
        if self.signum is not None:  # arrived while harbor was being started: it may have missed it
            self._from_terminal = False
            self._forward()

    def _on_signal(self, signum: int, _frame) -> None:
        if self.signum is not None:
            return  # once: a second Ctrl-C reaches harbor from the terminal by itself
        self.signum = signum
        self._from_terminal = signum == signal.SIGINT and in_terminal_foreground()
        self._forward()

    def _forward(self) -> None:
        proc = self._proc
        if proc is None or self._from_terminal or proc.poll() is not None:
            return
        proc.send_signal(self.signum)
        self.forwarded = True
        self.sent.append((signal.Signals(self.signum).name.removeprefix("SIG"), fmt.stamp()))

    @property
    def harbor_got(self) -> str:
        """The stop signal harbor has from this interrupt: "INT" (passed on, or Ctrl-C from the
        terminal) or "TERM"."""
        return "INT" if self.signum == signal.SIGINT else "TERM"


class Waker:
    """Sleeps that end early when harbor exits or a signal arrives: no busy loop, no /proc.

    Every handled signal (SIGCHLD included) writes a byte to a pipe (signal.set_wakeup_fd),
    even when the kernel delivers it to a thread other than the main one; select() on that
    pipe is the sleep.
    """

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        for fd in (self._read, self._write):
            os.set_blocking(fd, False)
        self._previous = signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # handled, so harbor's exit wakes us

    def sleep(self, timeout: float) -> None:
        readable, _, _ = select.select([self._read], [], [], max(timeout, 0.0))
        if readable:
            try:
                while os.read(self._read, 4096):
                    pass
            except BlockingIOError:
                pass

    def close(self) -> None:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.set_wakeup_fd(self._previous)
        os.close(self._read)
        os.close(self._write)


def wait_for_exit(proc: subprocess.Popen, timeout: float, waker: Waker) -> bool:
    """True when harbor exited within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while proc.poll() is None:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        waker.sleep(left)
    return True


def send(proc: subprocess.Popen, sig: int) -> None:
    """Signal harbor's own process group when it made one, else harbor alone."""
    if proc.poll() is not None:
        return
    try:
        group = os.getpgid(proc.pid)
        if group == proc.pid and group != os.getpgrp():
            os.killpg(group, sig)
        else:
            os.kill(proc.pid, sig)
    except ProcessLookupError:
        pass
