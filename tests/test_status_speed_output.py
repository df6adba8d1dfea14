"""The status import diet (issue 23) changes no output: `status`, `status --json` and `check` print
byte-identical stdout, and exit with the same code, on this tree and on the tree the change started
from (BASE, extracted with `git archive`), for every snapshot fixture (tests/fixtures/**/*.json of
schema cudafix.snapshot/1 and the bundled examples).  (This machine probed live was compared too
when the change was made; it is left out of the suite, where other tests change the machine --
network namespaces, Slurm and Ray daemons -- while the two trees probe it.)  When output is changed
on purpose, BASE moves to the commit before that change.

The truth is the earlier tree's own output, run as a real `python -m cudafix` process each time.
"""

from __future__ import annotations

import concurrent.futures
import os
import pathlib
import re
import shutil
import subprocess
import sys
from typing import List, Tuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import REPO, require, snapshot_files

BASE = "0c06206c574a352b7b5e4b98546e4340308f2515"  # moved (issue 34 with 35-39 merged): the compatibility model, one cause one finding, the import simulation, the verdict first
COMMANDS = (["status"], ["status", "--json"], ["check"])




@pytest.fixture(scope="module")
def base_tree(tmp_path_factory) -> pathlib.Path:
    src = tmp_path_factory.mktemp("base")
    tar = subprocess.run(["git", "-C", str(REPO), "archive", BASE, "cudafix"], capture_output=True, timeout=120)
    require(tar.returncode == 0, "commit %s not in this checkout" % BASE[:7])
    subprocess.run(["tar", "-x", "-C", str(src)], input=tar.stdout, check=True, timeout=120)
    return src


STAMP = re.compile(rb'"created": "\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[^"]*"')


@pytest.fixture(scope="module")
def new_tree(tmp_path_factory) -> pathlib.Path:
    """This checkout's cudafix/ alone, laid out as the base tree is: the probed extension scan reads
    every directory on sys.path, and the checkout's root holds more than cudafix/."""
    dst = tmp_path_factory.mktemp("new")
    shutil.copytree(str(REPO / "cudafix"), str(dst / "cudafix"), ignore=shutil.ignore_patterns("__pycache__"))
    return dst


def _run(tree: pathlib.Path, args: List[str], xdg: pathlib.Path) -> Tuple[int, bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDAFIX_", "PYTHON"))}
    # same terminal-free environment for both trees; a cache per tree so neither warms the other's
    env.update(PYTHONPATH=str(tree), XDG_CACHE_HOME=str(xdg), NO_COLOR="1", PYTHONDONTWRITEBYTECODE="1")
    p = subprocess.run([sys.executable, "-m", "cudafix"] + args, env=env, cwd=str(xdg.parent),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    if "--from" in args:
        return p.returncode, p.stdout
    # probed live: the snapshot's time and the tree's own place (on sys.path) differ by nature
    return p.returncode, STAMP.sub(b'"created": "-"', p.stdout.replace(str(tree).encode(), b"<tree>"))


def test_there_are_snapshots_to_compare():
    snaps = snapshot_files()
    assert len(snaps) >= 20, snaps  # 42 fixtures and 1 example when this test was written
    assert any(p.parent.name == "examples" for p in snaps)


def test_status_and_check_output_unchanged(new_tree, base_tree, tmp_path):
    cases = [c + ["--from", str(p)] for p in snapshot_files() for c in COMMANDS]
    trees = {"new": new_tree, "base": base_tree}
    for name in trees:
        (tmp_path / name / "xdg").mkdir(parents=True)
    jobs = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        for args in cases:
            jobs.append((args, {n: pool.submit(_run, t, args, tmp_path / n / "xdg") for n, t in trees.items()}))
        differ = []
        for args, futs in jobs:
            new, base = futs["new"].result(), futs["base"].result()
            if new != base:
                differ.append("%s: exit %d vs %d, stdout %s" % (
                    " ".join(args), new[0], base[0], "same" if new[1] == base[1] else "differs"))
    assert not differ, "\n".join(differ)
    # the comparison is not vacuous: real reports came out, and `check` found errors somewhere
    outs = [f["new"].result() for a, f in jobs]
    assert all(o[1] for o in outs)
    assert {o[0] for o in outs} >= {0, 1}


# -- versions.release reads "N.N.N" and "N.N.N+local" without packaging: the same tuple as packaging's --

_NUM = st.from_regex(r"\A[0-9]{1,4}\Z")
_LOCAL = st.from_regex(r"\A[a-zA-Z0-9]{1,5}([-_.][a-zA-Z0-9]{1,3}){0,2}\Z")


@settings(max_examples=400, deadline=None)
@given(st.lists(_NUM, min_size=1, max_size=5), st.one_of(st.none(), _LOCAL), st.sampled_from(["", " ", "\t"]))
def test_release_equals_packaging_on_its_fast_path(nums, local, pad):
    from packaging.version import Version

    from cudafix.model import versions

    text = pad + ".".join(nums) + ("+" + local if local else "") + pad
    assert versions._PLAIN.fullmatch(text.strip())  # the fast path is the one taken
    assert versions.release(text) == Version(text).release


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="0123456789.+-_vV!abcrpost \u0663", max_size=14))
def test_release_equals_the_packaging_reading_on_any_text(text):
    """Any text: what packaging reads (the whole, else the leading number, as versions.parse
    does), and where that raises (a non-ASCII digit: a bug of the earlier tree kept as it was), the same."""
    from packaging.version import InvalidVersion, Version

    from cudafix.model import versions

    def packaging_reading(s):
        try:
            return Version(s).release if s else ()
        except InvalidVersion:
            m = versions._LEADING.match(s)
            return Version(m.group(1)).release if m else ()

    def outcome(f, arg):
        try:
            return f(arg)
        except Exception as exc:  # noqa: BLE001 (the same exception on both sides is the check)
            return type(exc)

    assert outcome(versions.release, text) == outcome(packaging_reading, text.strip())
