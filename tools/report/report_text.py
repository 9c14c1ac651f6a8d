"""report_text: the comparison as Markdown (make compare) and the README's results section.

k = 1 comparisons read exactly as they always did. With any run at k > 1 the table gains k,
the mean task pass fraction with its interval and pass@k, the matrix shows each task's pass
fraction (passed / scored attempts) and its slots, the McNemar flips give way to the paired
bootstrap over tasks (tools/results/report_stats.py), and the caption states each run's k and
accounting. When a run's cost is known (tools/report/report_cost.py), a cost column and its price
source; a run whose cost cannot be known says why, in one line.
"""

from __future__ import annotations

from tools import fmt
from tools.results import slots
from tools.results.report_load import OUTCOMES, SCORED, fail

RESULTS_START = "<!-- results:start -->"
RESULTS_END = "<!-- results:end -->"


def interval_text(iv: list[float] | None) -> str:
    return fmt.UNKNOWN if not iv else f"{100 * iv[0]:.1f}–{100 * iv[1]:.1f}%"


def human(n: int | float | None) -> str:
    """5_680_000 → 5.68M; 681_000 → 681K; None → fmt.UNKNOWN."""
    if n is None:
        return fmt.UNKNOWN
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "K")):
        if abs(n) >= div:
            v = n / div
            return f"{v:.3g}{suffix}" if v < 1000 else f"{v:.0f}{suffix}"
    return f"{n:g}"


def num(x: float | None, digits: int) -> str:
    return fmt.UNKNOWN if x is None else f"{x:.{digits}f}"


def p_text(p: float | None) -> str:
    if p is None:
        return fmt.UNKNOWN
    return f"{p:.3g}" if p >= 0.001 else "<0.001"


def signed_pct(x: float | None) -> str:
    return fmt.UNKNOWN if x is None else f"{100 * x:+.1f} pp"


def fraction_text(cell: dict) -> str:
    """A task's pass fraction, `3/5`; fmt.UNKNOWN when no attempt was scored."""
    return f"{cell['passed_attempts']}/{cell['scored_attempts']}" if cell["scored_attempts"] else fmt.UNKNOWN


def cell_text(cell: dict) -> str:
    if "slots" in cell:  # attempts mode: the fraction, then every slot (✓ ✗ E ? …)
        return f"{fraction_text(cell)} {slots.glyphs(cell['slots'])}"
    return cell["outcome"] + (f" ({cell['exception_type']})" if cell.get("exception_type") else "")


def extra_outcome_columns(runs: list[dict]) -> list[str]:
    return [k for k in ("unclassified", "unfinished") if any(r[k] for r in runs)]


def shows_cost(cmp: dict) -> bool:
    """Cost is shown when any run was named (a tally file or job dir has no run state to price)."""
    return any(r.get("cost") is not None for r in cmp["runs"])


def cost_cells(run: dict) -> list[str]:
    cost = run.get("cost")
    if not cost or not cost["known"]:
        return [fmt.UNKNOWN, fmt.UNKNOWN]
    return [fmt.dollars(cost["total_usd"]), fmt.dollars(cost["usd_per_pass"])]


def run_interval(run: dict) -> list[float] | None:
    """The 95% interval of the mean task pass fraction: its bootstrap at k > 1, else Wilson's of the
    pass rate. Not the headline's at k > 1 (headline says which is)."""
    b = run.get("bootstrap95")
    return [b["low"], b["high"]] if b else run["wilson95"]


def headline(run: dict) -> tuple[float | None, list[float] | None]:
    """A run's headline figure and its one interval: at k > 1 the board's rate with its replicate
    interval (docs/tally.md §4), else the pass rate excluding infra errors with Wilson's."""
    lb = run.get("leaderboard")
    if run.get("n_attempts", 1) > 1 and lb and lb["value"] is not None:
        iv = lb["interval95"]
        return lb["value"], [iv["low"], iv["high"]] if iv else None
    return run["pass_rate"], run["wilson95"]


def board_cells(run: dict) -> list[str]:
    """The board's figure and its replicate interval (a k = 1 run has none); provisional marked."""
    lb = run.get("leaderboard")
    if not lb or lb["value"] is None:
        return [fmt.UNKNOWN, fmt.UNKNOWN]
    iv = lb["interval95"]
    mark = f" (provisional: {lb['open_slots']} open)" if lb["provisional"] else ""
    return [f"{fmt.percent(lb['value'])} ({lb['passed']}/{lb['trials']}){mark}",
            interval_text([iv["low"], iv["high"]]) if iv else fmt.UNKNOWN]


def summary_table(cmp: dict) -> list[str]:
    runs = cmp["runs"]
    extra = extra_outcome_columns(runs)
    cost = ["Cost", "$ / pass"] if shows_cost(cmp) else []
    if cmp.get("attempts_mode"):
        head = (["Run", "Agent", "k", "Headline: leaderboard rate (passed / tasks × k)", "Its 95% CI (replicates)",
                 "Mean task pass fraction (not the headline)", "Its 95% CI", "Passed / Scored attempts",
                 "pass@k", "Errored attempts"] + [e.capitalize() for e in extra]
                + ["Tokens in / out", "Agent hours", "Trials / task"] + cost)
    else:
        head = (["Run", "Agent", "Pass rate (excl. infra)", "95% CI (Wilson)", "Passed / Scored",
                 "Errored"] + [e.capitalize() for e in extra]
                + ["Tokens in / out", "Agent hours", "Attempts / task"] + cost)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in runs:
        if cmp.get("attempts_mode"):
            pk = r["pass_at_k"]
            method = "bootstrap" if r["bootstrap95"] else "Wilson"
            rate = [str(r["n_attempts"]), *board_cells(r), fmt.percent(r["mean_task_pass_fraction"]),
                    f"{interval_text(run_interval(r))} ({method})", f"{r['passed']}/{r['scored']}",
                    f"{fmt.percent(pk['value'])} (k = {pk['k']})" if pk else fmt.UNKNOWN]
        else:
            rate = [fmt.percent(r["pass_rate"]), interval_text(r["wilson95"]), f"{r['passed']}/{r['scored']}"]
        cells = ([r["run"], r["agent"] or fmt.UNKNOWN] + rate + [str(r["errored"])]
                 + [str(r[e]) for e in extra]
                 + [f"{human(r['tokens_in'])} / {human(r['tokens_out'])}",
                    num(r["agent_hours"], 1), num(r["attempts_per_task"], 2)]
                 + (cost_cells(r) if cost else []))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def cost_notes(cmp: dict) -> list[str]:
    """One line per run under a table with a cost column: its price source, or why it is unknown."""
    if not shows_cost(cmp):
        return []
    out = ["Cost: what the run's HF Jobs cost (server, sandboxes, remote jobs; `make cost RUN=<run>` lists "
           "each job); $ / pass = cost / passed tasks (k = 1) or passed attempts (k > 1)."]
    for r in cmp["runs"]:
        cost = r.get("cost")
        if cost is None:
            out.append(f"- {r['run']}: cost unknown: a tally file or job dir names no run, so there is no "
                       f"manifest to price; name the run instead.")
        elif cost["known"]:
            out.append(f"- {r['run']}: {fmt.dollars(cost['total_usd'])}; prices: {cost['prices']}.")
        else:
            out.append(f"- {r['run']}: cost unknown: {cost['why']}")
    return out


def flips_table(cmp: dict) -> list[str]:
    lines = ["| A | B | A passed, B failed | A failed, B passed | Both passed | Both failed "
             "| Not scored in both | Exact McNemar p |", "|" + "---|" * 8]
    for f in cmp["flips"]:
        lines.append(f"| {f['a']} | {f['b']} | {f['a_passed_b_failed']} | {f['a_failed_b_passed']} "
                     f"| {f['both_passed']} | {f['both_failed']} | {f['not_comparable']} "
                     f"| {p_text(f['mcnemar_exact_p'])} |")
    return lines


PAIRED_TITLE = "Paired comparison (per-task pass fractions, paired bootstrap over tasks)"


def paired_table(cmp: dict) -> list[str]:
    lines = ["| A | B | Tasks scored in both | A higher | B higher | Equal | Not scored in both "
             "| Mean difference (A − B) | 95% CI (paired bootstrap) |", "|" + "---|" * 9]
    for p in cmp["paired"]:
        b = p["bootstrap95"]
        ci = fmt.UNKNOWN if b is None else f"{signed_pct(b['low'])} to {signed_pct(b['high'])}"
        lines.append(f"| {p['a']} | {p['b']} | {p['tasks_compared']} | {p['a_higher']} | {p['b_higher']} "
                     f"| {p['equal']} | {p['not_comparable']} | {signed_pct(p['mean_difference'])} | {ci} |")
    return lines


def paired_caption() -> str:
    return (f"Per task, A's pass fraction minus B's, over the tasks with a scored attempt in both; the "
            f"interval resamples the tasks ({slots.BOOTSTRAP_RESAMPLES:,} resamples, seed {slots.BOOTSTRAP_SEED}); "
            f"one that excludes 0 is a difference at the 5% level.")


def pairs_section(cmp: dict, heading: str) -> list[str]:
    if cmp.get("paired"):
        return ["", f"{heading}{PAIRED_TITLE}", "", paired_caption(), ""] + paired_table(cmp)
    if cmp["flips"]:
        return ["", f"{heading}Flips (McNemar: tasks scored in both runs)", ""] + flips_table(cmp)
    return []


def matrix_table(cmp: dict) -> list[str]:
    names = [r["run"] for r in cmp["runs"]]
    lines = ["| Task | " + " | ".join(names) + " |", "|" + "---|" * (len(names) + 1)]
    for row in cmp["matrix"]:
        mark = "≠ " if row["disagree"] else ""
        lines.append(f"| {mark}{row['task']} | "
                     + " | ".join(cell_text(c) for c in row["cells"]) + " |")
    return lines


def attempts_caption(cmp: dict) -> str:
    """Each run's k and accounting, and what its pass rate is (k > 1 comparisons only)."""
    parts = []
    for r in cmp["runs"]:
        what = ("the headline is the board's rate, passed / (tasks × k), with its 95% CI from the replicates; "
                "* while slots are open"
                if r["n_attempts"] > 1 else "passed / scored tasks, Wilson 95% CI")
        parts.append(f"{r['run']}: k = {r['n_attempts']}, {r['accounting']} ({what})")
    return ("Runs: " + "; ".join(parts) + ". A task's pass fraction is passed / scored attempts "
            "(✓ passed, ✗ failed, E errored, ? unclassified, … unfinished per slot).")


def caption(cmp: dict) -> str:
    policies = sorted({r["policy"] for r in cmp["runs"]})
    text = (f"Accounting: {cmp['accounting_text']}. Pass rate = passed / scored; "
            f"interval: {cmp['interval']}; tokens in include cached tokens. "
            f"Outcome policy: {', '.join(policies)}.")
    if cmp.get("attempts_mode"):
        text = (f"Accounting: {cmp['accounting_text']}. Tokens in include cached tokens. "
                f"Outcome policy: {', '.join(policies)}. " + attempts_caption(cmp))
    return text


def matrix_heading(cmp: dict) -> str:
    what = "pass fractions" if cmp.get("attempts_mode") else "outcomes"
    return f"Per-task {what} ({cmp['disagreements']} of {len(cmp['matrix'])} tasks differ, listed first, marked ≠)"


def compare_markdown(cmp: dict) -> str:
    names = [r["run"] for r in cmp["runs"]]
    out = [f"## Comparison: {' vs '.join(names)}", "", caption(cmp), ""]
    out += summary_table(cmp)
    notes = cost_notes(cmp)
    if notes:
        out += [""] + notes
    out += pairs_section(cmp, "### ")
    out += ["", f"### {matrix_heading(cmp)}", ""] + matrix_table(cmp)
    out += ["", "Sources: " + "; ".join(
        f"{r['run']}: {', '.join(r['job_dirs']) or r['source']}" for r in cmp["runs"])]
    return "\n".join(out) + "\n"


def outcome_table(run: dict) -> list[str]:
    """The reference's per-run table: Outcome | Count | % of N (attempts, tasks × k, at k > 1)."""
    k = run.get("n_attempts", 1)
    n = run["tasks"] * k
    labels = {"passed": "Passed", "failed": "Failed (scored)", "errored": "Errored (infra, unscored)",
              "unclassified": "Unclassified", "unfinished": "Unfinished"}
    head = f"| Outcome | Count | % of {n} |" if k == 1 else (
        f"| Outcome | Attempts | % of {n} ({run['tasks']} tasks × {k}) |")
    lines = [head, "|---|---|---|"]
    for key in OUTCOMES:
        if key in SCORED or key == "errored" or run[key]:
            lines.append(f"| {labels[key]} | {run[key]} | {fmt.percent(run[key] / n if n else None)} |")
    return lines


def rate_line(run: dict) -> str:
    if run.get("n_attempts", 1) == 1:
        return (f"Pass rate excluding infra errors: **{fmt.percent(run['pass_rate'])}** "
                f"({run['passed']}/{run['scored']}), 95% CI {interval_text(run['wilson95'])}.")
    pk = run["pass_at_k"]
    lb = run["leaderboard"]
    iv = lb["interval95"]
    other = slots.other_figures_line(lb)  # the board's pass@j, trial duration and tokens
    provisional = (f" PROVISIONAL: {lb['open_slots']} of {lb['trials']} slots are open (not passed until mop-up "
                   f"fills them)." if lb["provisional"] else "")
    return (f"k = {run['n_attempts']} attempts per task. Leaderboard resolution rate (passed / tasks × k, as the "
            f"board counts): **{fmt.percent(lb['value'])}** ({lb['passed']}/{lb['trials']}), 95% CI "
            f"{interval_text([iv['low'], iv['high']] if iv else None)}: the headline and its interval (the "
            f"{lb['k']} replicates, t interval; the board's ± appears to be this spread).{provisional} Not the "
            f"headline: the mean over tasks of each task's pass fraction, {fmt.percent(run['mean_task_pass_fraction'])}, "
            f"its own 95% CI {interval_text(run_interval(run))} (task-level bootstrap); attempts passed / scored "
            f"{run['passed']}/{run['scored']}; pass@{pk['k']} {fmt.percent(pk['value'])}." + (f" {other}." if other else ""))


def cost_line(run: dict) -> str:
    cost = run.get("cost")
    if cost is None:
        return ""
    if not cost["known"]:
        return f" Cost unknown: {cost['why'].rstrip('.')}."
    per = "passed task" if run.get("n_attempts", 1) == 1 else "passed attempt"
    return (f" Cost: **{fmt.dollars(cost['total_usd'])}** ({fmt.dollars(cost['usd_per_pass'])} per {per}; "
            f"prices: {cost['prices']}).")


def results_markdown(cmp: dict, figures: dict[str, str] | None = None) -> str:
    """The README's results section: per-run tables, then the comparison."""
    out = [caption(cmp), ""]
    for run in cmp["runs"]:
        label = run["run"] + (f" — {run['agent']}, {run['model']}" if run["agent"] else "")
        out += [f"#### {label}", ""] + outcome_table(run)
        out += ["", f"{rate_line(run)}{cost_line(run)} "
                    f"Source: {', '.join(run['job_dirs']) or run['source']}.", ""]
    if len(cmp["runs"]) > 1:
        out += ["#### Comparison", ""] + summary_table(cmp)
        if cmp.get("paired"):
            out += ["", f"{PAIRED_TITLE}. {paired_caption()}", ""] + paired_table(cmp) + [""]
        else:
            out += ["", "Tasks scored in both runs that flipped (exact McNemar test):", ""]
            out += flips_table(cmp) + [""]
    for alt, rel in (figures or {}).items():
        out += [f"![{alt}]({rel})", ""]
    return "\n".join(out).rstrip("\n") + "\n"


def replace_results_section(readme: str, section: str) -> str:
    """README text with the part between the results markers replaced (idempotent)."""
    starts, ends = readme.count(RESULTS_START), readme.count(RESULTS_END)
    if starts != 1 or ends != 1:
        fail(f"the README must hold exactly one {RESULTS_START} and one {RESULTS_END} "
             f"(found {starts} and {ends}). Add the pair where the results belong.")
    if readme.index(RESULTS_END) < readme.index(RESULTS_START):
        fail(f"{RESULTS_END} comes before {RESULTS_START} in the README; swap them")
    head, rest = readme.split(RESULTS_START)
    _, tail = rest.split(RESULTS_END)
    return f"{head}{RESULTS_START}\n{section.rstrip()}\n{RESULTS_END}{tail}"
