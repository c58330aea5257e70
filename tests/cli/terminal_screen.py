"""The rows a terminal shows after what a program wrote to it (``Screen``), as the chat's
pseudo-terminal tests read them."""

from __future__ import annotations

import re
import unicodedata

COLUMNS = 80
"""How wide the test's terminal is."""

_CONTROL = re.compile(r"\x1b\[\??([0-9]*)([A-Za-z])|[\r\n\b]|[^\x1b\r\n\b]")


class Screen:
    """The rows a terminal shows, fed what a program writes, for the few controls the chat
    writes: carriage return, line feed (as the terminal's ``\\r\\n``), backspace, cursor up
    and erase below. A full row wraps at the next character, as xterm does; a wide
    character takes two columns, and wraps whole when only one is left."""

    def __init__(self, columns: int = COLUMNS) -> None:
        self.columns = columns
        self._rows: list[list[str]] = [[]]
        self._continued = [False]  # of each row: it goes on the row above, wrapped there
        self._row = self._column = 0
        self._wrap = False

    def feed(self, written: str) -> None:
        """Draw ``written`` at the cursor."""
        rows = self._rows
        for match in _CONTROL.finditer(written):
            token, count, final = match.group(0), match.group(1), match.group(2)
            if final == "A":
                self._row, self._wrap = max(self._row - int(count or "1"), 0), False
            elif final == "J":
                del rows[self._row][self._column :]
                del rows[self._row + 1 :]
                del self._continued[self._row + 1 :]
            elif final is not None:
                continue  # a control the chat does not write
            elif token == "\r":
                self._column, self._wrap = 0, False
            elif token == "\n":
                self._row, self._wrap = self._row + 1, False
            elif token == "\b":
                self._column, self._wrap = max(self._column - 1, 0), False
            else:
                self._character(token)
            while len(rows) <= self._row:
                rows.append([])
                self._continued.append(False)

    def _character(self, token: str) -> None:
        wide = 2 if unicodedata.east_asian_width(token) in ("W", "F") else 1
        wraps = self._wrap or self._column + wide > self.columns  # never straddles two rows
        if wraps:
            self._row, self._column, self._wrap = self._row + 1, 0, False
        while len(self._rows) <= self._row:
            self._rows.append([])
            self._continued.append(False)
        if wraps:
            self._continued[self._row] = True
        line = self._rows[self._row]
        line.extend(" " * (self._column + wide - len(line)))
        line[self._column : self._column + wide] = [token, ""][:wide]  # 2nd cell: nothing
        if self._column + wide == self.columns:
            self._wrap = True
        else:
            self._column += wide

    def resize(self, columns: int, *, rewrap: bool = False) -> None:
        """Make the terminal ``columns`` wide, as xterm does: rows keep their text, cut at
        the new width, and are not wrapped again; the cursor stays on its row. With
        ``rewrap``, as GNU screen and tmux do: the rows of each line that wrapped are laid
        out again at the new width, and the cursor stays at its place in its line."""
        if rewrap:
            self._rewrap(columns)
            return
        self.columns = columns
        for line in self._rows:
            del line[columns:]
        self._column, self._wrap = min(self._column, columns - 1), False

    def _rewrap(self, columns: int) -> None:
        lines: list[list[str]] = []
        cursor = (0, 0)  # the cursor's line, and how many cells of it come before it
        for number, row in enumerate(self._rows):
            if not (self._continued[number] and lines):
                lines.append([])
            if number == self._row:
                cursor = (len(lines) - 1, len(lines[-1]) + self._column + self._wrap)
            # A wrapped row is as wide as the terminal was, its end blank where not written.
            wrapped = number + 1 < len(self._rows) and self._continued[number + 1]
            lines[-1].extend(row + [" "] * (self.columns - len(row)) if wrapped else row)
        self.columns, self._rows, self._continued = columns, [], []
        for number, cells in enumerate(lines):
            rows = [cells[at : at + columns] for at in range(0, len(cells), columns)] or [[]]
            if number == cursor[0]:
                self._row = len(self._rows) + cursor[1] // columns
                self._column, self._wrap = cursor[1] % columns, False
                if cursor[1] and cursor[1] == len(cells) and not self._column:
                    self._row, self._column, self._wrap = self._row - 1, columns - 1, True
            self._rows.extend(rows)
            self._continued.extend([False] + [True] * (len(rows) - 1))
        while len(self._rows) <= self._row:
            self._rows.append([])
            self._continued.append(False)

    def rows(self) -> list[str]:
        """The rows shown, without trailing spaces."""
        return ["".join(line).rstrip() for line in self._rows]


def up_to_last_written(rows: list[str]) -> list[str]:
    """``rows`` without the blank rows below the last one written on."""
    end = len(rows)
    while end and not rows[end - 1]:
        end -= 1
    return rows[:end]


def screen(written: str, columns: int = COLUMNS) -> list[str]:
    """The rows a terminal ``columns`` wide shows after ``written`` (``Screen``)."""
    shown = Screen(columns)
    shown.feed(written)
    return shown.rows()
