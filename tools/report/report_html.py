"""report_html: the pictures (outcome bars, per-task heatmap, pass rate against dollars) and the
self-contained HTML report.

Every picture reads in black and white: a glyph or a figure in every cell, dark vs light vs
hatched fills. With any run at k > 1 the heatmap shows each task's pass fraction (passed /
scored attempts, a shade from light to dark green, the figure written in the cell) and the
bars count attempt slots. The pass-rate-against-dollars picture is drawn when at least two runs
have a known cost.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import io
import re

from tools import fmt
from tools.results.report_load import OUTCOMES
from tools.report.report_text import (caption, cell_text, cost_notes, flips_table,
                               interval_text, paired_caption, paired_table,
                               headline, summary_table, PAIRED_TITLE)


# --- pictures --------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Style:
    face: str
    hatch: str | None
    glyph: str
    text: str


# Readable in black and white: a glyph in every cell, dark vs light vs hatched fills.
STYLES = {
    "passed": Style("#1b5e20", None, "✓", "white"),
    "failed": Style("#f3c9c4", None, "✗", "black"),
    "errored": Style("#bdbdbd", "////", "E", "black"),
    "unclassified": Style("#ffffff", "....", "?", "black"),
    "unfinished": Style("#ffffff", None, "…", "black"),
}


def _matplotlib():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle
    matplotlib.rcParams.update({"svg.hashsalt": "report", "font.family": "DejaVu Sans",
                                "hatch.linewidth": 0.8})
    return plt, Patch, Rectangle


def short_exception(name: str | None, limit: int = 26) -> str:
    if not name:
        return ""
    name = name.removesuffix("Error") if len(name) > limit else name
    return name if len(name) <= limit else name[: limit - 1] + "…"


def legend_handles(Patch) -> list:
    return [Patch(facecolor=s.face, hatch=s.hatch, edgecolor="#444444",
                  label=f"{s.glyph} {k}") for k, s in STYLES.items()]


def heatmap_figure(cmp: dict):
    """Task × run grid; each cell an artist with gid cell-<run>-<task>."""
    plt, Patch, Rectangle = _matplotlib()
    runs, rows = cmp["runs"], cmp["matrix"]
    n_runs, n_tasks = len(runs), len(rows)
    col_w, row_h = 2.1, 0.26
    fig_w = 2.6 + col_w * n_runs
    differ = "pass fractions differ" if cmp.get("attempts_mode") else "outcomes differ"
    # Wrapped to the figure's own width, measured: one run's figure is narrower than its title.
    text = wrap_to_width(caption(cmp) + f" ≠: {differ} ({cmp['disagreements']} of {n_tasks} tasks).",
                         fig_w - 0.25, CAPTION_SIZE)
    extra = caption_room(cmp, text)
    fig_h = 2.05 + row_h * n_tasks + extra
    fig = plt.figure(figsize=(fig_w, fig_h), dpi=150)
    ax = fig.add_axes((2.4 / fig_w, (0.95 + extra) / fig_h, col_w * n_runs / fig_w, row_h * n_tasks / fig_h))
    title = ("Per-task pass fraction per run (≠: the runs disagree; listed first)"
             if cmp.get("attempts_mode") else "Per-task outcome per run (≠: the runs disagree; listed first)")
    fig.text(0.02, 1 - 0.12 / fig_h, wrap_to_width(title, fig_w * 0.98 - 0.1, 10, "bold"), fontsize=10,
             weight="bold", va="top")
    for i, row in enumerate(rows):
        for j, cell in enumerate(row["cells"]):
            style, label = cell_style(cell)
            rect = Rectangle((j, i), 1, 1, facecolor=style.face, hatch=style.hatch,
                             edgecolor="#444444", linewidth=0.6)
            rect.set_gid(f"cell-{j}-{row['task']}")
            ax.add_patch(rect)
            ax.text(j + 0.5, i + 0.5, label, ha="center", va="center", fontsize=7,
                    color=style.text,
                    bbox=None if not style.hatch else dict(facecolor="white", edgecolor="none",
                                                           pad=0.6, alpha=0.9))
    ax.set_xlim(0, n_runs)
    ax.set_ylim(n_tasks, 0)
    ax.set_xticks([j + 0.5 for j in range(n_runs)])
    ax.set_xticklabels([f"{r['run']}\n{r['agent'] or ''}\n{run_rate_text(r, cmp)}" for r in runs], fontsize=8)
    ax.xaxis.tick_top()
    ax.set_yticks([i + 0.5 for i in range(n_tasks)])
    ax.set_yticklabels([("≠ " if r["disagree"] else "") + r["task"] for r in rows], fontsize=7.5)
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    if cmp["disagreements"] and cmp["disagreements"] < n_tasks:
        ax.axhline(cmp["disagreements"], color="black", linewidth=1.6)
    handles = fraction_legend_handles(Patch) if cmp.get("attempts_mode") else legend_handles(Patch)
    fig.legend(handles=handles, loc="lower center", ncol=legend_columns(handles, fig_w - 0.2, 7), fontsize=7,
               frameon=False, bbox_to_anchor=(0.5, (0.42 + extra) / fig_h))
    fig.text(0.5, 0.06 / fig_h, text, ha="center", va="bottom", fontsize=CAPTION_SIZE)
    return fig


def run_rate_text(run: dict, cmp: dict) -> str:
    lb = run.get("leaderboard")
    if cmp.get("attempts_mode") and lb and lb["value"] is not None:
        return f"k = {run['n_attempts']}: {fmt.percent(lb['value'])} (board){' *' if lb['provisional'] else ''}"
    if cmp.get("attempts_mode"):
        return f"k = {run['n_attempts']}: {fmt.percent(run['mean_task_pass_fraction'])}"
    return f"{fmt.percent(run['pass_rate'])} ({run['passed']}/{run['scored']})"


def fraction_face(fraction: float) -> str:
    """Light (0 of the scored attempts passed) to dark green (all passed): readable in grey too."""
    light, dark = (0xf3, 0xc9, 0xc4), (0x1b, 0x5e, 0x20)
    rgb = [round(a + (b - a) * fraction) for a, b in zip(light, dark)]
    return "#" + "".join(f"{c:02x}" for c in rgb)


def cell_style(cell: dict) -> tuple[Style, str]:
    """A heatmap cell's fill and label: its outcome (k = 1), or its pass fraction (attempts mode)."""
    if "slots" not in cell:
        style = STYLES[cell["outcome"]]
        exc = short_exception(cell.get("exception_type"))
        return style, style.glyph + (f" {exc}" if exc else "")
    if not cell["scored_attempts"]:  # no scored attempt: the outcome of its slots, hatched as an error
        style = STYLES[cell["outcome"] if cell["outcome"] not in ("passed", "failed") else "errored"]
        return style, f"{fmt.UNKNOWN} {''.join(STYLES[o].glyph for o in cell['slots'])}"
    f = cell["pass_fraction"]
    return Style(fraction_face(f), None, "", "white" if f >= 0.5 else "black"), cell_text(cell)


def fraction_legend_handles(Patch) -> list:
    shades = [Patch(facecolor=fraction_face(f), edgecolor="#444444", label=label)
              for f, label in ((0.0, "none passed"), (0.5, "half passed"), (1.0, "all passed"))]
    s = STYLES["errored"]
    return shades + [Patch(facecolor=s.face, hatch=s.hatch, edgecolor="#444444",
                           label=f"{fmt.UNKNOWN}: no scored attempt")]


def caption_room(cmp: dict, text: str) -> float:
    """Inches more below the legend for the caption: a k > 1 caption's every line (longer: it
    states each run's k); a k = 1 caption's lines past the three the layout holds."""
    lines = text.count("\n") + 1
    return 0.1 * lines if cmp.get("attempts_mode") else 0.11 * max(0, lines - 3)


def wrap_caption(text: str, width: int) -> str:
    import textwrap
    return "\n".join(textwrap.wrap(text, width))


CAPTION_SIZE = 6.5


def text_width_in(text: str, size: float, weight: str = "normal") -> float:
    """Width in inches of one line of `text` as matplotlib draws it in its default font."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextToPath
    width, _, _ = TextToPath().get_text_width_height_descent(text, FontProperties(size=size, weight=weight),
                                                             ismath=False)
    return width / 72


def legend_columns(handles: list, width_in: float, size: float) -> int:
    """Columns of a one-row legend, or of two rows when one row would be wider than `width_in`:
    each entry is its label and about 0.5 in of swatch and spacing."""
    row = sum(text_width_in(h.get_label(), size) + 0.5 for h in handles)
    return len(handles) if row <= width_in else -(-len(handles) // 2)


def wrap_to_width(text: str, width_in: float, size: float, weight: str = "normal") -> str:
    """`text` wrapped at word boundaries into lines no wider than `width_in` inches when drawn."""
    lines: list[str] = []
    line = ""
    for word in text.split():
        trial = f"{line} {word}" if line else word
        if line and text_width_in(trial, size, weight) > width_in:
            lines.append(line)
            line = word
        else:
            line = trial
    return "\n".join([*lines, line] if line else lines)


def outcome_bar_figure(cmp: dict):
    """One horizontal stacked bar per run: counts of each outcome, pass rate at the right."""
    plt, Patch, _ = _matplotlib()
    runs = cmp["runs"]
    text = wrap_caption(caption(cmp), 140)
    extra = caption_room(cmp, text)
    fig_h = 1.7 + 0.55 * len(runs) + extra
    fig = plt.figure(figsize=(9, fig_h), dpi=150)
    ax = fig.add_axes((0.2, (1.05 + extra) / fig_h, 0.52, 0.55 * len(runs) / fig_h))
    # k > 1: a run's outcomes are counted over its attempt slots (tasks × k).
    units = [r["tasks"] * r.get("n_attempts", 1) for r in runs]
    for y, run in enumerate(runs):
        left = 0
        for k in OUTCOMES:
            n = run[k]
            if not n:
                continue
            s = STYLES[k]
            bar = ax.barh(y, n, left=left, height=0.7, color=s.face, hatch=s.hatch,
                          edgecolor="#444444", linewidth=0.6)
            bar.patches[0].set_gid(f"bar-{y}-{k}")
            if n / max(units[y], 1) > 0.04:
                ax.text(left + n / 2, y, f"{s.glyph} {n}", ha="center", va="center", fontsize=8,
                        color=s.text, bbox=None if not s.hatch else dict(
                            facecolor="white", edgecolor="none", pad=0.8, alpha=0.9))
            left += n
        ax.text(units[y] * 1.02, y,
                f"{run_rate_text(run, cmp)}\n95% CI {interval_text(headline(run)[1])}", va="center", fontsize=8)
    ax.set_yticks(range(len(runs)))
    ax.set_yticklabels([f"{r['run']}\n{r['agent'] or ''}" for r in runs], fontsize=8)
    ax.set_ylim(len(runs) - 0.5, -0.5)
    ax.set_xlim(0, max(units))
    ax.set_xlabel("attempts (tasks × k)" if cmp.get("attempts_mode") else "tasks", fontsize=8)
    ax.tick_params(labelsize=8)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    fig.legend(handles=legend_handles(Patch), loc="lower center", ncol=5, fontsize=7,
               frameon=False, bbox_to_anchor=(0.5, (0.35 + extra) / fig_h))
    fig.text(0.5, 0.05 / fig_h, text, ha="center", va="bottom",
             fontsize=6.5)
    title = ("Outcome per attempt slot per run (pass rate = mean task pass fraction)" if cmp.get("attempts_mode")
             else "Outcome per run (pass rate = passed / scored)")
    fig.text(0.2, 1 - 0.3 / fig_h, title, fontsize=10, weight="bold")
    return fig


def costed_runs(cmp: dict) -> list[dict]:
    return [r for r in cmp["runs"] if r.get("cost") and r["cost"]["known"]]


def cost_figure(cmp: dict):
    """Each run's headline (the board's rate at k > 1, else the pass rate) with its one 95% interval,
    against the run's dollars, one point per costed run."""
    plt, _, _ = _matplotlib()
    runs = costed_runs(cmp)
    fig = plt.figure(figsize=(7, 4.6), dpi=150)
    ax = fig.add_axes((0.12, 0.24, 0.8, 0.64))
    for i, r in enumerate(runs):
        x, (y, iv) = r["cost"]["total_usd"], headline(r)
        if y is None:
            continue
        err = [[100 * (y - iv[0])], [100 * (iv[1] - y)]] if iv else None
        points = ax.errorbar([x], [100 * y], yerr=err, fmt="o", color="#1b5e20", ecolor="#444444",
                             capsize=3, markersize=6)
        points.lines[0].set_gid(f"point-{i}")
        ax.annotate(f"{r['run']} (k = {r['n_attempts']})\n{fmt.dollars(x)}, {fmt.percent(y)}", (x, 100 * y),
                    textcoords="offset points", xytext=(6, 6), fontsize=7)
    ax.set_xlim(0, max(r["cost"]["total_usd"] for r in runs) * 1.35 or 1)
    ax.set_ylim(0, 100)
    ax.set_xlabel("cost of the run (US$, HF Jobs)", fontsize=8)
    ax.set_ylabel("headline rate (%)", fontsize=8)
    ax.tick_params(labelsize=8)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    fig.text(0.12, 0.95, "Headline rate (the board's at k > 1, else passed / scored) against dollars per run",
             fontsize=10, weight="bold")
    fig.text(0.5, 0.02, wrap_caption(caption(cmp) + " Bars: 95% interval. Prices: " + "; ".join(
        f"{r['run']}: {r['cost']['prices']}" for r in runs) + ".", 130), ha="center", va="bottom", fontsize=6)
    return fig


def figure_bytes(fig, kind: str) -> bytes:
    buf = io.BytesIO()
    metadata = {"Date": None} if kind == "svg" else {"Software": None}
    fig.savefig(buf, format=kind, metadata=metadata)
    return buf.getvalue()


def render_figures(cmp: dict) -> dict[str, bytes]:
    """{'outcomes.png': ..., 'outcomes.svg': ..., 'heatmap.png': ..., 'heatmap.svg': ...}."""
    import matplotlib.pyplot as plt
    out = {}
    for stem, make in (("outcomes", outcome_bar_figure), ("heatmap", heatmap_figure)):
        fig = make(cmp)
        for kind in ("png", "svg"):
            out[f"{stem}.{kind}"] = figure_bytes(fig, kind)
        plt.close(fig)
    return out


def cost_figure_svg(cmp: dict) -> bytes | None:
    """The pass-rate-against-dollars picture as SVG when ≥ 2 runs have a known cost, else None."""
    if len(costed_runs(cmp)) < 2:
        return None
    import matplotlib.pyplot as plt
    fig = cost_figure(cmp)
    data = figure_bytes(fig, "svg")
    plt.close(fig)
    return data


def slug(cmp: dict) -> str:
    return "_vs_".join(re.sub(r"[^A-Za-z0-9._-]", "_", r["run"]) for r in cmp["runs"])


# --- HTML ------------------------------------------------------------------------------------------

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#111}
table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #999;padding:3px 8px;text-align:left}
th{background:#eee}td.passed{background:#1b5e20;color:#fff}td.failed{background:#f3c9c4}
td.errored{background:repeating-linear-gradient(45deg,#bdbdbd 0 4px,#e0e0e0 4px 8px)}
td.unclassified,td.unfinished{background:#fff;font-style:italic}
tr.disagree td:first-child{font-weight:bold}.caption{color:#333;font-size:13px}
img{max-width:100%;border:1px solid #ddd}code{font-size:12px}
"""


def md_table_to_html(lines: list[str]) -> str:
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    body = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    out = ["<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"]
    for row in body:
        out.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>")
    return "\n".join(out) + "</table>"


def html_report(cmp: dict, figures: dict[str, bytes]) -> str:
    """A self-contained page: tables, the pictures as data: URIs, the sources."""
    names = [r["run"] for r in cmp["runs"]]
    title = "Terminal-Bench report: " + " vs ".join(names)
    parts = [f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{html.escape(title)}</title>",
             f"<style>{CSS}</style></head><body>", f"<h1>{html.escape(title)}</h1>",
             f"<p class=caption>{html.escape(caption(cmp))}</p>",
             "<h2>Summary</h2>", md_table_to_html(summary_table(cmp))]
    notes = cost_notes(cmp)
    if notes:
        parts += [f"<p class=caption>{html.escape(notes[0])}</p><ul class=cost>"]
        parts += [f"<li>{html.escape(n.removeprefix('- '))}</li>" for n in notes[1:]] + ["</ul>"]
    if cmp.get("paired"):
        parts += [f"<h2>{PAIRED_TITLE}</h2>", f"<p class=caption>{html.escape(paired_caption())}</p>",
                  md_table_to_html(paired_table(cmp))]
    if cmp["flips"]:
        parts += ["<h2>Flips (tasks scored in both runs)</h2>", md_table_to_html(flips_table(cmp))]
    pictures = [("outcomes", "Stacked outcome bar per run"), ("heatmap", "Per-task outcome heatmap")]
    if "cost.svg" in figures:
        pictures.append(("cost", "Pass rate against dollars per run"))
    for stem, alt in pictures:
        data = base64.b64encode(figures[f"{stem}.svg"]).decode()
        parts += [f"<h2>{alt}</h2>",
                  f'<img id="fig-{stem}" alt="{html.escape(alt + ": " + ", ".join(names))}" '
                  f'onload="this.dataset.rendered=this.naturalWidth" '
                  f'src="data:image/svg+xml;base64,{data}">']
    what = "pass fractions" if cmp.get("attempts_mode") else "outcomes"
    parts += [f"<h2>Per-task {what} ({cmp['disagreements']} of {len(cmp['matrix'])} differ, first)</h2>",
              "<table id=matrix><tr><th>Task</th>"
              + "".join(f"<th>{html.escape(n)}</th>" for n in names) + "</tr>"]
    for row in cmp["matrix"]:
        cls = ' class="disagree"' if row["disagree"] else ""
        cells = "".join(matrix_cell(c) for c in row["cells"])
        parts.append(f"<tr{cls}><td>{'≠ ' if row['disagree'] else ''}{html.escape(row['task'])}</td>{cells}</tr>")
    parts.append("</table><h2>Sources</h2><ul>")
    for r in cmp["runs"]:
        dirs = ", ".join(r["job_dirs"]) or r["source"] or ""
        parts.append(f"<li class=run-source><b>{html.escape(r['run'])}</b>: "
                     f"<code>{html.escape(dirs)}</code> (hover a cell for its trial dir)</li>")
    parts.append("</ul></body></html>")
    return "\n".join(parts) + "\n"


def matrix_cell(c: dict) -> str:
    """A matrix cell: its outcome (k = 1), or its pass fraction shaded as in the heatmap."""
    title = html.escape(c["trial_dir"] or "")
    if "slots" not in c:
        return (f'<td class="{c["outcome"]}" title="{title}">'
                f'{STYLES[c["outcome"]].glyph} {html.escape(cell_text(c))}</td>')
    if not c["scored_attempts"]:
        return f'<td class="errored fraction" title="{title}">{html.escape(cell_text(c))}</td>'
    f = c["pass_fraction"]
    return (f'<td class="fraction" style="background:{fraction_face(f)};color:{"#fff" if f >= 0.5 else "#000"}" '
            f'title="{title}">{html.escape(cell_text(c))}</td>')
