#!/usr/bin/env python3
"""mutants: does the test suite catch a bug put in by hand? One line per mutant, then a score.

    .venv/bin/python benchmarks/mutants.py [--only NAME ...] [--list]

Each mutant below is data: a file, an exact text of it (found exactly once), what replaces it,
the tier of `make` that must catch it ("check": the fast tier, end-to-end tests left out; "test":
the end-to-end ones too), and the tests that should. The checkout's files (tracked and untracked,
as they are now, ignored ones left out) are copied once to a scratch dir, with .venv and
tests/node_modules linked; each mutant is applied there, its tests run (pytest with PYTHONPATH
set to the copy, since .venv's tools.pth names the checkout; bats from the copy), and the file is
put back. The checkout itself is never changed. A mutant is caught when its tests fail or hang
past TIMEOUT_S; the unmutated copy must pass the same tests first, or the run stops (a failing
test would "catch" everything).

Exit status: 0 when every mutant was caught, 1 when one survived, 2 when the unmutated tests fail.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TIMEOUT_S = 600
# What make check leaves out (scripts/test.sh): the tests tagged e2e or full.
CHECK_BATS_TAGS = "!e2e,!full"
CHECK_PYTEST_MARKS = "not e2e and not full"


@dataclass(frozen=True)
class Mutant:
    name: str
    file: str
    original: str
    replacement: str
    tier: str               # "check" | "test": the make target that must catch it
    tests: tuple[str, ...]  # pytest node ids or "FILE -k EXPR"; "bats FILE -f PATTERN" for bats


def pytest(target: str, k: str | None = None) -> str:
    return f"{target} -k {k}" if k else target


MUTANTS = [
    # --- mop-up's plan: the blockers of an in-place resume, and what leaves the job first
    Mutant("resume-extra-blocker", "tools/mopup/mopup_plan.py", "    if extra:\n", "    if False:\n", "check",
           (pytest("tests/test_mopup.py", "resume_that_would"),)),
    Mutant("resume-lacking-blocker", "tools/mopup/mopup_plan.py", "    if lacking:\n", "    if False:\n", "check",
           (pytest("tests/test_mopup.py", "resume_that_would"),)),
    Mutant("resume-crashed-extra-kept", "tools/mopup/mopup_plan.py",
           'leaving = [d for d in task_of_dir if str(d) in tally_task or not (d / "result.json").exists()]',
           "leaving = [d for d in task_of_dir if str(d) in tally_task]", "check",
           (pytest("tests/test_mopup_slots.py", "crashed_extra"),)),
    # --- the governor carried out (tools/run/shard_run.py govern)
    Mutant("govern-no-park", "tools/run/shard_run.py", "    if missing:\n        shard.state = \"parked\"",
           "    if False:\n        shard.state = \"parked\"", "check", (pytest("tests/test_governor.py", "govern"),)),
    Mutant("govern-park-stays-stopped", "tools/run/shard_run.py", "        shard.state = \"parked\"\n",
           "        shard.state = \"stopped\"\n", "check", (pytest("tests/test_governor.py", "govern"),)),
    Mutant("govern-stops-the-oldest", "tools/run/shard_run.py",
           "key=lambda s: s.started_at)]", "key=lambda s: -s.started_at)]", "check",
           (pytest("tests/test_governor.py", "govern"),)),
    # --- the linger watch's grace (tools/run/harbor_guard.py)
    Mutant("linger-no-grace-after-finish", "tools/run/harbor_guard.py",
           "    if wait_for_exit(proc, grace, waker):\n        return Outcome(proc.returncode)",
           "    if wait_for_exit(proc, 0.0, waker):\n        return Outcome(proc.returncode)", "check",
           (pytest("tests/test_harbor_guard.py", "within_the_grace"),)),
    Mutant("linger-no-grace-after-interrupt", "tools/run/harbor_guard.py",
           "left = interrupted_since + grace - time.monotonic()", "left = interrupted_since - time.monotonic()",
           "check", (pytest("tests/test_harbor_guard.py", "within_the_grace"),)),
    Mutant("linger-stale-finish-counts", "tools/run/harbor_guard_job.py",
           "return done if done is not None and done != baseline else None", "return done", "check",
           (pytest("tests/test_harbor_guard.py", "stale_finished_result"),)),
    Mutant("linger-earlier-cancellation-counts", "tools/run/harbor_guard_job.py",
           "new = [name for name in trials if name not in self.before]", "new = list(trials)", "check",
           (pytest("tests/test_harbor_guard.py", "earlier_cancellation"),)),
    Mutant("signal-passed-on-twice", "tools/run/harbor_guard_signals.py",
           "            return  # once: a second Ctrl-C", "            pass  # once: a second Ctrl-C", "check",
           (pytest("tests/test_harbor_guard.py", "passed_on_once"),)),
    # --- credential shapes and scans (tools/hub/credentials.py)
    Mutant("cred-hf-unmixed", "tools/hub/credentials.py", 'rb"(?<![A-Za-z0-9_])hf_" + _MIXED.encode() + rb"',
           'rb"(?<![A-Za-z0-9_])hf_" + rb"', "check", ("tests/test_credentials.py",)),
    Mutant("cred-sk-no-lookbehind", "tools/hub/credentials.py", 'rb"(?<![A-Za-z0-9_-])sk-"', 'rb"sk-"', "check",
           ("tests/test_credentials.py",)),
    Mutant("cred-sk-unmixed", "tools/hub/credentials.py", 'sk-" + _MIXED.encode() + rb"', 'sk-" + rb"', "check",
           ("tests/test_credentials.py",)),
    Mutant("cred-github-pat-dropped", "tools/hub/credentials.py", "|github_pat_[A-Za-z0-9_]{40,}", "", "check",
           ("tests/test_credentials.py",)),
    Mutant("cred-aws-asia-dropped", "tools/hub/credentials.py", "(?:AKIA|ASIA)", "(?:AKIA)", "check",
           ("tests/test_credentials.py",)),
    Mutant("cred-aws-any-case", "tools/hub/credentials.py", 'rb"(?<![A-Z0-9])(?:AKIA', 'rb"(?i)(?<![A-Z0-9])(?:AKIA',
           "check", ("tests/test_credentials.py",)),
    Mutant("cred-aws-no-end", "tools/hub/credentials.py", "[0-9A-Z]{16}(?![A-Z0-9])", "[0-9A-Z]{16}", "check",
           ("tests/test_credentials.py",)),
    Mutant("cred-google-dropped", "tools/hub/credentials.py", "AIza[0-9A-Za-z_-]{35}", "AIzb[0-9A-Za-z_-]{35}", "check",
           ("tests/test_credentials.py",)),
    Mutant("cred-slack-dropped", "tools/hub/credentials.py", "xox[abprs]", "xox[aprs]", "check",
           ("tests/test_credentials.py",)),
    Mutant("cred-private-key-typed-only", "tools/hub/credentials.py", "-----BEGIN [A-Z ]*PRIVATE KEY-----",
           "-----BEGIN [A-Z]+ PRIVATE KEY-----", "check", ("tests/test_credentials.py",)),
    Mutant("cred-value-not-at-start", "tools/hub/credentials.py", "if start >= 0:", "if start > 0:", "check",
           ("tests/test_credentials.py",)),
    Mutant("cred-min-secret-off-by-one", "tools/hub/credentials.py", "and len(value) >= MIN_SECRET:",
           "and len(value) > MIN_SECRET:", "check", ("tests/test_credentials.py",)),
    Mutant("cred-links-read", "tools/hub/credentials.py", "if not os.path.isfile(path) or os.path.islink(path):",
           "if not os.path.isfile(path):", "check", ("tests/test_credentials.py",)),
    Mutant("cred-special-files-read", "tools/hub/credentials.py", "if not os.path.isfile(path) or os.path.islink(path):",
           "if os.path.islink(path):", "check", ("tests/test_credentials.py",)),
    Mutant("cred-cap-off-by-one", "tools/hub/credentials.py", "if st.st_size > SCAN_CAP:", "if st.st_size > SCAN_CAP + 1:",
           "check", ("tests/test_credentials.py",)),
    # --- boundaries
    Mutant("watch-alarm-at-the-rate", "tools/run/watch_alarms.py", "f.sandbox_rate_hour > max_infra_rate",
           "f.sandbox_rate_hour >= max_infra_rate", "check", (pytest("tests/test_watch.py", "infra_alarm"),)),
    Mutant("fraction-above-1", "tools/settings_types.py", "else self.low <= number <= self.high)",
           "else self.low <= number)", "check",
           ("bats tests/settings.bats -f 'MAX_INFRA_RATE is a fraction'",)),
    Mutant("years-unguarded", "tools/results/tally_trials.py", "YEARS = (2000, 2199)      # a trial's timestamps",
           "YEARS = (1, 9999)      # a trial's timestamps", "check",
           (pytest("tests/test_tally.py", "years_2000"),)),
    Mutant("years-local-not-utc", "tools/results/tally_trials.py", "if not YEARS[0] <= utc.year <= YEARS[1]:",
           "if not YEARS[0] <= dt.year <= YEARS[1]:", "check", (pytest("tests/test_tally.py", "years_2000"),)),
    Mutant("t975-odd-even-swapped", "tools/results/slots.py", "    if df % 2:  #", "    if not df % 2:  #", "check",
           (pytest("tests/test_tally_slots.py", "t975 or k12"),)),
    Mutant("t975-df1-series", "tools/results/slots.py", "term = total = c if df > 1 else 0.0", "term = total = c", "check",
           (pytest("tests/test_tally_slots.py", "t975 or k12"),)),
    Mutant("t975-wrong-level", "tools/results/slots.py", "t_central(mid, df) < 0.95", "t_central(mid, df) < 0.9", "check",
           (pytest("tests/test_tally_slots.py", "t975 or k12"),)),
    Mutant("truncated-name-ambiguous", "tools/results/tally_core.py", "len(by_prefix.get(t.task, ())) == 1",
           "len(by_prefix.get(t.task, ())) >= 1", "check", (pytest("tests/test_tally.py", "truncated_name_fits"),)),
    # --- one rule, several places: does this trial settle its slot?
    Mutant("settled-unfinished-counts", "tools/results/slots.py",
           'return (trial.status == "finished" and not (trial.outcome', "return (not (trial.outcome", "check",
           ("tests/test_tally_slots.py", "tests/test_watch.py")),
    Mutant("mopup-unreadable-not-moved", "tools/mopup/mopup_plan.py", 'for x in t["trials"] if not x["settled"]]',
           'for x in t["trials"] if x["infra"]]', "check", ("tests/test_mopup_slots.py", "tests/test_mopup_hostile.py")),
    Mutant("retry-k1-unfinished-left", "tools/results/tally_core.py", "open_slots=0 if verdict or final else filled.open,",
           "open_slots=0 if verdict or final else filled.open if finished else 0,", "check",
           ("tests/test_tally.py", "tests/test_mopup_hostile.py")),
    Mutant("retry-k-verdict-retried", "tools/results/tally_core.py", "open_slots=0 if verdict or final else filled.open,",
           "open_slots=0 if final else filled.open,", "check", ("tests/test_mopup_slots.py",)),
    # --- ... and read, never decided again, by every consumer of the tally's report
    Mutant("retry-targets-rederived", "tools/results/tally_core.py", 'for e in report["per_task"] if e["open_slots"]]',
           'for e in report["per_task"] if e["outcome"] in ("errored", "unfinished") and not e["verdict"]]', "check",
           (pytest("tests/test_tally_slots.py", "consumer"),)),
    Mutant("mopup-error-rederived", "tools/mopup/mopup_plan.py", 'infra = [x for x in t["trials"] if x["infra"]]',
           'infra = [x for x in t["trials"] if x["outcome"] == "errored"]', "check",
           (pytest("tests/test_tally_slots.py", "fields"),)),
    Mutant("shards-settled-rederived", "tools/run/shards.py", 'for t in row["trials"] if t["settled"]]',
           'for t in row["trials"] if t["outcome"] in ("passed", "failed")]', "check",
           (pytest("tests/test_tally_slots.py", "consumer"),)),
    Mutant("watch-settled-rederived", "tools/run/watch.py",
           'settled = report["tasks"] * k - sum(e["open_slots"] for e in report["per_task"])',
           'settled = report["passed"] + report["failed"] + report["unclassified"] + errored["final"]', "check",
           (pytest("tests/test_tally_slots.py", "consumer"),)),
    # --- make calibrate: a key among evalscope's arguments is in every process listing
    Mutant("calibrate-api-key-accepted", "tools/money/calibrate.py", "    if ns.api_key:\n", "    if False:\n", "check",
           (pytest("tests/test_calibrate.py", "key_among"),)),
    # --- ... and the token it is sent, wherever evalscope would print, log or keep it
    Mutant("calibrate-records-unredacted", "tools/money/calibrate_evalscope.py",
           "with captured_output(log, redactor), redacted_records(redactor):", "with captured_output(log, redactor):",
           "check", (pytest("tests/test_calibrate.py", "evalscope_runs"),)),
    Mutant("calibrate-output-on-terminal", "tools/money/calibrate_evalscope.py",
           "with captured_output(log, redactor), redacted_records(redactor):", "with redacted_records(redactor):",
           "check", (pytest("tests/test_calibrate.py", "evalscope_runs"),
                     "bats tests/calibrate.bats -f 'rejects the token'")),
    Mutant("calibrate-files-unredacted", "tools/money/calibrate_evalscope.py", "        redact_tree(raw, redactor)\n",
           "        pass\n", "check", (pytest("tests/test_calibrate.py", "evalscope_runs"),)),
    Mutant("calibrate-answer-unredacted", "tools/money/calibrate_evalscope.py",
           "output.error = redactor.text(output.error)", "output.error = output.error", "check",
           (pytest("tests/test_calibrate.py", "each_request"),)),
    Mutant("calibrate-401-a-timeout", "tools/money/calibrate_evalscope.py", "    if failure.status is not None:\n",
           "    if False:\n", "check", (pytest("tests/test_calibrate.py", "failed_request"),
                                       "bats tests/calibrate.bats -f 'rejects the token'")),
    # --- hardening IV (issue 41): every verb checks the watchdog's settings, a settings file is
    # data, a run's identity is its instance, the watchdog's reads are bounded, a dry run launches
    # and writes nothing
    Mutant("watchdog-settings-per-verb", "tools/settings_rules.py", "RULES = (watchdog_grace, ", "RULES = (",
           "check", ("bats tests/settings.bats -f 'bad watchdog or make reproduce'",)),
    Mutant("settings-file-token-line-shown", "tools/settings.py", "        if TOKEN.search(raw):\n",
           "        if False:\n", "check", ("bats tests/settings.bats -f 'is not a setting is refused'",)),
    Mutant("watchdog-any-instance", "tools/run/watchdog.py",
           'return {"project": self.project, "run": self.run, "instance": self.instance}',
           'return {"project": self.project, "run": self.run}', "check",
           (pytest("tests/test_watchdog.py", "another_checkout"),)),
    Mutant("serve-beside-another-instance", "scripts/serve.sh", '  refuse_other_servers "$namespace"\n', "", "check",
           ("bats tests/identity.bats -f 'serve refuses'",)),
    Mutant("cost-counts-another-instance", "tools/money/cost_jobs.py",
           'elif instance and job["labels"].get("instance", instance) != instance:', "elif False:", "check",
           (pytest("tests/test_cost.py", "another_checkouts"),)),
    Mutant("metrics-no-deadline", "tools/run/watchdog.py",
           "                if time.monotonic() >= end:\n                    return Metrics(",
           "                if False:\n                    return Metrics(", "check",
           (pytest("tests/test_watchdog.py", "trickles"),)),
    Mutant("holder-scheduled-for-ever", "tools/run/watchdog.py", 'return h.stage != "RUNNING" and', "return False and",
           "check", (pytest("tests/test_watchdog.py", "scheduling or decision_table"),)),
    Mutant("doctor-dry-run-launches", "scripts/doctor.sh", "  if is_dry_run; then\n    with_launch_label argv",
           "  if false; then\n    with_launch_label argv", "check",
           ("bats tests/doctor.bats -f 'CHECK_TIMEOUT=1 DRY_RUN=1'",)),
    Mutant("dry-run-writes-home", "scripts/lib.sh", "! is_dry_run || dry_run_home\n", "", "check",
           ("bats tests/dry-run.bats -f 'writes nothing under HOME'",)),
    Mutant("heartbeat-never-ends", "scripts/lib-watchdog.sh", '    lock_is_held "$lock" || return 0',
           '    lock_is_held "$lock" || true', "check", ("bats tests/lock.bats -f 'heartbeat beats while anything'",)),
]


def copy_checkout(dest: Path) -> None:
    """The checkout's files as they are now (tracked and untracked, not ignored), .venv and
    tests/node_modules linked."""
    names = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                           capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, names):
        src = REPO / name
        if not os.path.lexists(src):
            continue  # deleted in the work tree
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            os.symlink(os.readlink(src), target)
        else:
            shutil.copy2(src, target)
    for linked in (".venv", "tests/node_modules"):
        os.symlink(REPO / linked, dest / linked)


def argv_of(test: str, tier: str, root: Path) -> list[str]:
    words = test.split(" ")
    if words[0] == "bats":
        pattern = test.split(" -f ", 1)[1].strip("'")
        args = [str(root / ".venv/bin/bats"), words[1], "-f", pattern]
        return args + (["--filter-tags", CHECK_BATS_TAGS] if tier == "check" else [])
    args = [str(root / ".venv/bin/python"), "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", words[0]]
    if " -k " in test:
        args += ["-k", test.split(" -k ", 1)[1]]
    return args + (["-m", CHECK_PYTEST_MARKS] if tier == "check" else [])


def run_tests(mutant: Mutant, root: Path) -> tuple[bool, str]:
    """(every test passed, the first failing test's last lines)."""
    env = dict(os.environ, PYTHONPATH=str(root), PYTHONDONTWRITEBYTECODE="1")
    env.pop("CLI_SETTINGS", None)
    for test in mutant.tests:
        try:
            proc = subprocess.run(argv_of(test, mutant.tier, root), cwd=root, env=env, capture_output=True, text=True,
                                  timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return False, f"{test}: no end within {TIMEOUT_S} s"
        if proc.returncode != 0:
            return False, f"{test}: " + " | ".join((proc.stdout + proc.stderr).strip().splitlines()[-2:])
    return True, ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", metavar="NAME", help="these mutants alone")
    parser.add_argument("--list", action="store_true", help="list the mutants and run nothing")
    opts = parser.parse_args()
    chosen = [m for m in MUTANTS if not opts.only or m.name in opts.only]
    if opts.only and len(chosen) != len(set(opts.only)):
        print(f"mutants: unknown name(s): {sorted(set(opts.only) - {m.name for m in MUTANTS})}", file=sys.stderr)
        return 2
    if opts.list:
        for m in chosen:
            print(f"{m.name:32} {m.tier:6} {m.file}: {', '.join(m.tests)}")
        return 0
    for m in chosen:
        count = (REPO / m.file).read_text().count(m.original)
        if count != 1:
            print(f"mutants: {m.name}: its text is in {m.file} {count} times, not once: update the mutant",
                  file=sys.stderr)
            return 2
    with tempfile.TemporaryDirectory(prefix="mutants.") as scratch:
        root = Path(scratch)
        copy_checkout(root)
        baseline = {}
        for m in chosen:  # every test a mutant relies on passes unmutated
            for test in m.tests:
                key = (test, m.tier)
                if key not in baseline:
                    baseline[key] = run_tests(Mutant("none", m.file, "", "", m.tier, (test,)), root)
                    if not baseline[key][0]:
                        print(f"mutants: the unmutated tree fails {test}: {baseline[key][1]}", file=sys.stderr)
                        return 2
        caught = 0
        for m in chosen:
            path = root / m.file
            text = path.read_text()
            path.write_text(text.replace(m.original, m.replacement, 1))
            started = time.monotonic()
            try:
                passed, why = run_tests(m, root)
            finally:
                path.write_text(text)
            caught += not passed
            verdict = "caught  " if not passed else "SURVIVED"
            print(f"{verdict} {m.name:32} [{m.tier}] {m.file} ({time.monotonic() - started:.0f} s)"
                  + ("" if passed else f"  by {why.split(':', 1)[0]}"), flush=True)
    print(f"mutants: {caught} of {len(chosen)} caught, {len(chosen) - caught} survived")
    return 0 if caught == len(chosen) else 1


if __name__ == "__main__":
    sys.exit(main())
