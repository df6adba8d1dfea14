"""The pasted text as lines: decoded, fences and quoting removed, size bounded.

Everything a person pastes into an issue comes in as it is: Markdown fences (```), `>` quoting,
<details> tags, Windows line endings, terminal colours, a truncated copy, binary junk, a 10 MB
log.  This turns it into lines the parsers read one at a time; what it drops or cuts is said in
a note, never silently.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import List, Tuple, Union

# A paste larger than this is read in its first and last halves of this size: a 10 MB log is
# read whole (below the limit), a 1 GB file does not take the machine down.
MAX_CHARS = 16 * 1024 * 1024
MAX_LINE = 4000  # one line longer than this is cut (a minified blob, base64)

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_TAGS = re.compile(r"</?(details|summary|pre|code|br|p)\b[^>]*>", re.I)
_QUOTE = re.compile(r"^(?:\s{0,3}>)+ ?")
_FENCE = re.compile(r"^\s*(?:```|~~~)[\w+-]*\s*$")  # a fence line, with its language tag


def decode(data: Union[bytes, str]) -> Tuple[str, List[str]]:
    """(text, notes): bytes as UTF-8 (UTF-16 when it has a BOM), undecodable bytes replaced."""
    notes: List[str] = []
    if isinstance(data, bytes):
        if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
            text = data.decode("utf-16", "replace")  # PowerShell's `>` writes UTF-16
        else:
            text = data.decode("utf-8", "replace")
        if "\ufffd" in text:
            notes.append("some bytes are not UTF-8 text: they were replaced and skipped")
    else:
        text = data
    if text.startswith("\ufeff"):
        text = text[1:]
    return text, notes


def lines_of(data: Union[bytes, str]) -> Tuple[List[str], List[str]]:
    """(lines, notes): one entry per line of the paste (line N of the paste is lines[N-1])."""
    text, notes = decode(data)
    if len(text) > MAX_CHARS:
        half = MAX_CHARS // 2
        dropped = text[half:-half].count("\n")
        notes.append("the paste has %d characters: its middle (%d lines) was not read" % (len(text), dropped))
        text = text[:half] + "\n" * dropped + text[-half:]  # line numbers stay those of the paste
    raw = text.splitlines()
    out: List[str] = []
    cut = 0
    for line in raw:
        if len(line) > MAX_LINE:
            line = line[:MAX_LINE]
            cut += 1
        if "\x1b" in line:
            line = _ANSI.sub("", line)
        line = _CONTROL.sub("", line)
        if "<" in line:
            line = _TAGS.sub("", line)
        if "\uff1a" in line:
            line = line.replace("\uff1a", ":")  # a full-width colon (CJK input methods)
        if line.lstrip().startswith(">"):
            line = _QUOTE.sub("", line)
        if "```" in line or line.lstrip().startswith("~~~"):
            # a Markdown fence, alone on its line or glued to the text it opens or closes
            line = _FENCE.sub("", line).replace("```", "")
        out.append(line)
    if cut:
        notes.append("%d line%s longer than %d characters %s cut" % (cut, "" if cut == 1 else "s", MAX_LINE, "was" if cut == 1 else "were"))
    return out, notes
