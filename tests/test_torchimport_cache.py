"""The `import torch` simulation's whole answer is kept by what it read (cudafix/probes/loader/torchload.py
over loaderfs.cached_run): a warm `status` re-stats those files instead of binding the symbols
again.  Judged on a real install (a view of the torch-cu venv: torch 2.14.1+cu130 and its CUDA 13
wheels, tests/broken_installs.py): a hit equals a fresh run and runs no simulation; after a wheel
is removed the cached answer is NOT reused, and the new answer matches the real `import torch` of
that env; a wheel put back gives the healthy answer again."""

from __future__ import annotations

import dataclasses
import os
import pathlib
import shutil

import pytest

from cudafix.probes.loader import torchload
from cudafix.store import cachefile
from tests import broken_installs as bi
from tests.test_broken_installs import _need, _paths


@pytest.fixture()
def view(tmp_path):
    py = bi.make_view(_need("torch-cu"), bi.views_root(tmp_path) / ("cache-view-%d" % os.getpid()))
    yield py
    shutil.rmtree(str(py.parent.parent), ignore_errors=True)


def _probe(py, cache_dir, helper=False):
    sys_path, site, pyver = _paths(py)
    return torchload.probe_torch_import(os.path.join(site, "torch"), sys_path, {}, pyver, executable=str(py),
                                        cache_dir=cache_dir, helper=helper)


def test_hit_equals_a_fresh_run_and_a_removed_wheel_is_seen(view, tmp_path, monkeypatch):
    monkeypatch.setattr(cachefile, "RACY_NS", 0)  # the view was made moments ago
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    fresh = _probe(view, None)
    assert fresh.error is None and not [b for b in fresh.breaks if b.kind != "unpinned"], fresh
    first = _probe(view, str(cache))
    assert dataclasses.asdict(first) == dataclasses.asdict(fresh)
    assert (cache / torchload.RESULT_CACHE).exists()

    ran = []
    real = torchload._probe
    monkeypatch.setattr(torchload, "_probe", lambda *a, **k: (ran.append(1), real(*a, **k))[1])
    hit = _probe(view, str(cache))
    assert ran == [] and dataclasses.asdict(hit) == dataclasses.asdict(fresh)

    # `pip uninstall nvidia-nvjitlink` in that env: its dist-info and its library go
    site = pathlib.Path(_paths(view)[1])
    (info,) = [d for d in site.iterdir() if d.name.startswith("nvidia_nvjitlink-")]
    libs = [p for p in (site / "nvidia").rglob("libnvJitLink.so*")]
    assert libs
    saved = [(p, p.read_bytes()) for p in libs]
    shutil.rmtree(str(info))
    for p in libs:
        p.unlink()
    _rc, real_error = bi.real_import(view)
    broken = _probe(view, str(cache))
    assert ran == [1], "the cached answer was reused after a wheel was removed"
    assert real_error and broken.error == real_error, (broken.error, real_error)
    assert any(b.wheel == "nvidia-nvjitlink" or "nvjitlink" in b.requirement for b in broken.breaks), broken.breaks
    assert dataclasses.asdict(broken) == dataclasses.asdict(_probe(view, None))

    for p, data in saved:  # the library back (not the dist-info): the import works again
        p.write_bytes(data)
    again = _probe(view, str(cache))
    assert again.error is None and bi.real_import(view) == (0, "")
    assert dataclasses.asdict(again) == dataclasses.asdict(_probe(view, None))


# Runs in a fresh process (a test worker runs threads, where cudafix forks no helper): the
# simulation of one view twice, its requirements read here and then by a helper.
HELPER = r"""
import dataclasses, json, os, sys
from cudafix.probes.loader import torchload
from cudafix.probes.pyenv import wheelreqs
from cudafix.store import cachefile
cachefile.RACY_NS = 0  # the view was made moments ago
torch_dir, sys_path, pyver, exe, root = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
here = []
real_init = wheelreqs.Requirements.__init__
def init(self, *a, **k):
    here.append(os.getpid())
    real_init(self, *a, **k)
wheelreqs.Requirements.__init__ = init
answers, stored = [], []
for helper in (False, True):
    cache = os.path.join(root, "cache-%s" % helper)
    os.mkdir(cache, 0o700)
    answers.append(dataclasses.asdict(torchload.probe_torch_import(torch_dir, sys_path, {}, pyver, executable=exe,
                                                                   cache_dir=cache, helper=helper)))
    (ent,) = cachefile.load(cache, torchload.RESULT_CACHE, torchload._cache_version()).values()
    stored.append(sorted(p for p, _sig in ent["deps"]))
print(json.dumps({"here": len(here), "answers": answers, "stored": stored}))
"""


def test_requirements_read_by_a_helper_are_the_serial_answer(view, tmp_path):
    """A cold run may read torch's requirements in a helper process (wheelreqs.ahead): the same
    answer as reading them here, on a broken install whose finding comes from them, and the same
    files recorded, so that its stored answer goes stale exactly when the serial one does."""
    import json
    import subprocess
    import sys

    sys_path, site, pyver = _paths(view)
    (info,) = [d for d in pathlib.Path(site).iterdir() if d.name.startswith("nvidia_nvjitlink-")]
    shutil.rmtree(str(info))
    for p in (pathlib.Path(site) / "nvidia").rglob("libnvJitLink.so*"):
        p.unlink()
    p = subprocess.run([sys.executable, "-c", HELPER, os.path.join(site, "torch"), json.dumps(sys_path), pyver, str(view),
                        str(tmp_path)], capture_output=True, text=True, timeout=300, cwd="/",
                       env=dict(os.environ, PYTHONPATH=str(pathlib.Path(__file__).resolve().parent.parent)))
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    assert got["here"] == 1, "the helper run read the requirements in this process"
    assert got["answers"][0] == got["answers"][1]
    assert any("nvjitlink" in b["wheel"] for b in got["answers"][1]["breaks"]), got["answers"][1]["breaks"]
    assert got["stored"][0] == got["stored"][1] and any(x.endswith("/METADATA") for x in got["stored"][1])


def test_a_malformed_entry_is_computed_again(tmp_path):
    py = _need("torch-cu") / "bin" / "python"  # the real venv, only read
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    good = _probe(py, str(cache))
    entries = cachefile.load(str(cache), torchload.RESULT_CACHE, torchload._cache_version())
    assert len(entries) == 1
    for ent in entries.values():
        ent["result"]["breaks"] = [{"kind": 7}]
    cachefile.store(str(cache), torchload.RESULT_CACHE, torchload._cache_version(), entries)
    assert dataclasses.asdict(_probe(py, str(cache))) == dataclasses.asdict(good)


def _nm_cuda_imports(path: str, torch_own: bool):
    """The strong undefined symbols binutils lists (nm -D --with-symbol-versions) whose version is
    needed from a CUDA library (readelf -V's .gnu.version_r: File / Name), and (torch's own
    libraries) the unversioned ones with a CUDA API prefix."""
    import re
    import subprocess

    from cudafix.probes.loader.loadersim import is_cuda_soname

    ver = subprocess.run(["readelf", "-V", "-W", path], stdout=subprocess.PIPE, check=True).stdout.decode()
    cuda_versions, current = set(), None
    for line in ver[ver.find(".gnu.version_r"):].splitlines():
        m = re.search(r"File: (\S+)", line)
        if m:
            current = m.group(1)
        m = re.search(r"Name: (\S+)", line)
        if m and current and is_cuda_soname(current):
            cuda_versions.add(m.group(1))
    api = re.compile(r"^(nccl|cublas|cudnn|cusparse|cufft|curand|cusolver|nvrtc|_?_?nvJitLink|cupti|cuFile|nvshmem)")
    out = set()
    for line in subprocess.run(["nm", "-D", "--with-symbol-versions", path], stdout=subprocess.PIPE,
                               check=True).stdout.decode().splitlines():
        parts = line.split()
        if len(parts) != 2 or parts[0] != "U":
            continue
        name, _, v = parts[1].partition("@")
        if v and v in cuda_versions:
            out.add((name, v))
        elif not v and torch_own and api.match(name):
            out.add((name, ""))
    return out


def test_the_filtered_symbol_read_equals_binutils():
    from cudafix.probes.binfmt import elfsym
    from cudafix.probes.loader.loadersim import is_cuda_soname

    site = bi.site_of(_need("torch-cu"))
    libs = sorted((site / "torch" / "lib").glob("libtorch_cuda*.so")) + sorted((site / "nvidia").rglob("libcusparse.so*"))
    assert len(libs) >= 2, libs
    for lib in libs:
        own = bool(torchload.TORCH_OWN.match(lib.name))
        got, why = elfsym.imports(str(lib), files=is_cuda_soname, unversioned=torchload.TORCH_CUDA_API_B if own else None)
        assert got is not None, why
        mine = {(n, v or "") for n, weak, v, _f in got if not weak}
        assert mine == _nm_cuda_imports(str(lib), own) and mine, lib
