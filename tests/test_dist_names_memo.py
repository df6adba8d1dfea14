"""The metadata-directory listing of sys.path entries is kept per process by the directory's stat
(cudafix/probes/pyenv/packages.py ``_dist_names``: one `status` lists sys.path four times): what it
returns is what a fresh listing (os.listdir, the truth) gives after every change to the
directory, a directory changed too recently is not kept, an unchanged old one is."""

from __future__ import annotations

import os

from cudafix.probes.pyenv import packages

PAST = 1_600_000_000


def _truth(d):
    return sorted(n for n in os.listdir(d) if n.endswith((".dist-info", ".egg-info")))


def test_listing_follows_every_change(tmp_path):
    d = tmp_path / "site"
    d.mkdir()
    for n in ("torch-2.14.1.dist-info", "numpy-2.0.0.dist-info", "six.py", "old-1.0-py3.8.egg-info"):
        (d / n).mkdir() if not n.endswith(".py") else (d / n).write_text("")
    os.utime(str(d), (PAST, PAST))
    assert packages._dist_names(str(d)) == _truth(str(d))
    assert str(d) in packages._NAMES_MEMO  # old and unchanged: kept
    assert packages._dist_names(str(d)) == _truth(str(d))
    (d / "torchvision-0.29.1.dist-info").mkdir()  # the directory's mtime moves to now
    assert packages._dist_names(str(d)) == _truth(str(d))
    os.rmdir(str(d / "numpy-2.0.0.dist-info"))
    os.utime(str(d), (PAST + 5, PAST + 5))
    assert packages._dist_names(str(d)) == _truth(str(d))
    assert [x.name for x in packages.iter_dist_dirs([str(d)])] == ["old", "torch", "torchvision"]


def test_a_fresh_directory_is_not_kept(tmp_path):
    d = tmp_path / "fresh"
    d.mkdir()
    (d / "a-1.dist-info").mkdir()
    assert packages._dist_names(str(d)) == ["a-1.dist-info"]
    assert str(d) not in packages._NAMES_MEMO
    assert packages._dist_names(str(tmp_path / "missing")) is None
