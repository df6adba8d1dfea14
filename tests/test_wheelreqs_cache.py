"""torch's wheel requirements (cudafix/probes/pyenv/wheelreqs.py) are parsed once per torch and kept by
the stat of the METADATA files they come from: the same entries from the cache, parsed again when
a METADATA file changes (the real torch 2.14.1 + cuda-toolkit dist-info of the torch-cu venv,
copied)."""

from __future__ import annotations

import os
import shutil

from cudafix.probes.pyenv import wheelreqs
from tests.conftest import venv_site_packages


def _site(torch_cu_python, tmp_path):
    real = venv_site_packages(torch_cu_python)
    site = tmp_path / "site"
    site.mkdir()
    for d in os.listdir(str(real)):
        if d.endswith(".dist-info") and (d.startswith("torch-") or d.startswith("cuda_toolkit-")):
            shutil.copytree(str(real / d), str(site / d))
    os.symlink(str(real / "torch"), str(site / "torch"))
    return site


def test_parsed_once_then_from_the_cache_until_metadata_changes(torch_cu_python, tmp_path, monkeypatch):
    site = _site(torch_cu_python, tmp_path)
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    first = wheelreqs.Requirements(str(site / "torch"), [str(site)], "3.11.7", str(cache))
    assert any(e[0].startswith("nvidia-") for e in first.entries), first.entries
    parsed = []
    real_parse = wheelreqs.Requirements._parse
    monkeypatch.setattr(wheelreqs.Requirements, "_parse", lambda self, *a: (parsed.append(a), real_parse(self, *a)))
    again = wheelreqs.Requirements(str(site / "torch"), [str(site)], "3.11.7", str(cache))
    assert again.entries == first.entries and parsed == []
    (meta,) = [site / d / "METADATA" for d in os.listdir(str(site)) if d.startswith("torch-")]
    meta.write_text(meta.read_text() + "\n")
    wheelreqs.Requirements(str(site / "torch"), [str(site)], "3.11.7", str(cache))
    assert len(parsed) == 1
    # another Python is another key
    wheelreqs.Requirements(str(site / "torch"), [str(site)], "3.8.18", str(cache))
    assert len(parsed) == 2
