"""The literal top-level assignments of a package's ``version.py``, as ``ast`` reads them.

:func:`parse_version_py` is the ``ast`` reading: ``ast.parse`` the text, keep each top-level
``name = <literal>`` / ``name: <annotation> = <literal>`` whose value ``ast.literal_eval``
takes, skip everything else (compound statements included), nothing executed; a text that does
not parse gives ``{}``.

Importing ``ast`` and parsing is a measurable part of every `cudafix status` (torch's and
torchvision's version.py are read on every run; docs/benchmarks.md, "Figures behind the code"), so a file
of the shape torch and torchvision write is read line by line where that gives ``ast``'s answer
for certain: the text compiles (so it is valid Python, and ``ast.parse`` would parse it the
same); every line at column 0 is blank, a comment, a one-line ``import``, a one-line header of a
compound statement (whose indented lines are skipped, as ``ast``'s reading skips the statement),
or a one-line assignment of a plain literal (``None``, ``True``, ``False``, a decimal integer, a
quoted string without backslashes, a one-line list of such strings).  With no triple quote,
backslash, semicolon, tab or prefixed string (f'', b'', r'') in the text, a statement goes on
past its line only inside brackets, and the brackets are counted on every line (strings and
comments left out): a line at column 0 inside brackets, or an indented line outside a compound
statement, leaves the text to ``ast`` (``tests/test_versionpy.py`` compares both readings).
Anything else is read by ``ast``.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, Optional

from cudafix.model.lazyre import lazy_re

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_STR = r"'[^'\\\n]*'|\"[^\"\\\n]*\""
_SCALAR = r"None|True|False|-?(?:0|[1-9][0-9]*)|" + _STR
_TAIL = r"[ ]*(?:#.*)?$"
_ASSIGN = lazy_re(r"(%s)[ ]*(?::[ ]*[A-Za-z0-9_.\[\], ]+?[ ]*)?=[ ]*(%s|\[[ ]*(?:(?:%s)[ ]*(?:,[ ]*(?:%s)[ ]*)*,?[ ]*)?\])%s"
                  % (_NAME, _SCALAR, _STR, _STR, _TAIL))
_IMPORT = lazy_re(r"(?:from[ ]+[A-Za-z0-9_.]+[ ]+)?import[ ]+[A-Za-z0-9_., ]+%s" % _TAIL)
_HEADER = lazy_re(r"(?:(?:if|elif|while|for|with|def|class|async|try|except|else|finally)\b.*:|@.*)[ ]*$")
_LIST_ITEM = lazy_re(_STR)
_STRINGS_AND_COMMENT = lazy_re(_STR + r"|#.*")  # leftmost first: a '#' in a string, a quote in a comment
_UNSAFE = ("'''", '"""', "\\", ";", "\t", "\r", "\f", "\x00")


def parse_version_py(text: str) -> Dict[str, object]:
    """``{name: value}`` of the literal top-level assignments (``x = 'a'``, ``cuda: Optional[str] = '13.0'``).

    Never executes anything: values that are not literals are skipped."""
    fast = _read_lines(text)
    return fast if fast is not None else _read_ast(text)


def _read_ast(text: str) -> Dict[str, object]:
    import ast

    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return {}
    out = {}  # type: Dict[str, object]
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if not isinstance(target, ast.Name):
            continue
        try:
            out[target.id] = ast.literal_eval(value)
        except (ValueError, SyntaxError, TypeError):
            continue
    return out


def _read_lines(text: str) -> Optional[Dict[str, object]]:
    """``ast``'s answer read line by line, or None where that is not certain (see the module doc)."""
    if any(u in text for u in _UNSAFE):
        return None
    try:
        compile(text, "version.py", "exec", dont_inherit=True)  # valid Python: parsed as ast would
    except (SyntaxError, ValueError):
        return None  # ast decides ({} or what it can parse): compile is stricter than ast.parse
    out = {}  # type: Dict[str, object]
    depth = 0  # open brackets: with no backslash and no triple quote the only way a line goes on
    in_block = False  # after a compound statement's header: its indented lines are skipped
    for line in text.split("\n"):
        code = _code(line)
        if code is None:
            return None
        at = depth
        depth += sum(code.count(c) for c in "([{") - sum(code.count(c) for c in ")]}")
        if not code.strip():
            continue  # blank or a comment (where a statement goes on: only inside brackets)
        if at:
            if line[0] != " ":
                return None  # column 0 inside brackets: not a statement of its own
            continue
        if line[0] == " ":
            if not in_block:
                return None
            continue
        in_block = False
        m = _ASSIGN.match(line)
        if m:
            out[m.group(1)] = _value(m.group(2))
        elif _HEADER.match(code):
            in_block = True
        elif not _IMPORT.match(line):
            return None
    return out


def _code(line: str) -> Optional[str]:
    """The line without its strings and comment (what its brackets are counted on), or None where
    a string is not a plain one: a prefix (f'', b'', r'', u'') or another string right before it."""
    parts, at = [], 0
    for m in _STRINGS_AND_COMMENT.finditer(line):
        i = m.start()
        if line[i] != "#" and i and (line[i - 1].isalnum() or line[i - 1] in "_'\""):
            return None
        parts.append(line[at:i])
        at = m.end()
    parts.append(line[at:])
    return "".join(parts)


def _value(lit: str) -> object:
    if lit == "None":
        return None
    if lit in ("True", "False"):
        return lit == "True"
    if lit[0] in "'\"":
        return lit[1:-1]
    if lit[0] == "[":
        return [s[1:-1] for s in _LIST_ITEM.findall(lit)]
    return int(lit)
