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


def conditions(report: dict) -> list[tuple[str, dict]]:
    """The conditions a report holds, as (column label, metrics): the free-running one first
    (named for its decoding where the report knows it), the other decoding run beside it, the
    teacher-forced one."""
    decoding = str(report.get("decoding") or "") if any(name in report for name in ("free", "constrained")) else ""
    main = "free-running" + {"constrained": ", constrained", "free": ", unconstrained"}.get(decoding, "")
    found = [(main, report)]
    found += [(label, report[name]) for name, label in (("free", "unconstrained"), ("constrained", "constrained"))
              if isinstance(report.get(name), dict)]
    if report.get("teacher_forced"):
        found.append(("teacher-forced", report["teacher_forced"]))
    return found


#: the column of each difference between conditions a report may hold
DIFFERENCE_LABELS = {"teacher_forced - free": "teacher-forced − free-running", "constrained - free": "constrained − unconstrained"}

#: the rows of the summary and differences tables: (label, proportion)
METRICS = [
    ("output accuracy (final value right)", "output_accuracy"),
    ("whole trace exact", "trace_exact"),
    ("action exact (per frame)", "action_exact"),
    ("state exact (per frame)", "state_exact"),
    ("valid trace format", "valid_format"),
]


def differences_table(report: dict) -> Table | None:
    """Each difference between two conditions, in points, with Newcombe's 95% interval."""
    differences = {key: cells for key, cells in (report.get("differences") or {}).items() if key in DIFFERENCE_LABELS}
    if not differences:
        return None
    table = Table(title="differences between conditions (points, 95% CI)", title_justify="left")
    table.add_column("metric")
    for key in differences:
        table.add_column(DIFFERENCE_LABELS[key], justify="right")
    for label, key in METRICS:
        table.add_row(label.replace(" (per frame)", "").replace(" (final value right)", ""),
                      *(signed(cells.get(key)) for cells in differences.values()))
    return table


def summary_table(report: dict) -> Table:
    title = f"{report['suite']}: {report['count']} programs" + (f" · {report['model']}" if report.get("model") else "")
    table = Table(title=title, title_justify="left")
    table.add_column("metric")
    shown = conditions(report)
    for label, _ in shown:
        table.add_column(f"{label} (95% CI)", justify="right")
    published = PUBLISHED.get(report["suite"], {}) if report["suite"] == "cruxeval" else {}
    if published:
        table.add_column("Meta CWM (published)", justify="right", style="dim")
    rows = METRICS
    frames = ((report.get("intervals") or {}).get("action_exact") or {}).get("n")
    for label, key in rows:
        if "per frame" in label and frames:
            label = label.replace("per frame", f"per frame, {frames:,} frames")
        cells = [label, *(pct_ci(metrics, key) for _, metrics in shown)]
        if published:
            cells.append(pct(published.get(key)) if key in published else "")
        table.add_row(*cells)
    blank = [""] * bool(published)
    for status, label in (("budget", "truncated by the token budget or context"),
                          ("frame_limit", "a frame over the per-frame limit"), ("max_frames", "over the frame cap")):
        counts = [metrics.get("truncations", {}).get(status, 0) for _, metrics in shown]
        if status == "budget" or any(counts):
            table.add_row(label, *(str(count) for count in counts), *blank)
    errors = report.get("model_errors")
    if errors:
        table.caption = (
            f"{errors['count']} more program(s) not scored: the model could not be run on them "
            f"(first: {errors['first']})"
        )
        table.caption_justify = "left"
    return table


def divergence_table(report: dict) -> Table:
    """Programs per class (and regime) of first divergence, for each condition."""
    shown = conditions(report)
    table = Table(title="first divergence", title_justify="left")
    table.add_column("class")
    for label, _ in shown:
        table.add_column(f"{label}: programs" if len(shown) > 1 else "programs", justify="right")
    if len(shown) == 1:
        table.add_column("share", justify="right")

    def cells(key: str, name: str | None) -> list[str]:
        out = []
        for _, metrics in shown:
            count = metrics.get("count") or 0
            values = metrics.get(key, {})
            number = values.get(name, 0) if name is not None else count - sum(metrics.get("first_divergence_kinds", {}).values())
            share = pct(number / count) if count else "–"
            out += [str(number), share] if len(shown) == 1 else [f"{number} ({share})"]
        return out

    kinds = list(dict.fromkeys(k for _, m in shown for k in m.get("first_divergence_kinds", {})))
    for kind in kinds:
        table.add_row(kind, *cells("first_divergence_kinds", kind))
    table.add_row(Text("no divergence", style="green"), *cells("first_divergence_kinds", None))
    regimes = list(dict.fromkeys(r for _, m in shown for r in m.get("regimes", {})))
    if regimes:
        table.add_section()
        for regime in regimes:
            table.add_row(Text(regime, style="italic"), *cells("regimes", regime))
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


def ci(cell: dict | None) -> str:
    """A proportion of the report (``{"value", "ci95", "n"}``) with its 95% interval."""
    if not cell or not cell.get("n"):
        return "–"
    low, high = cell["ci95"]
    return f"{pct(cell['value'])} [{low * 100:.1f}–{high * 100:.1f}]"


def signed(cell: dict | None) -> str:
    """A difference of the report with its 95% interval, in points."""
    if not cell or cell.get("value") is None:
        return "–"
    low, high = cell["ci95"]
    return f"{cell['value'] * 100:+.1f} [{low * 100:+.1f}, {high * 100:+.1f}]"


def _number(value) -> str:
    return "–" if value is None else f"{value:g}" if isinstance(value, int) or float(value).is_integer() else f"{value:.1f}"


def _short_ci(cell: dict | None) -> str:
    """``33% [10–70]``: a proportion and its interval in whole percent (a narrow column)."""
    if not cell or not cell.get("n"):
        return "–"
    low, high = cell["ci95"]
    return f"{100 * cell['value']:.0f}% [{100 * low:.0f}–{100 * high:.0f}]"


RECOVERY_LABELS = {"action": "real line forced", "frame": "real frame forced"}
RECOVERY_COLUMNS = {"action": "line", "frame": "frame"}


def recovery_table(report: dict) -> Table:
    """``--recovery``: per class of first divergence, the share whose state agrees again after
    each intervention, steps to agreement (median) and steps it then held (mean)."""
    recovery = report["recovery"]
    table = Table(title=f"recovery at the first divergence ({recovery['intervened']} of {recovery['diverged']} "
                        "diverged programs)", title_justify="left")
    table.add_column("first divergence")
    table.add_column("n (line/frame)", justify="right")
    for condition in RECOVERY_LABELS:
        table.add_column(f"{RECOVERY_COLUMNS[condition]}: again", justify="right", no_wrap=True)
        table.add_column("steps", justify="right")
        table.add_column("held", justify="right")
    conditions = recovery["conditions"]
    for name in recovery["classes"]:
        cells = [conditions.get(c, {}).get(name) for c in RECOVERY_LABELS]
        if not any(cells):
            continue
        if name == "all":
            table.add_section()
        counts = [(c or {}).get("count", 0) for c in cells]
        row: list[str | Text] = [Text(name, style="bold" if name == "all" else "italic" if name == "string-valued" else ""),
                                 "/".join(str(n) for n in counts) if len(set(counts)) > 1 else str(counts[0])]
        for cell in cells:
            if cell is None:
                row += ["–", "", ""]
                continue
            row += [_short_ci(cell["recovered"]), _number(cell["steps_to_recover"]["median"]), _number(cell["held_for"]["mean"])]
        table.add_row(*row)
    accuracy, differences = recovery["output_accuracy"], recovery["differences"]
    lines = [f"output accuracy as run {ci(accuracy['free'])}; with the first divergence put right: "
             + "; ".join(f"{RECOVERY_LABELS[c]} {ci(accuracy[c])} ({signed(differences[f'{c} - free'])})" for c in RECOVERY_LABELS)]
    lines.append("line: the interpreter's next line forced at the divergence; frame: its whole frame (event, state, line)")
    lines.append("again: the share whose state agrees with the interpreter's again (95% CI); steps: median steps "
                 "from the intervention to that; held: mean steps it then agreed for")
    for reason, count in recovery.get("skipped", {}).items():
        lines.append(f"not intervened on: {count} ({reason})")
    for condition, reasons in recovery.get("not_run", {}).items():
        for reason, count in reasons.items():
            lines.append(f"{RECOVERY_COLUMNS[condition]} not forced: {count} ({reason})")
    table.caption = "\n".join(lines)
    table.caption_justify = "left"
    return table


def samples_table(report: dict) -> Table:
    """``--samples N``: pass@k of output accuracy, and the samples' first divergences."""
    sampled = report["samples"]
    table = Table(title=f"pass@k: output accuracy over {sampled['samples']} samples of each of "
                        f"{sampled['programs']} programs", title_justify="left")
    table.add_column("k", justify="right")
    table.add_column("pass@k (95% CI over programs)", justify="right")
    for k, cell in sampled["pass_at_k"].items():
        table.add_row(k, ci(cell))
    kinds = ", ".join(f"{kind} {count}" for kind, count in sampled["first_divergence_kinds"].items())
    step = sampled["first_divergence_step"]
    table.caption = (f"right at least once: {sampled['programs_right_at_least_once']} of {sampled['programs']} programs\n"
                     f"first divergence of every sample: {kinds}"
                     + (f" (median step {_number(step['median'])})" if step["median"] is not None else ""))
    table.caption_justify = "left"
    return table


def report_renderables(report: dict) -> Group:
    parts: list = [summary_table(report)]
    differences = differences_table(report)
    if differences is not None:
        parts.append(differences)
    parts += [divergence_table(report), string_table(report)]
    if report.get("samples"):
        parts.append(samples_table(report))
    if report.get("recovery"):
        parts.append(recovery_table(report))
    if report.get("by_n"):
        parts += [by_n_table(report), by_n_chart(report)]
    if report.get("by_depth"):
        parts += [*by_depth_tables(report), by_depth_chart(report)]
    return Group(*parts)
