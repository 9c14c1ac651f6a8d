"""make watch HTML=…: the frame as a self-reloading page, with a plot of the run over time."""

from __future__ import annotations

from pathlib import Path

from tools import fmt
from tools.results import report_load
from tools import safe_read
from tools.run.watch_frame import Frame
from tools.run.watch_text import lines_of


def timeline_svg(f: Frame) -> str:
    """Settled trials and infra errors over time, cumulative, as a small SVG (matplotlib, as the
    report draws)."""
    from tools.report import report_html
    plt, _, _ = report_html._matplotlib()
    fig = plt.figure(figsize=(6.4, 2.6), dpi=100)
    ax = fig.add_axes((0.1, 0.2, 0.85, 0.68))
    for times, label, color in ((f.settled_at, "settled trials", "#1b5e20"), (f.infra_at, "infra errors", "#b71c1c")):
        if times:
            line, = ax.step(times, range(1, len(times) + 1), where="post", label=label, color=color)
            line.set_gid("settled" if label.startswith("settled") else "infra")
    ax.set_ylabel("trials", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.set_title(f"{f.run}: settled trials and infra errors over time", fontsize=9)
    if f.settled_at or f.infra_at:
        ax.legend(fontsize=7, frameon=False, loc="upper left")
    fig.autofmt_xdate()
    svg = report_html.figure_bytes(fig, "svg").decode("utf-8")
    plt.close(fig)
    return svg[svg.index("<svg"):]


def page_of(f: Frame, every: float) -> str:
    """The frame as a self-contained HTML page that reloads itself every `every` seconds."""
    import html
    share = f.settled / f.total if f.total else 0.0
    items = [line.strip() for line in lines_of(f)[1:]]
    rows = "".join(f"<li class='{'alarm' if item.startswith('ALARM') else 'figure'}'>{html.escape(item)}</li>"
                   for item in items)
    return (f"<!doctype html><html><head><meta charset='utf-8'>"
            f"<meta http-equiv='refresh' content='{int(every)}'>"
            f"<title>{html.escape(f.run)}: {f.settled}/{f.total}</title>"
            "<style>body{font-family:sans-serif;margin:1.5em;max-width:60em}"
            ".bar{background:#eee;height:1.4em;width:100%;border:1px solid #888}"
            ".fill{background:#1b5e20;height:100%}.alarm{color:#b71c1c}li{margin:.2em 0}</style></head><body>"
            f"<h1>{html.escape(f.run)}</h1>"
            f"<div class='bar' id='bar' title='{f.settled}/{f.total}'><div class='fill' id='fill' "
            f"style='width:{100 * share:.1f}%'></div></div>"
            f"<p id='progress'>{f.settled}/{f.total} attempt slots settled ({fmt.percent(share)})</p>"
            f"<ul>{rows}</ul><div id='plot'>{timeline_svg(f)}</div>"
            f"<p>Reloads every {int(every)} s (make watch HTML=…).</p></body></html>\n")


def write_page(path: Path, text: str) -> None:
    """Write the page whole or not at all (a reader reloading mid-write sees the last one), and
    only over a regular file or at a new name (tools/safe_read.py write_atomic): any failure, a
    device or a full disk, is one line and leaves no temp file."""
    try:
        safe_read.write_atomic(path, text)
    except OSError as e:
        report_load.fail(safe_read.write_error(f"HTML={path}", e))
