"""The report's curves as a PNG (matplotlib, Agg backend): ``cwmtui eval --plot FILE.png``."""

from __future__ import annotations

from ..analysis.report import PUBLISHED


def save_figure(report: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    panels = [_summary_panel]
    if report.get("survival"):
        panels.append(_survival_panel)
    if report.get("recovery"):
        panels.append(_recovery_panel)
    if report.get("by_n"):
        panels.append(_s5_panel)
    if report.get("by_depth"):
        panels += [_depth_panel, _type_panel]
    figure, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 5.4), squeeze=False)
    for panel, axis in zip(panels, axes[0]):
        panel(axis, report)
    title = f"{report['suite']}: {report['count']} programs"
    if report.get("model"):
        title += f" · {report['model']}"
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _percent(values):
    return [None if v is None else 100 * v for v in values]


def _band(axis, xs, cells, colour, key="output_accuracy_ci95") -> None:
    """A curve's 95% interval as a light band (cells without one are left out)."""
    points = [(x, c[key]) for x, c in zip(xs, cells) if c and c.get(key)]
    if len(points) >= 2:
        axis.fill_between([x for x, _ in points], [100 * ci[0] for _, ci in points], [100 * ci[1] for _, ci in points],
                          color=colour, alpha=0.15, linewidth=0)


def _errors(metrics: dict, keys) -> list[list[float]] | None:
    """Bars' 95% intervals as matplotlib's yerr (below, above), in percent."""
    intervals = metrics.get("intervals") or {}
    if not all(intervals.get(k) and intervals[k].get("n") for k in keys):
        return None
    low = [100 * (intervals[k]["value"] - intervals[k]["ci95"][0]) for k in keys]
    high = [100 * (intervals[k]["ci95"][1] - intervals[k]["value"]) for k in keys]
    return [low, high]


def _legend(axis, size="small", columns=1) -> None:
    """Below the plot, never over its lines."""
    axis.legend(fontsize=size, ncol=columns, loc="upper center", bbox_to_anchor=(0.5, -0.2), frameon=False)


def _style(label: str) -> tuple[str, str]:
    """A condition's colour (by its decoding: constrained orange, teacher-forced purple, else
    cyan) and line style (the free-running condition solid, teacher-forced dashed, the other
    decoding beside it dotted), the same in every panel."""
    decoding = label.split(", ")[-1]
    colour = "tab:purple" if "teacher" in label else "tab:orange" if decoding == "constrained" else "tab:cyan"
    style = "-" if label.startswith("free-running") else "--" if "teacher" in label else ":"
    return colour, style


def _summary_panel(axis, report: dict) -> None:
    from .tables import conditions

    keys = [("output_accuracy", "output"), ("trace_exact", "trace"), ("action_exact", "action"), ("state_exact", "state")]
    xs = range(len(keys))
    shown = conditions(report)
    width = 0.8 / len(shown)
    names = [k for k, _ in keys]
    for i, (label, metrics) in enumerate(shown):
        offset = (i - (len(shown) - 1) / 2) * width
        axis.bar([x + offset for x in xs], [100 * (metrics.get(k) or 0) for k, _ in keys], width,
                 label=f"{label} (95% CI)", color=_style(label)[0], yerr=_errors(metrics, names), capsize=3)
    if report["suite"] == "cruxeval":
        axis.axhline(100 * PUBLISHED["cruxeval"]["output_accuracy"], color="grey", linestyle=":", label="Meta CWM output (88%)")
    axis.set_xticks(list(xs), [label for _, label in keys])
    axis.set_ylim(0, 105)
    axis.set_ylabel("%")
    axis.set_title("exact match")
    _legend(axis)


def _survival_panel(axis, report: dict) -> None:
    from .tables import conditions

    curve = report["survival"]
    for label, metrics in conditions(report):  # dashed and dotted over solid: where they agree, all stay visible
        points = metrics.get("survival")
        if points:
            colour, style = _style(label)
            axis.step([k for k, _ in points], [100 * s for _, s in points], where="post", color=colour,
                      linestyle=style, label=label)
    axis.set_ylim(-3, 105)
    if curve[-1][0] > 20:  # the first steps, where most traces part, beside the longest trace
        axis.set_xscale("symlog", linthresh=10, linscale=1.5)
        axis.set_xlim(left=0)
    axis.set_xlabel("step k")
    axis.set_ylabel("% of programs still agreeing after step k")
    axis.set_title("survival of the trace")
    _legend(axis)


def _recovery_panel(axis, report: dict) -> None:
    """``--recovery``: per class of first divergence, the share that agreed again after the real
    line (and, beside it, the real frame) was forced, with 95% intervals; n under each class."""
    recovery = report["recovery"]
    conditions = recovery["conditions"]
    classes = [name for name in recovery["classes"] if any(name in conditions.get(c, {}) for c in conditions)]
    xs = range(len(classes))
    width = 0.38
    styles = (("action", "real line forced", "tab:green", -width / 2), ("frame", "real frame forced", "tab:olive", width / 2))
    for condition, label, colour, offset in styles:
        cells = [conditions.get(condition, {}).get(name) for name in classes]
        values = [100 * (c["recovered"]["value"] or 0) if c else 0 for c in cells]
        low = [v - 100 * c["recovered"]["ci95"][0] if c else 0 for v, c in zip(values, cells)]
        high = [100 * c["recovered"]["ci95"][1] - v if c else 0 for v, c in zip(values, cells)]
        axis.bar([x + offset for x in xs], values, width, color=colour, label=f"{label} (95% CI)",
                 yerr=[low, high], capsize=3)
    counts = [max((conditions.get(c, {}).get(name) or {}).get("count", 0) for c in conditions) for name in classes]
    axis.set_xticks(list(xs), [f"{name}\nn={n}" for name, n in zip(classes, counts)], fontsize="small")
    axis.set_ylim(0, 105)
    axis.set_ylabel("% whose state agrees again")
    axis.set_title("recovery at the first divergence")
    _legend(axis)


def _s5_panel(axis, report: dict) -> None:
    by_n = report["by_n"]
    ns = [int(n) for n in by_n]
    axis.plot(ns, _percent([c["output_accuracy"] for c in by_n.values()]), "o-", color="tab:cyan", label="free-running")
    _band(axis, ns, list(by_n.values()), "tab:cyan")
    if any("teacher_forced" in c for c in by_n.values()):
        forced = [c.get("teacher_forced", {}).get("output_accuracy") for c in by_n.values()]
        # dashed over solid: where the two conditions agree, both lines stay visible
        axis.plot(ns, _percent(forced), "s--", color="tab:purple", label="teacher-forced")
        _band(axis, ns, [c.get("teacher_forced") for c in by_n.values()], "tab:purple")
    for name, style, colour in (("free", "o:", "tab:cyan"), ("teacher_forced", "s:", "tab:purple")):
        curve = PUBLISHED["s5"][name]
        axis.plot(list(curve), _percent(list(curve.values())), style, color=colour, alpha=0.45,
                  label=f"Meta CWM {name.replace('_', '-')} (published)")
    axis.set_xscale("log", base=2)
    axis.set_xticks(sorted(set(ns) | set(PUBLISHED["s5"]["free"])), [str(n) for n in sorted(set(ns) | set(PUBLISHED["s5"]["free"]))])
    axis.set_ylim(-3, 105)
    axis.set_xlabel("N (permutation steps)")
    axis.set_ylabel("output accuracy %")
    axis.set_title("S5 state tracking (bands: 95% CI)")
    _legend(axis, columns=2)


def _depth_panel(axis, report: dict) -> None:
    by_depth = report["by_depth"]
    depths = [int(d) for d in by_depth]
    axis.plot(depths, _percent([c["output_accuracy"] for c in by_depth.values()]), "o-", color="black", label="all types")
    _band(axis, depths, list(by_depth.values()), "black")
    axis.plot(depths, _percent([c["baseline"] for c in by_depth.values()]), "--", color="grey", label="p^d baseline")
    for form, cells in report.get("by_form", {}).items():
        axis.plot([int(d) for d in cells], _percent([c["output_accuracy"] for c in cells.values()]), ".-", label=str(form))
    strings = report.get("by_type", {}).get("string") or report.get("by_type", {}).get("String") or {}
    nested = {int(d): c.get("by_form", {}).get("nested") for d, c in strings.items()}
    if any(v is not None for v in nested.values()):
        axis.plot(list(nested), _percent(list(nested.values())), "o-", color="tab:orange", label="string nested")
    reference = PUBLISHED["zoo"]["string_nested"]
    axis.plot(list(reference), _percent(list(reference.values())), "o:", color="tab:orange", alpha=0.5,
              label="Meta CWM string nested (published)")
    axis.set_xticks(sorted(set(depths) | set(reference)))
    axis.set_ylim(-3, 105)
    axis.set_xlabel("composition depth")
    axis.set_ylabel("output accuracy %")
    axis.set_title("composition: nested vs flattened")
    _legend(axis, columns=2)


def _type_panel(axis, report: dict) -> None:
    colours = iter(["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:cyan", "tab:grey"])
    for kind, cells in report.get("by_type", {}).items():
        colour = next(colours, "black")
        depths = [int(d) for d in cells]
        axis.plot(depths, _percent([c["output_accuracy"] for c in cells.values()]), "o-", color=colour, label=str(kind))
        axis.plot(depths, _percent([c["baseline"] for c in cells.values()]), ":", color=colour, alpha=0.6)
    all_depths = sorted({int(d) for cells in report.get("by_type", {}).values() for d in cells})
    axis.set_xticks(all_depths)
    axis.set_ylim(-3, 105)
    axis.set_xlabel("composition depth")
    axis.set_ylabel("output accuracy %")
    axis.set_title("per type (dotted: p^d)")
    _legend(axis, size="x-small", columns=4)
