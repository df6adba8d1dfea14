"""cudafix.probes.pyenv.versionpy against the truth, ``ast``: the line reading gives ``ast``'s answer
or steps aside, on every real version.py of the test venvs and on generated texts built from
the pieces that could fool a line reader (strings holding '#', comments holding quotes,
brackets opened in a block and closed at column 0, one-line compound statements, ...).  The
real files' values are also those Python gives when it runs them."""

from __future__ import annotations

import ast
import glob
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cudafix.probes.pyenv import versionpy as vp
from tests.conftest import REPO

VENVS = os.environ.get("CUDAFIX_TEST_VENVS") or os.path.expanduser("~/.cache/cudafix-venvs")


# The reading the line reader must equal: ast's (the module's own, unchanged from torch_build's
# earlier parser); itself checked below against Python running the real files.
ast_reading = vp._read_ast


def _real_version_files():
    found = sorted(glob.glob(os.path.join(VENVS, "*", "lib", "python*", "site-packages", "*", "version.py")))
    return [p for p in found if os.path.basename(os.path.dirname(p)) in ("torch", "torchvision")]


def test_the_venvs_hold_torch_and_torchvision_version_files():
    names = {os.path.basename(os.path.dirname(p)) for p in _real_version_files()}
    assert names == {"torch", "torchvision"}, _real_version_files()


@pytest.mark.parametrize("path", _real_version_files() or ["(none)"])
def test_real_version_py_read_by_lines_as_ast_reads_it(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    assert vp._read_lines(text) is not None, "torch's and torchvision's own shape must take the line reading"
    assert vp.parse_version_py(text) == ast_reading(text)
    assert vp.parse_version_py(text)["__version__"]


def _run_by_python(text):
    """The names each top-level statement leaves when Python runs it, in order; a statement that
    fails here (torchvision's import of its own extension) is passed over, as its values are not
    literals anyway."""
    g = {}
    for stmt in ast.parse(text).body:
        try:
            exec(compile(ast.Module([stmt], type_ignores=[]), "version.py", "exec"), g)  # noqa: S102 (the test venvs' files)
        except Exception:  # noqa: BLE001
            pass
    return g


@pytest.mark.parametrize("path", _real_version_files() or ["(none)"])
def test_real_version_py_values_are_what_python_runs_it_to(path):
    """Truth independent of cudafix: each name read has the value Python gives it by running the
    file (torchvision's computed `cuda` is not a literal: not read)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    got, truth = vp.parse_version_py(text), _run_by_python(text)
    assert got == {k: truth[k] for k in got}
    assert got["__version__"] and "git_version" in got


def test_the_line_reading_never_imports_ast():
    paths = _real_version_files()
    # the module alone, by its file: the cudafix.probes package imports dataclasses (and so ast)
    code = ("import sys, importlib.util, cudafix.model.lazyre\n"
            "spec = importlib.util.spec_from_file_location('versionpy', 'cudafix/probes/pyenv/versionpy.py')\n"
            "v = importlib.util.module_from_spec(spec); spec.loader.exec_module(v)\n"
            "had = 'ast' in sys.modules\n"
            "for p in sys.argv[1:]:\n"
            "    assert v.parse_version_py(open(p, encoding='utf-8').read())\n"
            "print(had, 'ast' in sys.modules)\n")
    # -S: no site (a .pth of the test env may import ast itself)
    out = subprocess.run([sys.executable, "-S", "-c", code] + paths, cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


# Each case is one that a reader by lines could get wrong; ast says what is right.
TRAPS = [
    "x = 'a'\n",
    "x = 'a#b'  # it's a comment with a quote\n",
    "if c:\n    y = f(\nx = 'FAKE'\n)\n",                       # keyword argument at column 0
    "if c:\n    y = f(\nx = 'FAKE'\nif d else lambda:\n    0)\n",  # ... kept open by a lambda
    "if c:\n    s = [\nx = 'FAKE'\n    ]\n",
    "x = 'a'\n    # indented comment\ny = 1\n",
    "if c: y = {1:\n    2}\nx = 'a'\n",
    "x = f'a'\n",
    "x = b'a'\n",
    "x = 'a' 'b'\n",
    "x = u'a'\n",
    "x = ''\ny = []\nz = ['a', \"b\",]\n",
    "x = -0\ny = 10\nz = 007\n",
    "x = None\ny = True\nz = False\n",
    "x: Optional[str] = '13.0'\ny: int\n",
    "x = 1\nx = 'again'\n",
    "from typing import Optional\nimport os.path as p\n__all__ = ['x']\nx = 'a'\n",
    "def f():\n    return 'a'\nx = 'b'\n",
    "@decorator\nclass A:\n    x = 'inner'\ny = 'outer'\n",
    "try:\n    import foo\nexcept ImportError:\n    pass\nelse:\n    z = 2\nx = 'a'\n",
    "return 'a'\n",        # parses, does not compile
    "x = 'a'\nthis is ( not python\n",
    "x = 'a\n",
    "x = 'a';y = 'b'\n",
    "x = 'a' \\\n  'b'\n",
    "x = '''a\ny = 'b'\n'''\n",
    "x = 'é'\n",
    "\ufeffx = 'a'\n",
    "x = 'a'\r\ny = 'b'\r\n",
    "match = 'a'\nmatch x:\n    case 1:\n        pass\n",
    "x = Nonesuch\n",
    "x = 1.5\ny = 0x10\n",
    "x = [1, 2]\n",
    "x = ('a')\n",
    "if x == 'a':  # 'b'\n    y = 1\nz = 'c'\n",
    "",
]


@pytest.mark.parametrize("text", TRAPS, ids=range(len(TRAPS)))
def test_traps_read_as_ast_reads_them(text):
    assert vp.parse_version_py(text) == ast_reading(text)


_STRINGS = st.sampled_from(["'a'", "'#'", "\"it's\"", "''", "'x y'", "'('", "')'", "'['", "f'a'", "b'a'", "'a' 'b'"])
_VALUES = st.one_of(_STRINGS, st.sampled_from(["None", "True", "False", "0", "12", "-3", "007", "1.5", "[", "(", "{1:", "]", ")",
                                                "['a', 'b']", "[]", "lambda:", "f(", "x", "'a' if c else"]))
_LINES = st.one_of(
    st.tuples(st.sampled_from(["x", "cuda", "hip", "__version__", "a1"]), st.sampled_from([" = ", "=", ": Optional[str] = ", ": int"]),
              _VALUES).map("".join),
    st.sampled_from(["if c:", "else:", "def f():", "class A:", "@d", "for i in y:", "try:", "except E:", "if d[1:",
                     "if c: y = {1:", "import os", "from typing import Optional", "# a comment with ' quote",
                     "", ")", "]", "}", "0)", "pass", "'''", "\"\"\"", "x = 'a'  # 'b'", "z = f(", "if d else lambda:"]),
)
_INDENTED = st.tuples(st.sampled_from(["", "    ", "        "]), _LINES).map("".join)


@settings(max_examples=3000, deadline=None)
@given(st.lists(_INDENTED, max_size=10))
def test_generated_texts_read_as_ast_reads_them(lines):
    text = "\n".join(lines) + "\n"
    assert vp.parse_version_py(text) == ast_reading(text)


# Valid statements of many shapes, so that most generated texts compile and take the line reading.
_BLOCKS = st.one_of(
    st.tuples(st.sampled_from(["x", "cuda", "hip", "__version__", "git_version"]),
              st.sampled_from([" = ", "=", ": Optional[str] = ", " : str = "]),
              st.sampled_from(["'a'", "'#'", "\"it's\"", "''", "'13.0'", "None", "True", "False", "0", "12", "-3", "[]",
                               "['a', 'b']", "['a',]", "1.5", "f(1)", "x", "('a')"]),
              st.sampled_from(["", "  # c", "  # it's", " #'"])).map("".join),
    st.sampled_from([
        "from typing import Optional", "import os", "import os.path as p", "# comment",
        "if c:\n    y = f(\nx = 'FAKE'\n)",
        "if c:\n    y = f(\nx = 'FAKE'\nif d else lambda:\n    0)",
        "if c:\n    s = [\n        'x',\n    ]",
        "if c: y = {1:\n    2}",
        "if _check() > 0:\n    cuda = _check()",
        "try:\n    from x import y\nexcept ImportError:\n    y = 'b'",
        "def f(a,\n      b='x'):\n    return 'a'",
        "@d\nclass A:\n    x = 'inner'",
        "with open(p) as f:\n    z = 'in'",
        "y = {\n    'k': 'v',\n}",
        "y = (\n'a'\n)",
        "for i in range(3):\n    pass\nelse:\n    w = 1",
    ]),
)


@settings(max_examples=2000, deadline=None)
@given(st.lists(_BLOCKS, min_size=1, max_size=8))
def test_generated_programs_read_as_ast_reads_them(blocks):
    text = "\n".join(blocks) + "\n"
    assert vp.parse_version_py(text) == ast_reading(text)
