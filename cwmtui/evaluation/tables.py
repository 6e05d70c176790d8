"""The report as rich tables and terminal charts (no Textual)."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..analysis.report import PUBLISHED
from .textplot import Series, line_chart


def pct(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:.1f}%"


def pct_ci(metrics: dict, key: str) -> str:
    """A proportion with its 95% interval: ``80.0% [49.0–94.3]``."""
    cell = (metrics.get("intervals") or {}).get(key)
    if not cell or not cell.get("n"):
        return pct(metrics.get(key))
    low, high = cell["ci95"]
    return f"{pct(cell['value'])} [{low * 100:.1f}–{high * 100:.1f}]"


def summary_table(report: dict) -> Table:
    forced = report.get("teacher_forced")
    title = f"{report['suite']}: {report['count']} programs" + (f" · {report['model']}" if report.get("model") else "")
    table = Table(title=title, title_justify="left")
    table.add_column("metric")
    table.add_column("free-running (95% CI)", justify="right")
    differences = (report.get("differences") or {}).get("teacher_forced - free", {})
    if forced:
        table.add_column("teacher-forced (95% CI)", justify="right")
        table.add_column("difference", justify="right")
    published = PUBLISHED.get(report["suite"], {}) if report["suite"] == "cruxeval" else {}
    if published:
        table.add_column("Meta CWM (published)", justify="right", style="dim")
    rows = [
        ("output accuracy (final value right)", "output_accuracy"),
        ("whole trace exact", "trace_exact"),
        ("action exact (per frame)", "action_exact"),
        ("state exact (per frame)", "state_exact"),
        ("valid trace format", "valid_format"),
    ]
    frames = ((report.get("intervals") or {}).get("action_exact") or {}).get("n")
    for label, key in rows:
        if "per frame" in label and frames:
            label = label.replace("per frame", f"per frame, {frames:,} frames")
        cells = [label, pct_ci(report, key)]
        if forced:
            cells.append(pct_ci(forced, key))
            difference = differences.get(key)
            cells.append("–" if not difference or difference.get("value") is None else
                         f"{difference['value'] * 100:+.1f} [{difference['ci95'][0] * 100:+.1f}, {difference['ci95'][1] * 100:+.1f}]")
        if published:
            cells.append(pct(published.get(key)) if key in published else "")
        table.add_row(*cells)
    truncations = report.get("truncations", {})
    cells = ["truncated by the token budget or context", str(truncations.get("budget", 0))]
    if forced:
        cells += [str(forced.get("truncations", {}).get("budget", 0)), ""]
    if published:
        cells.append("")
    table.add_row(*cells)
    for status, label in (("frame_limit", "a frame over the per-frame limit"), ("max_frames", "over the frame cap")):
        if truncations.get(status):
            table.add_row(label, str(truncations[status]), *([""] * (len(table.columns) - 2)))
    errors = report.get("model_errors")
    if errors:
        table.caption = (
            f"{errors['count']} more program(s) not scored: the model could not be run on them "
            f"(first: {errors['first']})"
        )
        table.caption_justify = "left"
    return table


def divergence_table(report: dict) -> Table:
    table = Table(title="first divergence", title_justify="left")
    table.add_column("class")
    table.add_column("programs", justify="right")
    table.add_column("share", justify="right")
    count = report["count"] or 1
    for kind, number in report.get("first_divergence_kinds", {}).items():
        table.add_row(kind, str(number), pct(number / count))
    agree = count - sum(report.get("first_divergence_kinds", {}).values())
    table.add_row(Text("no divergence", style="green"), str(agree), pct(agree / count))
    regimes = report.get("regimes", {})
    if regimes:
        table.add_section()
        for regime, number in regimes.items():
            table.add_row(Text(regime, style="italic"), str(number), pct(number / count))
    return table


def string_table(report: dict) -> Table:
    shares = report["string_valued"]
    table = Table(title="string-valued outputs (Meta CWM on CRUXEval: 46% of outputs, 73% of failures)", title_justify="left")
    table.add_column("")
    table.add_column("string-valued share", justify="right")
    table.add_column("programs", justify="right")
    table.add_row("among all outputs", pct(shares["outputs"]), f"{shares['string_outputs']} / {report['count']}")
    table.add_row("among output failures", pct(shares["failures"]), f"{shares['string_failures']} / {shares['failures_count']}")
    table.add_row("accuracy on string outputs", pct(shares["accuracy_string"]), "")
    table.add_row("accuracy on other outputs", pct(shares["accuracy_other"]), "")
    return table


def by_n_table(report: dict) -> Table:
    published = PUBLISHED["s5"]
    table = Table(title="S5: output accuracy vs N (swaps), free-running and teacher-forced", title_justify="left")
    for name in ("N", "programs", "free", "forced", "state exact", "Meta free", "Meta forced"):
        table.add_column(name, justify="right", style="dim" if name.startswith("Meta") else None, no_wrap=True)
    for n, cell in report["by_n"].items():
        forced = cell.get("teacher_forced", {})
        n_key = int(n)
        table.add_row(
            str(n), str(cell["count"]), pct(cell["output_accuracy"]), pct(forced.get("output_accuracy")),
            pct(cell["state_exact"]), pct(published["free"].get(n_key)), pct(published["teacher_forced"].get(n_key)),
        )
    return table


def by_n_chart(report: dict) -> Text:
    by_n = report["by_n"]
    xs = list(by_n)
    published = PUBLISHED["s5"]
    series = [
        Series("Meta CWM free-running (published)", [published["free"].get(int(n)) for n in xs], "○", "cyan", True),
        Series("Meta CWM teacher-forced (published)", [published["teacher_forced"].get(int(n)) for n in xs], "□", "magenta", True),
        Series("free-running", [by_n[n]["output_accuracy"] for n in xs], "●", "bold cyan"),
    ]
    if any("teacher_forced" in by_n[n] for n in xs):
        series.append(Series("teacher-forced", [by_n[n].get("teacher_forced", {}).get("output_accuracy") for n in xs], "■", "bold magenta"))
    return line_chart("S5 output accuracy vs N", xs, series, x_label="N")


def by_depth_tables(report: dict) -> list[Table]:
    depths = list(report["by_depth"])
    overall = Table(title="composition: output accuracy vs depth", title_justify="left")
    overall.add_column("")
    for depth in depths:
        overall.add_column(f"d={depth}", justify="right")
    overall.add_row("all types", *(pct(report["by_depth"][d]["output_accuracy"]) for d in depths))
    overall.add_row(Text("p^d baseline", style="dim"), *(Text(pct(report["by_depth"][d]["baseline"]), style="dim") for d in depths))
    for form, cells in report.get("by_form", {}).items():
        overall.add_row(str(form), *(pct(cells.get(d, {}).get("output_accuracy")) for d in depths))
    string_ref = PUBLISHED["zoo"]["string_nested"]
    string_cells = report.get("by_type", {}).get("string") or report.get("by_type", {}).get("String")
    if string_cells:
        overall.add_row("string, nested", *(pct(string_cells.get(d, {}).get("by_form", {}).get("nested")) for d in depths))
    overall.add_row(Text("Meta CWM, string nested", style="dim"), *(Text(pct(string_ref.get(int(d))), style="dim") for d in depths))
    per_type = Table(title="per type: accuracy (p^d baseline)", title_justify="left")
    per_type.add_column("type")
    for depth in depths:
        per_type.add_column(f"d={depth}", justify="right")
    for kind, cells in report.get("by_type", {}).items():
        row: list[str | Text] = [str(kind)]
        for depth in depths:
            cell = cells.get(depth)
            if cell is None:
                row.append("")
                continue
            text = Text(pct(cell["output_accuracy"]))
            if cell.get("baseline") is not None and depth != 1:
                text.append(f" ({pct(cell['baseline'])})", style="dim")
            row.append(text)
        per_type.add_row(*row)
    return [overall, per_type]


def by_depth_chart(report: dict) -> Text:
    by_depth = report["by_depth"]
    xs = list(by_depth)
    string_ref = PUBLISHED["zoo"]["string_nested"]
    series = [
        Series("Meta CWM string, nested (published)", [string_ref.get(int(d)) for d in xs], "○", "yellow", True),
        Series("p^d baseline", [by_depth[d]["baseline"] for d in xs], "+", "", True),
    ]
    styles = {"nested": ("◆", "bold green"), "flat": ("▲", "bold blue"), "flattened": ("▲", "bold blue")}
    for form, cells in report.get("by_form", {}).items():
        marker, style = styles.get(form, ("●", "bold"))
        series.append(Series(str(form), [cells.get(d, {}).get("output_accuracy") for d in xs], marker, style))
    string_cells = report.get("by_type", {}).get("string") or report.get("by_type", {}).get("String")
    if string_cells:
        nested = [string_cells.get(d, {}).get("by_form", {}).get("nested") for d in xs]
        if any(v is not None for v in nested):
            series.append(Series("string, nested (this model)", nested, "●", "bold yellow"))
    series.append(Series("all types", [by_depth[d]["output_accuracy"] for d in xs], "■", "bold"))
    return line_chart("composition: output accuracy vs depth", xs, series, x_label="depth")


def report_renderables(report: dict) -> Group:
    parts: list = [summary_table(report), divergence_table(report), string_table(report)]
    if report.get("by_n"):
        parts += [by_n_table(report), by_n_chart(report)]
    if report.get("by_depth"):
        parts += [*by_depth_tables(report), by_depth_chart(report)]
    return Group(*parts)
