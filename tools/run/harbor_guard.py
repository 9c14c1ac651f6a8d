#!/usr/bin/env python3
"""harbor_guard: run harbor, and end it when it lingers after its job has finished or was interrupted.

In the reference's Run 2, harbor printed its final summary and then stayed alive for hours
(an unclosed aiohttp session) until the 12 h job timeout killed it mid-teardown, turning a
finished trial into a CancelledError and billing the model server all along. This wrapper
runs harbor as its child and watches the job's result.json; once harbor has written its
job as finished, harbor gets --grace seconds to exit by itself, then TERM, then KILL.

    harbor_guard.py run --job-dir DIR --grace S [--term-wait S] [--poll S] [--event-file F] -- HARBOR_ARGV...

When is a job finished: harbor 0.25.0 sets `finished_at` on its `JobResult`
(harbor/models/job/result.py: `finished_at: datetime | None`) in exactly one place, at the
end of `Job.run` (harbor/job.py: `self._job_result.finished_at = finished_at`, then
`_write_job_result` to `job_dir / "result.json"`, the `_job_result_path` property), after
every trial has ended and the final stats are built. While trials run, result.json is
rewritten with `finished_at` null; when harbor is interrupted it sets `finished_at` only in
memory ("persisted result keeps finished_at unset"). So a `finished_at` on disk means
the job is done. tests/test_harbor_guard.py asserts these names on harbor's own model.

When was harbor interrupted, with every trial ended: an interrupted harbor cancels its running
trials, and each still writes its result.json, its exception_type "CancelledError"
(harbor/trial/trial.py Trial.run and _finalize), but the job's finished_at stays null. So the
linger watch also fires, after the same --grace, while every trial dir has its result.json, the
one that finished last (of those written since harbor started: a resumed job's earlier
cancellations do not count) ended in CancelledError, and the job's finished_at is null; a trial
started meanwhile (harbor went on after a trial's own CancelledError) starts the grace again.

Resumes: `harbor job resume` (and a repeated `harbor run` of the same job) rewrites the same
result.json, which may still hold the finished_at of the earlier run when harbor starts. Only
a finished_at other than the one on disk before harbor started counts: harbor stamps a new
`datetime.now()` at the end of every run, and a copied or touched stale file keeps its old one.

Spending ceiling (--max-cost, MAX_COST): every --cost-poll seconds the run's spend is measured
with tools/money/cost.py's figures (tools/money/cost_ceiling.py); when spent + burn × poll would pass the
ceiling, harbor is stopped as Ctrl-C stops it: SIGINT (harbor 0.25.0 cancels its running trials,
each writes its result.json with a CancelledError, an infra error mop-up retries, and the job's
finished_at stays null), then TERM (harbor turns it into the same KeyboardInterrupt) after
--term-wait seconds, then KILL. A `cost-ceiling` event is appended and the exit code is 75.

Signals: harbor stays in this process's session and process group, so Ctrl-C at the
terminal reaches it directly. The first SIGINT or SIGTERM this process gets is passed on to
harbor once (a SIGINT is not, when this process is in its terminal's foreground group: that
one came from Ctrl-C and harbor has it already). Harbor then has --term-wait seconds
(STOP_GRACE) to cancel its trials and exit, then TERM, then KILL after as long again (TERM at
once to KILL when the signal was TERM): an interrupted harbor that lingers is never waited on
for ever. A SIGINT ignored by whoever started this process (nohup … &) stays ignored, here and
in harbor; TERM, which harbor 0.25.0 turns into a KeyboardInterrupt (harbor/cli/jobs.py:
_execute_job installs _handle_sigterm), is then the stop. (`harbor job resume` installs no such
handler: TERM ends it at once, and the trials it was running are left without a result.json, for
make mopup to run again.) A shard's watch never has SIGINT ignored: tools/run/shard_run.py restores
it, and stops a shard with SIGINT.

Exit codes: harbor's own when it exits by itself (128+N when a signal N ended it); 0 when
this tool ended harbor after its job had finished (the work is done, and a line on stderr
says so); 75 when it stopped harbor at the spending ceiling; 130 / 143 when this process was
interrupted by SIGINT / SIGTERM (after passing it on); 70 when the watch itself failed (it stops
harbor first, as at the ceiling: harbor never runs on unwatched); 1 when harbor cannot be
started; 2 usage. A spend that cannot be measured (an hf answer or a file it cannot read) is one
line on stderr, and the watch goes on.

Events (--event-file, one JSON line appended when harbor lingered, was interrupted or stopped):
  {"event": "harbor-lingered", "job_dir", "finished_at" (harbor's own, naive local time; null
   when harbor lingered after an interrupt, then also "cancelled_trial" and "cancelled_at", the
   trial that ended last and its finished_at), "grace_s", "signal": "TERM" | "KILL" (the last
   one sent), "at" (UTC, when it was sent)}
  {"event": "harbor-interrupted", "job_dir", "received": "INT" | "TERM" (what this process got),
   "signals": [{"signal": "INT" | "TERM" | "KILL", "at"}] (what it sent harbor, the one passed on
   first; none for Ctrl-C, which reached harbor from the terminal), "grace_s" (--term-wait),
   "exited" (false: harbor outlived KILL), "returncode" (harbor's, -N for signal N), "at"}
  {"event": "cost-ceiling", "run", "job_dir", "spent_usd", "ceiling_usd", "burn_usd_per_hour",
   "projected_usd", "poll_s", "source" (of the prices), "prices", "unknown", "signal": "INT" |
   "TERM" | "KILL" (the last one sent), "at"}
  {"event": "watch-failed", "job_dir", "error" (its type and message), "signal": "INT" | "TERM" |
   "KILL" | null (harbor had exited), "at"}

The code: tools/run/harbor_guard_job.py reads the job (result.json, the trial dirs),
harbor_guard_signals.py passes the interrupt on and waits (tools/run/shard_run.py shares it),
harbor_guard_words.py says and records what happened; this module supervises and is the CLI.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

import click

from tools import fmt
from tools.run.harbor_guard_signals import (CEILING_EXIT, WATCH_FAILED_EXIT, Interrupts, Waker, send,
                                        wait_for_exit)
from tools.run.harbor_guard_job import Cancelled, Trials, finished_at, new_finish, read_job_result, trials_without_result
from tools.run.harbor_guard_words import (FAILED_EVENT, KILL_WAIT_S, PREFIX, append_event, interrupt_event,
                                      interrupt_message, linger_event, linger_message, trials_note)

# --------------------------------------------------------------------------- supervising


@dataclass
class Outcome:
    returncode: int | None
    finish: str | Cancelled | None = None  # the finished_at harbor lingered after, or its cancelled last trial
    last_signal: str | None = None   # "TERM" | "KILL" when this tool ended harbor
    signalled_at: str | None = None
    survived: bool = False           # still alive KILL_WAIT_S after KILL
    spend: object | None = None      # cost_ceiling.Spend when harbor was stopped at the ceiling
    ceiling_signal: str | None = None  # "INT" | "TERM" | "KILL": the last one sent at the ceiling
    interrupt: list[tuple[str, str]] | None = None  # after an interrupt: the signals sent harbor, with their times


class CeilingCheck:
    """Runs the spending ceiling's check when it is due (every --cost-poll seconds)."""

    def __init__(self, watch, poll: float, term_wait: float = 30.0):
        self.watch, self.poll, self.term_wait = watch, poll, term_wait
        self.first_signal = first_stop_signal()
        # The verb checked the ceiling just before it started harbor: the first check is one poll on.
        self.due = time.monotonic() + poll

    def __call__(self):
        if self.watch is None or time.monotonic() < self.due:
            return None
        self.due = time.monotonic() + self.poll
        try:
            return self.watch.check()
        except Exception as err:  # noqa: BLE001  (whatever a file or an hf answer holds: the watch goes on)
            click.echo(f"{PREFIX} note: the spend could not be measured ({type(err).__name__}: "
                       f"{str(err)[:200]}); harbor goes on, the next check is in {fmt.span(self.poll)}.", err=True)
            return None

    def until_due(self) -> float:
        return max(0.0, self.due - time.monotonic()) if self.watch is not None else float("inf")


# watch_until_finished's answer when this process was interrupted (harbor has the signal).
INTERRUPTED = object()


def watch_until_finished(proc: subprocess.Popen, result_path: str, baseline: str | None, poll: float,
                         waker: Waker, ceiling: CeilingCheck | None = None, interrupts: Interrupts | None = None,
                         trials: Trials | None = None, grace: float = 0.0):
    """Wait until harbor exits (None), writes a new finish (its finished_at, a str), the run's spend
    would pass its ceiling (the cost_ceiling.Spend), this process is interrupted (INTERRUPTED), or
    harbor has been interrupted with every trial ended for `grace` seconds (Cancelled)."""
    interrupted_since = None
    while proc.poll() is None:
        if interrupts is not None and interrupts.signum is not None:
            return INTERRUPTED
        result = read_job_result(result_path)
        finish = new_finish(result, baseline)
        if finish is not None:
            return finish
        wait = poll
        cancelled = trials.cancelled() if trials is not None and result is not None and \
            result.get("finished_at") is None else None
        if cancelled is None:
            interrupted_since = None  # a trial started again, or harbor finished: it was no interruption
        else:
            interrupted_since = interrupted_since if interrupted_since is not None else time.monotonic()
            left = interrupted_since + grace - time.monotonic()
            if left <= 0:
                return cancelled
            wait = min(wait, left)
        if ceiling is not None:
            spend = ceiling()
            if spend is not None and proc.poll() is None:
                return spend
            wait = min(wait, ceiling.until_due())
        waker.sleep(wait)
    return None


def first_stop_signal() -> str:
    """"INT", or "TERM" when this process (so harbor) was started with SIGINT ignored (a background
    job of a script: nohup make bench &): harbor would never see a SIGINT. TERM is what harbor
    0.25.0 turns into the same KeyboardInterrupt (harbor/cli/jobs.py: _execute_job, the command
    `harbor run`, installs _handle_sigterm, which raises KeyboardInterrupt)."""
    return "TERM" if signal.getsignal(signal.SIGINT) is signal.SIG_IGN else "INT"


STOP_STEPS = (("INT", signal.SIGINT), ("TERM", signal.SIGTERM), ("KILL", signal.SIGKILL))


def stop_harbor(proc: subprocess.Popen, first: str, term_wait: float, waker: Waker,
                already_sent: bool = False) -> tuple[list[tuple[str, str]], bool]:
    """SIGINT (Ctrl-C), then TERM, then KILL, from `first` on, each after term_wait seconds without an
    exit; when harbor already has `first` (an interrupt passed on), only the wait after it. The
    signals sent, each with its time, and whether harbor was still there KILL_WAIT_S after KILL."""
    sent: list[tuple[str, str]] = []
    names = [name for name, _ in STOP_STEPS]
    for step, (name, sig) in enumerate(STOP_STEPS[names.index(first):]):
        if proc.poll() is not None:
            break
        if not (already_sent and step == 0):
            # harbor alone, not our process group: the verb that started us must not see a Ctrl-C.
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, sig)
            sent.append((name, fmt.stamp()))
        if wait_for_exit(proc, KILL_WAIT_S if name == "KILL" else term_wait, waker):
            break
    return sent, proc.poll() is None


def stop_at_ceiling(proc: subprocess.Popen, spend, term_wait: float, waker: Waker, first: str = "INT") -> Outcome:
    """SIGINT (Ctrl-C), then TERM, then KILL, each after term_wait seconds; from TERM on when
    `first` is "TERM" (harbor ignores SIGINT)."""
    sent, survived = stop_harbor(proc, first, term_wait, waker)
    outcome = Outcome(proc.returncode, spend=spend, survived=survived)
    if sent:
        outcome.ceiling_signal, outcome.signalled_at = sent[-1]
    return outcome


def end_interrupted(proc: subprocess.Popen, interrupts: Interrupts, term_wait: float, waker: Waker) -> Outcome:
    """This process was interrupted, and harbor has the signal (passed on, or Ctrl-C from the
    terminal): it gets term_wait seconds to cancel its trials and exit, then TERM, then KILL. An
    interrupted harbor that lingers (its trials written, the process alive) is never waited on for
    ever."""
    sent, survived = stop_harbor(proc, interrupts.harbor_got, term_wait, waker, already_sent=True)
    return Outcome(proc.returncode, survived=survived, interrupt=[*interrupts.sent, *sent])


def end_lingering(proc: subprocess.Popen, finish: str | Cancelled, grace: float, term_wait: float,
                  waker: Waker) -> Outcome:
    """Grace, then TERM, then KILL; harbor's own exit code when it leaves in time."""
    if wait_for_exit(proc, grace, waker):
        return Outcome(proc.returncode)
    send(proc, signal.SIGTERM)
    outcome = Outcome(None, finish, "TERM", fmt.stamp())
    if not wait_for_exit(proc, term_wait, waker):
        send(proc, signal.SIGKILL)
        outcome.last_signal, outcome.signalled_at = "KILL", fmt.stamp()
        outcome.survived = not wait_for_exit(proc, KILL_WAIT_S, waker)
    outcome.returncode = proc.returncode
    return outcome


def supervise(proc: subprocess.Popen, result_path: str, baseline: str | None, grace: float, term_wait: float,
              poll: float, waker: Waker, ceiling: CeilingCheck | None = None, interrupts: Interrupts | None = None,
              trials: Trials | None = None) -> Outcome:
    end = watch_until_finished(proc, result_path, baseline, poll, waker, ceiling, interrupts, trials, grace)
    if end is None:
        return Outcome(proc.returncode)
    if end is INTERRUPTED:
        return end_interrupted(proc, interrupts, term_wait, waker)
    if isinstance(end, Cancelled):  # harbor lingered `grace` seconds already, interrupted
        return end_lingering(proc, end, 0.0, term_wait, waker)
    if not isinstance(end, str):
        return stop_at_ceiling(proc, end, term_wait, waker, ceiling.first_signal)
    return end_lingering(proc, end, grace, term_wait, waker)


def exit_code(outcome: Outcome, interrupted: int | None) -> int:
    if interrupted is not None:
        return 128 + interrupted
    if outcome.spend is not None:
        return CEILING_EXIT
    if outcome.last_signal is not None:
        return 0  # harbor had finished the job: the work is done
    rc = outcome.returncode
    assert rc is not None
    return rc if rc >= 0 else 128 - rc


def start_harbor(argv: tuple[str, ...]) -> subprocess.Popen:
    try:
        # Same environment, stdio, session and process group as this process. close_fds=False:
        # harbor sees the descriptors it would see if it had been started directly.
        return subprocess.Popen(list(argv), close_fds=False)
    except OSError as err:
        raise click.ClickException(f"cannot start {argv[0]!r}: {err.strerror or err}; is harbor installed in "
                                   f"this environment (make setup)?") from None


def report_ceiling(outcome: Outcome, job_dir: str, ceiling, event_file: str | None) -> None:
    from tools.money import cost_ceiling  # noqa: PLC0415  (only with --max-cost: it loads tools/money/cost.py)

    watch = ceiling.watch
    sent = "SIGINT, then TERM" if ceiling.first_signal == "INT" else "TERM (harbor ignores SIGINT, as a background job does)"
    how = {"INT": "harbor was stopped as Ctrl-C stops it (SIGINT)",
           "TERM": (f"harbor was stopped (SIGINT, then TERM {fmt.span(ceiling.term_wait)} later)"
                    if ceiling.first_signal == "INT" else f"harbor was stopped with {sent}"),
           "KILL": f"harbor was killed ({sent}, then KILL)",
           None: f"harbor had exited by itself (exit {outcome.returncode})"}[outcome.ceiling_signal]
    if outcome.survived:
        how = f"harbor was sent {sent} and KILL and is still there (stuck in the kernel?): stop it by hand"
    note = trials_note(trials_without_result(job_dir), job_dir)
    what = f"{how}; its running trials end as CancelledError, which mop-up retries. {note}"
    click.echo(f"{PREFIX} " + cost_ceiling.reached_message(watch.scope.run, outcome.spend, watch.ceiling, watch.poll_s, what),
               err=True)
    if event_file:
        record(event_file, cost_ceiling.ceiling_event(watch.scope.run, outcome.spend, watch.ceiling, watch.poll_s,
                                            os.path.abspath(job_dir), outcome.ceiling_signal, outcome.signalled_at))


def stop_after_failure(proc: subprocess.Popen, err: BaseException, job_dir: str, term_wait: float,
                       first: str, event_file: str | None) -> int:
    """The watch itself failed (a bug, not harbor's doing): harbor must not go on alone, with no
    ceiling and no linger watchdog, holding the run's lock. Stop it as at the ceiling (SIGINT:
    its running trials become CancelledError, which mop-up retries), record it, and say so."""
    waker = Waker()
    try:
        outcome = stop_at_ceiling(proc, None, term_wait, waker, first)
    finally:
        waker.close()
    what = f"{type(err).__name__}: {str(err)[:300]}"
    stopped = (f"harbor was stopped ({outcome.ceiling_signal})" if outcome.ceiling_signal
               else f"harbor had exited (exit {proc.returncode})")
    click.echo(f"{PREFIX} the watch failed ({what}); {stopped} so that it does not run on unwatched. "
               f"{trials_note(trials_without_result(job_dir), job_dir)} This is a bug of tools/run/harbor_guard.py: "
               f"please report it with the line above.", err=True)
    if event_file:
        record(event_file, {"event": FAILED_EVENT, "job_dir": os.path.abspath(job_dir), "error": what,
                            "signal": outcome.ceiling_signal, "at": fmt.stamp()})
    return WATCH_FAILED_EXIT


def report(outcome: Outcome, job_dir: str, grace: float, term_wait: float, event_file: str | None) -> None:
    if outcome.last_signal is None:
        return
    note = trials_note(trials_without_result(job_dir), job_dir)
    click.echo(linger_message(outcome.finish, grace, outcome.last_signal, term_wait, outcome.survived, note),
               err=True)
    if event_file:
        record(event_file, linger_event(job_dir, outcome.finish, grace, outcome.last_signal, outcome.signalled_at))


def report_interrupt(outcome: Outcome, interrupts: Interrupts, job_dir: str, term_wait: float,
                     event_file: str | None) -> None:
    """The interrupt's line on stderr; with --event-file, the harbor-interrupted event when the
    interrupt came while harbor ran (a stop at the ceiling or of a linger records its own)."""
    escalated = tuple(name for name, _ in (outcome.interrupt or [])[len(interrupts.sent):])
    click.echo(interrupt_message(interrupts.signum, interrupts.forwarded, outcome.returncode, escalated, term_wait),
               err=True)
    if event_file and outcome.interrupt is not None:
        record(event_file, interrupt_event(job_dir, interrupts.signum, outcome.interrupt, term_wait, outcome))


def record(event_file: str, event: dict) -> None:
    error = append_event(event_file, event)
    if error:
        click.echo(error, err=True)


def make_ceiling(max_cost: str, poll: float, scope_json: str, term_wait: float) -> CeilingCheck | None:
    """The ceiling's check, or None without --max-cost."""
    if not max_cost:
        return None
    from tools.money import cost_ceiling  # noqa: PLC0415  (loads tools/money/cost.py and the tally: only when asked)
    from tools.money import cost_hf  # noqa: PLC0415

    try:
        ceiling = cost_ceiling.parse_ceiling(max_cost)
        scope = cost_ceiling.scope_of(scope_json)
    except (ValueError, TypeError, KeyError) as err:
        raise click.UsageError(f"--max-cost {max_cost!r} --cost-scope: {err}") from None
    return CeilingCheck(cost_ceiling.Watch(cost_hf.LiveHf(timeout=scope.call_timeout), scope, ceiling, poll,
                                 fmt.utc_now()), poll, term_wait)


# --------------------------------------------------------------------------- command line


@click.group(help=__doc__.split("\n\n")[0])
def cli() -> None:
    pass


@cli.command("run", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--job-dir", required=True, type=click.Path(file_okay=False),
              help="harbor's job dir (<jobs-dir>/<job-name>); it may not exist yet.")
@click.option("--grace", required=True, type=click.FloatRange(min=0),
              help="Seconds harbor gets to exit by itself after its job has finished.")
@click.option("--term-wait", default=30.0, show_default=True, type=click.FloatRange(min=0),
              help="Seconds harbor gets after each stop signal before the next (SIGINT, TERM, KILL): "
                   "after an interrupt, at the ceiling, and between TERM and KILL (STOP_GRACE).")
@click.option("--poll", default=5.0, show_default=True, type=click.FloatRange(min=0.05),
              help="Seconds between reads of the job's result.json.")
@click.option("--event-file", type=click.Path(dir_okay=False),
              help="Append a JSON line here when harbor had to be ended, was interrupted or stopped.")
@click.option("--max-cost", default="", help="The run's spending ceiling in USD (MAX_COST); empty: none.")
@click.option("--cost-poll", default=60.0, show_default=True, type=click.FloatRange(min=0.05),
              help="Seconds between measures of the run's spend.")
@click.option("--cost-scope", default="", help="JSON: the run to measure (tools/money/cost_ceiling.py Scope's fields).")
@click.argument("harbor_argv", nargs=-1, required=True, type=click.UNPROCESSED)
def run_cmd(job_dir, grace, term_wait, poll, event_file, max_cost, cost_poll, cost_scope, harbor_argv):
    """Run HARBOR_ARGV; end harbor if it lingers --grace seconds after its job finished, or stop it
    when the run's spend would pass --max-cost."""
    ceiling = make_ceiling(max_cost, cost_poll, cost_scope, term_wait)
    result_path = os.path.join(job_dir, "result.json")
    interrupts = Interrupts()
    waker = Waker()
    interrupts.install()
    baseline = finished_at(read_job_result(result_path))  # before harbor can rewrite it
    trials = Trials(job_dir)  # likewise: the trials that had ended before harbor started
    if interrupts.signum is not None:
        sys.exit(128 + interrupts.signum)
    proc = start_harbor(harbor_argv)
    interrupts.attach(proc)
    if ceiling is not None:
        ceiling.watch.running_since = fmt.utc_now()
    try:
        outcome = supervise(proc, result_path, baseline, grace, term_wait, poll, waker, ceiling, interrupts, trials)
    except Exception as err:  # noqa: BLE001  (never leave harbor running alone)
        waker.close()
        sys.exit(stop_after_failure(proc, err, job_dir, term_wait, first_stop_signal(), event_file))
    if outcome.spend is not None:
        report_ceiling(outcome, job_dir, ceiling, event_file)
    report(outcome, job_dir, grace, term_wait, event_file)
    if interrupts.signum is not None:
        report_interrupt(outcome, interrupts, job_dir, term_wait, event_file)
    waker.close()
    sys.exit(exit_code(outcome, interrupts.signum))


if __name__ == "__main__":
    cli()
