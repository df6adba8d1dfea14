"""The report's text toolkit: line collection with optional colour, rows, value formatting."""

from __future__ import annotations

import re
import shlex

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, Iterable, List, Optional, Sequence

from cudafix.model.findings import ERROR, INFO, UNKNOWN, WARNING
from cudafix.model.lazyre import lazy_re


DASH = "\u2014"  # em dash; the CLI swaps it for "-" where stdout cannot encode it


SEVERITY_ORDER = {ERROR: 0, WARNING: 1, INFO: 2}


COLOURS = {
    ERROR: "\033[31m",  # red
    WARNING: "\033[33m",  # yellow
    INFO: "\033[36m",  # cyan
    UNKNOWN: "\033[35m",  # magenta
    "ok": "\033[32m",  # green
    "bold": "\033[1m",
    "dim": "\033[2m",
}


RESET = "\033[0m"


# Where a safe fix applies (Fix.applies_in), as the report says it.
APPLIES_IN = {
    "activation": "on `conda activate`",
    "process": "at `import torch`",
    "both": "on `conda activate` and at `import torch`",
}


class Out:
    """Collects lines; knows whether to colour."""

    def __init__(self, color: bool) -> None:
        self.color = color
        self.lines: List[str] = []

    def style(self, text: str, *names: str) -> str:
        if not self.color or not text:
            return text
        return "".join(COLOURS[n] for n in names) + text + RESET

    def add(self, text: str = "") -> None:
        self.lines.append(text)

    def section(self, title: str) -> None:
        if self.lines:
            self.add()
        self.add(self.style(title, "bold"))

    def text(self) -> str:
        return "\n".join(terminal_line(ln, self.color) for ln in self.lines) + "\n"


_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_OWN_CODES = lazy_re("(%s)" % "|".join(re.escape(c) for c in sorted(set(COLOURS.values()) | {RESET}, key=len, reverse=True)))


def _escaped(c: str) -> str:
    o = ord(c)
    return _ESCAPES.get(c) or ("\\x%02x" % o if o < 0x100 else "\\u%04x" % o if o < 0x10000 else "\\U%08x" % o)


def printable(text: str) -> str:
    """``text`` with every character a terminal would act on written out as an escape (\\x1b, \\r,
    \\n, \\x9b, \\u202e, ...): a string from a snapshot (a node name, a version, an env value)
    cannot move the cursor, set the title, recolour the screen or forge a line of the report."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _escaped(c) for c in text)


def terminal_line(line: str, color: bool) -> str:
    """One line of a text report: printable(), keeping only the renderer's own colour codes
    (when it colours: a snapshot string spelling one of them exactly can recolour, nothing more)."""
    if line.isprintable():
        return line
    if not color:
        return printable(line)
    return "".join(p if i % 2 else printable(p) for i, p in enumerate(_OWN_CODES.split(line)))


def unknown_text(reason: Optional[str]) -> str:
    """How an undecided value reads: 'unknown — <why>'."""
    return "unknown %s %s" % (DASH, reason) if reason else "unknown"


def shell_value(value: str) -> str:
    """A variable's value as a POSIX shell would need it: '' stays visible."""
    return shlex.quote(value)


def via_text(out: Out, via: Optional[str]) -> str:
    return out.style("(%s)" % via, "dim") if via else ""


def row(out: Out, label: str, value: str, via: Optional[str] = None, width: int = 16) -> None:
    line = "  %-*s %s" % (width, label, value)
    if via:
        line += "  " + via_text(out, via)
    out.add(line.rstrip())


def field(
    out: Out,
    label: str,
    value: Any,
    found_via: Dict[str, str],
    unknown: Dict[str, str],
    key: str,
    shown: List[str],
    absent: str = "not found",
) -> None:
    shown.append(key)
    if value is None or value == "":
        if key in unknown:
            row(out, label, out.style(unknown_text(unknown[key]), UNKNOWN))
        else:
            row(out, label, absent)
        return
    row(out, label, str(value), found_via.get(key))


def remaining_unknowns(out: Out, unknown: Dict[str, str], shown: Sequence[str]) -> None:
    for key in sorted(unknown):
        if key not in shown:
            row(out, key.replace("_", " "), out.style(unknown_text(unknown[key]), UNKNOWN))


def mib_text(n: Optional[int]) -> str:
    if n is None:
        return "?"
    if n >= 1 << 30:
        return "%.1f GiB" % (n / float(1 << 30))
    if n >= 1 << 20:
        return "%.0f MiB" % (n / float(1 << 20))
    if n >= 1 << 10:
        return "%.0f KiB" % (n / 1024.0)
    return "%d B" % n


def wrap_list(prefix: str, items: Sequence[str], width: int = 80, sep: str = ", ") -> List[str]:
    """``prefix`` and the items joined by ``sep``, wrapped to ``width`` only between items (an
    item is never split: "nvidia-cuda-runtime-cu12 12.4.127" stays one line's), continuation
    lines under the first item.  An item longer than the room stays whole on its own line."""
    if not items:
        return []
    return wrap_atoms(prefix, [it + sep for it in items[:-1]] + list(items[-1:]), len(prefix), width, joiner="")


def wrap_atoms(first: str, atoms: Sequence[str], hang: int, width: int = 80, joiner: str = " ") -> List[str]:
    """``first`` then the atoms joined by ``joiner``, broken only between atoms; continuation lines
    start at column ``hang``.  The report's lists are written through this, so that the final fit
    to 80 columns (fit_lines, which breaks at any space) finds nothing more to break."""
    if hang > width // 2:  # a long label: continue under its start instead (as fit_lines does)
        hang = len(first) - len(first.lstrip(" ")) + 4
    lines: List[str] = []
    cur = first
    fresh = True  # nothing but the prefix or the hang on the current line yet
    for atom in atoms:
        piece = atom if fresh else joiner + atom
        if not fresh and visible_len(cur + piece.rstrip(" ")) > width:
            lines.append(cur.rstrip(" "))
            cur, piece = " " * hang, atom.lstrip(" ")
        cur += piece
        fresh = False
    lines.append(cur.rstrip(" "))
    return lines


def plural(n: int, word: str) -> str:
    return "%d %s%s" % (n, word, "" if n == 1 else "s")


# -- fitting the report to a terminal -----------------------------------------------------------

WIDTH = 80
_ANSI = lazy_re(r"\x1b\[[0-9;]*m")
_TAG = lazy_re(r"(error|warning|info|unknown)\s+")  # a finding's severity column
_COLUMN = lazy_re(r"\S+(?: \S+)?( {2,})")  # "label   value": the value column


def visible_len(text: str) -> int:
    return len(_ANSI.sub("", text))


def _hang(line: str) -> int:
    """Where a wrapped line's continuation starts: under the text its first line introduced."""
    lead = len(line) - len(line.lstrip(" "))
    body = _ANSI.sub("", line[lead:])
    m = _TAG.match(body) or (None if body.startswith("- ") else _COLUMN.match(body))
    hang = lead + (2 if body.startswith("- ") else (m.end() if m else 4))
    return hang if hang <= WIDTH // 2 else lead + 4


# a shell command line: "$ cmd", a plan step "3. $ cmd", fix --apply's "[2/3] $ cmd"
_COMMAND_LINE = lazy_re(r"^\s*(?:\d+\.\s+|\[\d+/\d+\]\s+)?\$ ")


# Where fit_lines may break: a run of spaces, except one space between a name and the version
# that follows it ("nvidia-nccl-cu12 2.27.3", "CUDA 13.0", "torch 2.4.1": one entry of a list).
_BREAK = lazy_re(r"( {2,}|(?<=[,;:]) | (?!\d[\w.+-]*[),;:]?(?= |$|\x1b)))")


def fit_lines(lines: Iterable[str], width: int = WIDTH, hang: Optional[int] = None) -> List[str]:
    """Each line longer than ``width`` (colour codes not counted) wrapped at spaces with a hanging
    indent.  A word longer than the room left (a path, a URL) stays whole and runs over; a shell
    command line (``$ ...``, a plan step ``N. $ ...``) is kept whole, so that it pastes as one command.  ``hang``: the
    continuation column (default: under the text the line's label, bullet or tag introduces)."""
    out: List[str] = []
    for line in lines:
        if visible_len(line) <= width or _COMMAND_LINE.match(line):
            out.append(line)
            continue
        at = _hang(line) if hang is None else hang
        lead = len(line) - len(line.lstrip(" "))
        cur, cur_len, has_word = line[:lead], lead, False
        for tok in _BREAK.split(line[lead:]):
            if not tok:
                continue
            n = visible_len(tok)
            if tok.startswith(" "):
                if has_word:
                    cur, cur_len = cur + tok, cur_len + n
                continue
            if has_word and cur_len + n > width and visible_len(cur.rstrip(" ")) > at:  # never a line of only a bullet
                out.append(cur.rstrip(" "))
                cur, cur_len = " " * at, at
            cur, cur_len, has_word = cur + tok, cur_len + n, True
        out.append(cur.rstrip(" "))
    return out


def fit_text(text: str, width: int = WIDTH) -> str:
    """:func:`fit_lines` over a rendered text (its final newline kept)."""
    end = "\n" if text.endswith("\n") else ""
    return "\n".join(fit_lines(text[:-1].split("\n") if end else text.split("\n"), width)) + end
