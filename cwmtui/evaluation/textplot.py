"""Curves drawn in the terminal: a small character chart of rates (0..100%) over categories."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text


@dataclass
class Series:
    label: str
    values: list[float | None]  # one per x, 0..1, None where there is no point
    marker: str = "●"
    style: str = ""
    dotted: bool = False  # a reference curve (published figure, baseline): drawn fainter


def line_chart(title: str, xs: list, series: list[Series], height: int = 10, slot: int = 7, x_label: str = "") -> Text:
    """A chart of ``series`` over the categories ``xs``, y from 0% (bottom) to 100% (top)."""
    width = slot * len(xs)
    grid: list[list[tuple[str, str] | None]] = [[None] * width for _ in range(height + 1)]

    def row_of(value: float) -> int:
        return height - round(max(0.0, min(1.0, value)) * height)

    centre = [i * slot + slot // 2 for i in range(len(xs))]
    for item in series:
        points = [(centre[i], row_of(v)) for i, v in enumerate(item.values) if v is not None]
        for (x0, y0), (x1, y1) in zip(points, points[1:]):
            for x in range(x0 + 1, x1):
                y = round(y0 + (y1 - y0) * (x - x0) / (x1 - x0))
                if grid[y][x] is None:
                    grid[y][x] = ("·" if not item.dotted else "˙", item.style + (" dim" if item.dotted else ""))
        for x, y in points:
            grid[y][x] = (item.marker, item.style)
    text = Text()
    text.append(title + "\n", style="bold")
    for row in range(height + 1):
        value = 1 - row / height
        label = f"{value:4.0%} ┤" if row % (height // 2 or 1) == 0 else "     │"
        text.append(label, style="dim")
        for cell in grid[row]:
            if cell is None:
                text.append(" ")
            else:
                text.append(cell[0], style=cell[1])
        text.append("\n")
    text.append("      " + "─" * width + "\n", style="dim")
    text.append("      ")
    for x in xs:
        text.append(str(x).center(slot))
    if x_label:
        text.append("  " + x_label, style="dim")
    text.append("\n")
    for item in series:
        text.append(f"      {item.marker} ", style=item.style)
        text.append(item.label + "\n", style="dim" if item.dotted else "")
    return text
