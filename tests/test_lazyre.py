"""cudafix.model.lazyre: a pattern compiled on first use answers as ``re.compile`` of the same
pattern does (re is the truth), compiles nothing before, and every lazy pattern of cudafix
compiles (a typo would otherwise show only where the pattern is first used)."""

from __future__ import annotations

import importlib
import pkgutil
import re

from hypothesis import given, settings
from hypothesis import strategies as st

import cudafix
from cudafix.model.lazyre import LazyPattern, lazy_re

PATTERNS = [(r"^\s*[+-]?(\d+\.?\d*([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?)", 0), (r"(error|warning)\s+", re.I),
            (r"^GPU-[0-9a-fA-F-]+$", 0), (r"\.so($|\.)", 0)]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(PATTERNS), st.text(alphabet="0123456789.eE+- GPUaf-soErrorWARNING\t", max_size=20))
def test_answers_as_the_compiled_pattern(pat, text):
    lazy, real = lazy_re(*pat), re.compile(*pat)
    for name in ("match", "search", "fullmatch"):
        a, b = getattr(lazy, name)(text), getattr(real, name)(text)
        assert (a and (a.span(), a.groups())) == (b and (b.span(), b.groups()))
    assert lazy.sub("<>", text) == real.sub("<>", text)
    assert [m.span() for m in lazy.finditer(text)] == [m.span() for m in real.finditer(text)]
    assert (lazy.pattern, lazy.flags) == (real.pattern, real.flags)


def test_compiles_on_first_use_only():
    p = lazy_re(r"a+b")
    assert p._compiled is None
    assert p.match("aab")
    assert p._compiled is re.compile(r"a+b")  # re's own cache: the same object


def test_every_lazy_pattern_of_cudafix_compiles():
    found = 0
    for m in pkgutil.walk_packages(cudafix.__path__, "cudafix."):
        if m.name.startswith("cudafix.plugins") or m.name.endswith("__main__"):
            continue
        for v in vars(importlib.import_module(m.name)).values():
            if isinstance(v, LazyPattern):
                assert isinstance(v.pattern, (str, bytes))  # compiles it (re.error otherwise)
                found += 1
    assert found >= 25
