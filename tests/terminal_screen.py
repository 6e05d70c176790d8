"""A small terminal for tests: the screen that the bytes a Textual app writes make, as lines of
text. It knows what Textual's output uses: cursor moves (CSI row;col H), colours and modes
(ignored), OSC strings, carriage returns and line feeds; characters take their cell widths."""

from __future__ import annotations

import re

from rich.cells import get_character_cell_size

_SEQUENCE = re.compile(r"\x1b\[([0-9;?<>=$]*)([A-Za-z~@`])|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>78]")


class TerminalScreen:
    def __init__(self) -> None:
        self.cells: dict[int, dict[int, str]] = {}
        self.row = self.col = 0
        self._pending = ""

    def feed(self, data: str) -> None:
        data = self._pending + data
        self._pending = ""
        cut = data.rfind("\x1b")
        if cut != -1 and not _SEQUENCE.match(data, cut):  # a sequence cut in two: wait for the rest
            if len(data) - cut < 64:
                data, self._pending = data[:cut], data[cut:]
        at = 0
        for match in _SEQUENCE.finditer(data):
            self._text(data[at:match.start()])
            at = match.end()
            if match.group(2) == "H":
                numbers = [int(n) if n.isdigit() else 1 for n in (match.group(1) or "1;1").split(";")] + [1, 1]
                self.row, self.col = numbers[0] - 1, numbers[1] - 1
        self._text(data[at:])

    def _text(self, text: str) -> None:
        for char in text:
            if char == "\r":
                self.col = 0
            elif char == "\n":
                self.row += 1
            elif char >= " ":
                row = self.cells.setdefault(self.row, {})
                row[self.col] = char
                width = max(get_character_cell_size(char), 1)
                for extra in range(1, width):
                    row[self.col + extra] = ""  # the second cell of a wide character
                self.col += width

    def lines(self) -> list[str]:
        if not self.cells:
            return []
        return ["".join(cells.get(col, " ") for col in range(max(cells, default=-1) + 1)).rstrip()
                for cells in (self.cells.get(row, {}) for row in range(max(self.cells) + 1))]

    def text(self) -> str:
        return "\n".join(self.lines())
