#!/usr/bin/env python3
"""calibrate: load-test a run's live server with evalscope perf, and record what it measured.

    python -m tools.money.calibrate --out state/<run>/calibration.json --run RUN --profile SERVER
        --flavor F --dp N --tp N [--agent-context N] -- <evalscope perf arguments>

The load test is evalscope's own (`evalscope perf`, pinned in env/requirements.txt): its
arguments after `--` are parsed by its own parser (evalscope.perf.arguments) and run by its own
runner (evalscope.perf.main.run_perf_benchmark), exactly as `evalscope perf <arguments>` would,
but for one thing: the endpoint's key. The HF jobs proxy wants the HF token as a bearer, and
evalscope takes it only as --api-key, an argument every local user could read in the process
list; so it is read here from OPENAI_API_KEY (scripts/calibrate.sh puts the token there, never on
a command line) and handed to evalscope's Arguments as data, and a key among the arguments is
refused. evalscope masks it in the arguments it logs, not in an error body that repeats it; so
evalscope runs under tools/money/calibrate_evalscope.py, which keeps the token out of what it prints,
logs and leaves, and its output (state/<run>/calibration/evalscope.log) off the terminal: a
failure is one line with its cause (a 401, a refused connection, a timeout), where evalscope says
"TimeoutError: Test connection failed" for each.

What is recorded, per concurrency level: the requests, how many succeeded, the mean time to
first token, time per output token and output throughput, as evalscope measured them; with the
server it measured (the run's profile, flavor, replicas and tensor-parallel size, which make
plan matches against its candidates) and the workload. Written atomically; nothing else.
Exit codes: 0 done, 1 a user-facing error (the message says what), 2 usage.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

import click

from tools import hf_client, safe_read
from tools.money import calibrate_evalscope


class CalibrateError(click.ClickException):
    def show(self, file=None) -> None:  # in the verb's voice
        click.echo(f"calibrate: {self.message}", file=file, err=True)


# evalscope's summary keys (evalscope/perf/utils/benchmark_util.py, as its benchmark_summary.json
# shows them) and the calibration's names for them.
METRICS = {
    "Avg TTFT (ms)": "ttft_ms",
    "Avg TPOT (ms)": "tpot_ms",
    "Output Throughput (tok/s)": "output_tok_s",
    "Total Throughput (tok/s)": "total_tok_s",
    "Avg Latency (s)": "latency_s",
}


def evalscope_arguments(argv: list[str], api_key: str | None):
    """evalscope perf's own Arguments for `argv`, through its own parser, with the key as data."""
    from evalscope.perf.arguments import Arguments, add_argument

    parser = argparse.ArgumentParser(prog="evalscope perf", exit_on_error=False)
    add_argument(parser)
    try:
        ns = parser.parse_args(argv)
    except (argparse.ArgumentError, SystemExit) as e:
        raise CalibrateError(f"evalscope perf does not take these arguments: {safe_read.clip(str(e), 200)}") from None
    if ns.api_key:
        raise CalibrateError("a key on the command line is in every process listing: put it in OPENAI_API_KEY")
    ns.api_key = api_key or None
    return Arguments.from_args(ns)


def finite(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
        else None


def levels_of(results: dict) -> list[dict]:
    """evalscope's results ({parallel_C_number_N: {metrics: {...}}}) as the calibration's levels,
    by concurrency."""
    out = []
    for key, result in results.items():
        metrics = (result or {}).get("metrics") or {}
        if hasattr(metrics, "model_dump"):  # evalscope's BenchmarkSummary: by its JSON names
            metrics = metrics.model_dump(by_alias=True)
        level = {"concurrency": finite(metrics.get("Concurrency")),
                 "requests": finite(metrics.get("Total Requests")),
                 "succeeded": finite(metrics.get("Success Requests")),
                 "failed": finite(metrics.get("Failed Requests"))}
        level.update({ours: finite(metrics.get(theirs)) for theirs, ours in METRICS.items()})
        level["run"] = safe_read.printable(str(key))[:80]
        out.append(level)
    return sorted(out, key=lambda x: x["concurrency"] or 0)


@click.command(context_settings={"ignore_unknown_options": True})
@click.option("--out", "out_path", type=click.Path(path_type=Path), required=True, help="state/<run>/calibration.json")
@click.option("--run", required=True)
@click.option("--profile", required=True, help="SERVER: the profile the live server runs")
@click.option("--flavor", required=True)
@click.option("--dp", type=click.IntRange(1, 64), default=1)
@click.option("--tp", type=click.IntRange(1, 64), default=1)
@click.option("--prompt-tokens", type=click.IntRange(1, 10**7), required=True)
@click.option("--shared-prefix-tokens", type=click.IntRange(0, 10**7), required=True)
@click.option("--output-tokens", type=click.IntRange(1, 10**6), required=True)
@click.argument("evalscope_argv", nargs=-1, type=click.UNPROCESSED)
def cli(out_path, run, profile, flavor, dp, tp, prompt_tokens, shared_prefix_tokens, output_tokens, evalscope_argv):
    """Run evalscope perf with EVALSCOPE_ARGV against the live server; record its levels in --out."""
    key = os.environ.get("OPENAI_API_KEY")
    redactor = calibrate_evalscope.Redactor([key, hf_client.token()])
    try:
        args = evalscope_arguments(list(evalscope_argv), key)
    except CalibrateError as e:  # an argument evalscope refused may be a key: calibrate's own output is redacted
        raise CalibrateError(redactor.text(e.message)) from None
    url = redactor.text(safe_read.printable(args.url))
    log, failure = Path(args.outputs_dir) / "evalscope.log", calibrate_evalscope.LastFailure()
    started = datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
    try:
        calibrate_evalscope.redacting_api(args.api, redactor, failure)
        results = calibrate_evalscope.run_perf(args, redactor, log)
    except Exception as e:  # evalscope's own failure (no connection, a refused request): one line
        raise CalibrateError(calibrate_evalscope.failure_line(failure, e, url, args.total_timeout, run, str(log))) \
            from None
    levels = levels_of(results or {})
    if not levels or not any(level["tpot_ms"] for level in levels):
        raise CalibrateError(calibrate_evalscope.failure_line(failure, None, url, args.total_timeout, run, str(log)))
    doc = {
        "run": run,
        "measured_at": started,
        "tool": f"evalscope {metadata.version('evalscope')} (evalscope perf)",
        "server": {"profile": profile, "flavor": flavor, "dp": dp, "tp": tp, "model": args.model,
                   "endpoint": url},
        "workload": {"prompt_tokens": prompt_tokens, "shared_prefix_tokens": shared_prefix_tokens,
                     "output_tokens": output_tokens,
                     "why": "an agent turn: a long conversation whose history the server has cached (the shared "
                            "prefix), a new part, and a reply (docs/plan.md §4)"},
        "levels": levels,
        "raw": str(args.outputs_dir),
    }
    out_path.parent.mkdir(parents=True, exist_ok=True)
    safe_read.write_atomic(out_path, json.dumps(doc, indent=1) + "\n")
    for level in levels:
        click.echo(f"calibrate: {level['concurrency']:g} at once: {level['succeeded']:g} of {level['requests']:g} "
                   f"requests, TTFT {level['ttft_ms']} ms, {level['tpot_ms']} ms per output token, "
                   f"{level['output_tok_s']} output tokens/s")
    click.echo(f"calibrate: wrote {safe_read.shown(str(out_path))}; make plan RUN={run} uses it")


if __name__ == "__main__":
    cli()
