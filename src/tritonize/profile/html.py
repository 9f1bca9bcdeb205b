"""A profile as one self-contained HTML page: the chart (matplotlib's SVG, inline), the sortable
table, each kernel's source and each graph's wrapper. No network: nothing is loaded from outside.

The chart is a roofline when the profile has times (on a GPU): operations a byte against the
operations a second each row achieved, log-log, the device's roofs drawn (copy bandwidth rising
to matmul throughput), each row a point sized by its time. Without times (the CPU) it is the rows'
operations a byte against their bytes. Each point is an SVG group `kernel-<i>` (i: the row's
place in the table) holding a <title>, which browsers show on hover. Rows with nothing on an axis
(a copy has no operations) sit on the chart's floor, drawn hollow.

matplotlib is an optional dependency (`pip install tritonize[report]`); without it the page has
the table and sources and says why the chart is missing.
"""
from __future__ import annotations

import html
import importlib.util
import io
import re

from .rows import Profile, is_flagged

X_FLOOR = 1e-3  # operations a byte, where rows without operations are drawn
Y_FLOOR_FRACTION = 1e-4  # of the largest value on the y axis


def render_html(prof: Profile, title: str = "tritonize profile") -> str:
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
             f"<style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1>",
             f"<p>{html.escape(_summary(prof))}</p>", _chart_or_reason(prof), _table(prof), _sources(prof),
             f"<script>{_SORT_SCRIPT}</script></body></html>"]
    return "\n".join(parts)


def save_html(prof: Profile, path: str, title: str = "tritonize profile") -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(render_html(prof, title))


def _summary(prof: Profile) -> str:
    text = f"{len(prof.rows)} kernels and library calls in {prof.graphs} graph(s){prof.not_run_note()}; "
    return text + (prof.summary() if prof.runs else "not timed (no GPU): bytes and operations only")


def _chart_or_reason(prof: Profile) -> str:
    if importlib.util.find_spec("matplotlib") is None:
        return "<p class='note'>No chart: matplotlib is not installed (pip install tritonize[report]).</p>"
    return f"<div class='chart'>{_chart_svg(prof)}</div>"


def _chart_svg(prof: Profile) -> str:
    # A Figure of its own, not pyplot's: pyplot would need a backend, and choosing one would
    # change the user's (a notebook's inline figures).
    from matplotlib.figure import Figure

    timed = prof.runs > 0 and prof.roofs is not None
    points = [_point(row, timed) for row in prof.rows]
    y_floor = max([y for _, y, _ in points if y > 0], default=1.0) * Y_FLOOR_FRACTION
    figure = Figure(figsize=(9, 5.5))
    axes = figure.subplots()
    largest = max([size for _, _, size in points], default=1.0) or 1.0
    for i, (row, (x, y, size)) in enumerate(zip(prof.rows, points)):
        hollow = x <= 0 or y <= 0
        axes.scatter([max(x, X_FLOOR)], [max(y, y_floor)], s=30 + 600 * size / largest, gid=f"kernel-{i}",
                     alpha=0.7, facecolors="none" if hollow else None, edgecolors="C0" if hollow else None)
    if timed:
        _draw_roofs(axes, prof.roofs, points)
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("floating-point operations a byte")
    axes.set_ylabel("operations a second achieved" if timed else "bytes moved")
    axes.set_title("roofline, one point per kernel (size: time)" if timed
                   else "operations a byte against bytes, one point per kernel (not timed)")
    axes.grid(True, which="both", alpha=0.3)
    out = io.StringIO()
    figure.savefig(out, format="svg", bbox_inches="tight")
    return _with_titles(out.getvalue(), prof)


def _point(row, timed: bool) -> tuple[float, float, float]:
    """(x, y, size) of a row: intensity and achieved FLOP/s sized by time, or intensity and bytes."""
    if timed:
        if not row.time_s:
            return row.intensity, 0.0, 0.0
        return row.intensity, row.flops / row.time_s, row.time_s
    return row.intensity, float(row.bytes), float(row.bytes)


def _draw_roofs(axes, roofs, points) -> None:
    xs = [max(x, X_FLOOR) for x, _, _ in points] + [roofs.ridge]
    low, high = min(xs) / 4, max(xs) * 4
    axes.plot([low, roofs.ridge, high], [roofs.bytes_per_s * low, roofs.flops_per_s, roofs.flops_per_s],
              color="C3", linewidth=1.5, label=f"roofs: {roofs.bytes_per_s / 1e9:.0f} GB/s, "
                                                f"{roofs.flops_per_s / 1e12:.0f} TFLOP/s")
    axes.legend(loc="lower right")


def _with_titles(svg: str, prof: Profile) -> str:
    """A <title> (the hover text) inside each point's group; the XML prologue dropped (inline SVG)."""
    svg = re.sub(r"^<\?xml[^>]*>\s*(<!DOCTYPE[^>]*>\s*)?", "", svg)
    for i, row in enumerate(prof.rows):
        label = html.escape(f"{row.name} ({row.kind}): {_row_text(row)}")
        svg = svg.replace(f'<g id="kernel-{i}">', f'<g id="kernel-{i}" class="kernel"><title>{label}</title>', 1)
    return svg


def _row_text(row) -> str:
    text = f"{row.bytes / 1e6:.3f} MB, {row.flops / 1e6:.3f} MFLOP"
    if row.time_s:
        text += f", {row.time_s * 1e6:.1f} us"
    return text


def _table(prof: Profile) -> str:
    heads = ["kernel", "kind", "launches", "MB read", "MB written", "MFLOP", "FLOP/B"]
    if prof.runs:
        heads += ["us", "GB/s", "TFLOP/s", "bound", "of roof"]
    head = "".join(f"<th onclick='sortTable({i})'>{h}</th>" for i, h in enumerate(heads))
    body = "".join(f"<tr>{_cells(row, prof)}</tr>" for row in prof.rows)
    return f"<table id='rows'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _cells(row, prof: Profile) -> str:
    name = html.escape(row.name)
    link = f"<a href='#source-{name}'>{name}</a>" if row.name in prof.sources else name
    aten = f"<div class='aten'>{html.escape(', '.join(row.aten))}</div>" if row.aten else ""
    cells = [f"{link}{aten}", row.kind, row.launches, f"{row.bytes_read / 1e6:.3f}",
             f"{row.bytes_written / 1e6:.3f}", f"{row.flops / 1e6:.3f}", f"{row.intensity:.2f}"]
    if prof.runs:
        cells += _timed_cells(row, prof)
    return "".join(f"<td>{cell}</td>" for cell in cells)


def _timed_cells(row, prof: Profile) -> list:
    figures = row.figures(prof.roofs)
    if figures is None:
        return ["-"] * 5
    us, gbs, tflops, bound, share = figures
    flag = " class='flag'" if is_flagged(share) else ""
    share_text = f"<span{flag}>{share:.0%}</span>" if share is not None else "-"
    return [f"{us:.1f}", f"{gbs:.1f}", f"{tflops:.3f}", bound, share_text]


def _sources(prof: Profile) -> str:
    kernels = "".join(f"<details id='source-{html.escape(name)}'><summary>{html.escape(name)}</summary>"
                      f"<pre>{html.escape(source)}</pre></details>" for name, source in sorted(prof.sources.items()))
    wrappers = "".join(f"<details><summary>wrapper of graph {i}</summary><pre>{html.escape(source)}</pre></details>"
                       for i, source in enumerate(prof.wrappers))
    return f"<h2>Kernels</h2>{kernels}<h2>Wrappers</h2>{wrappers}"


_STYLE = """body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse;font-size:13px}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:right}td:first-child,th:first-child{text-align:left}
th{cursor:pointer;background:#eee}.aten{color:#666;font-size:11px}.flag{color:#c00;font-weight:bold}
pre{background:#f6f6f6;padding:8px;overflow:auto;font-size:12px}.note{color:#a60}"""

# Clicking a header sorts the table by that column (numbers as numbers), again to reverse.
_SORT_SCRIPT = """function sortTable(column){const body=document.querySelector('#rows tbody');
const rows=Array.from(body.rows);const key=r=>{const t=r.cells[column].innerText;const n=parseFloat(t);
return isNaN(n)?t:n;};const descending=body.dataset.column==String(column)&&body.dataset.order!='desc';
rows.sort((a,b)=>{const x=key(a),y=key(b);const c=x<y?-1:x>y?1:0;return descending?-c:c;});
body.dataset.column=column;body.dataset.order=descending?'desc':'asc';rows.forEach(r=>body.appendChild(r));}"""
