"""Broken torch installs (issue 34, item 4), each built for real from the test venvs
(tests/broken_installs.py: views of torch-cu's torch 2.14.1+cu130 and torch-251's 2.5.1+cu124 with
a chosen subset of their nvidia-* wheels, or an older / other-major wheel in place of one), and each
judged against the REAL `import torch` of that env: cudafix's predicted error must be the text
torch raises, the finding must name the wheel, and the plan's step must install it.  The other
releases (1.13.1, 2.0.1, 2.4.1, 2.9.1) were measured the same way and recorded:
tests/fixtures/installs/broken_installs_recorded.json, docs/broken-installs.md."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

from cudafix.model.install import MISSING, OTHER_MAJOR, TOO_OLD, UNPINNED
from cudafix.model.snapshot import PythonDist, Snapshot, TorchBuild
from cudafix.probes.loader.torchload import probe_torch_import
from cudafix.probes.loader.torchpreload import read_preloader
from cudafix.rules import install
from tests import broken_installs as bi
from tests import shadowing

HERE = pathlib.Path(__file__).resolve().parent


def _need(venv: str) -> pathlib.Path:
    p = bi.VENVS / venv
    if not (p / "bin" / "python").exists():
        pytest.fail("%s missing: run tests/make_venvs.sh" % p)
    return p


@pytest.fixture(scope="module")
def views(tmp_path_factory):
    return bi.views_root(tmp_path_factory.mktemp("views"))


def _paths(py: pathlib.Path):
    out = subprocess.run([str(py), "-c", "import sys,json,sysconfig;print(json.dumps([sys.path, "
                          "sysconfig.get_paths()['purelib'], '%d.%d.%d' % sys.version_info[:3]]))"],
                         stdout=subprocess.PIPE, check=True, timeout=120, cwd="/")
    return json.loads(out.stdout)


def judge(views, name, venv, drop=(), replace=()):
    """(real last traceback line, the probe's answer, its snapshot) for one view."""
    py = bi.make_view(_need(venv), views / name, drop, replace)
    _rc, real = bi.real_import(py)
    sys_path, site, pyver = _paths(py)
    ti = probe_torch_import(os.path.join(site, "torch"), sys_path, {}, pyver, executable=str(py))
    version = os.path.basename(next(pathlib.Path(site).glob("torch-*.dist-info")).name)[len("torch-"):-len(".dist-info")]
    m = re.search(r"^cuda\s*(?::[^=]*)?=\s*['\"]([0-9.]+)['\"]", (pathlib.Path(site) / "torch" / "version.py").read_text(), re.M)
    snap = Snapshot(torch=[TorchBuild(dist=PythonDist(name="torch", version=version), version=version, cuda=m.group(1) if m else None,
                                      package_dir=os.path.join(site, "torch"))], torch_import=ti)
    snap.python.executable = str(py)
    return real, ti, snap


def errors(snap):
    return [o for o in install.check_torch_install(snap) if o.verdict == "problem"]


def test_torch_214_without_any_nvidia_wheel(views):
    """The issue's "torch 2.14.1 with no nvidia wheel at all is healthy": it does not import."""
    real, ti, snap = judge(views, "cu-none", "torch-cu", drop=["*"])
    assert real.startswith("ImportError: libcudnn.so.9: cannot open shared object file")
    assert ti.error == real
    assert ti.preloader == "list"
    first = ti.breaks[0]
    assert (first.kind, first.wheel, first.requirement) == (MISSING, "nvidia-cudnn-cu13", "nvidia-cudnn-cu13==9.24.0.43")
    wheels = {b.wheel: b for b in ti.breaks}
    # the CUDA 13 wheels come through torch's cuda-toolkit[...] extras: pinned by cuda-toolkit's METADATA
    assert wheels["nvidia-cusparse"].requirement == "nvidia-cusparse==12.6.3.3.*"
    assert wheels["nvidia-cusparse"].required_by == "cuda-toolkit 13.0.3.0 [cusparse]"
    errs = errors(snap)
    loaded = {b.wheel for b in ti.breaks if b.soname}  # the wheels whose libraries `import torch` loads
    assert errs and {o.subject for o in errs if o.severity == "error"} == loaded
    # required, absent, but not loaded at import (here libcudart.so.13 comes from /usr/local/cuda-13.0
    # through ld.so.cache): a warning, and still in the one pip command
    assert all(o.severity == "warning" for o in errs if o.subject not in loaded)
    assert "nvidia-cudnn-cu13 is not installed" in errs[0].message and real in errs[0].message
    cmd = errs[0].fix.commands[0]
    assert cmd.startswith("pip install --only-binary=:all: ") and "nvidia-cudnn-cu13==9.24.0.43" in cmd
    assert "'nvidia-cusparse==12.6.3.3.*'" in cmd


def test_torch_251_without_any_nvidia_wheel(views):
    real, ti, snap = judge(views, "251-none", "torch-251", drop=["*"])
    assert real.startswith("ValueError: libcublas.so.*[0-9] not found in the system path [")
    assert ti.error == real
    assert {b.wheel for b in ti.breaks} >= {"nvidia-cublas-cu12", "nvidia-cudnn-cu12", "nvidia-cuda-runtime-cu12"}
    assert all(b.kind == MISSING for b in ti.breaks)


def test_torch_251_one_wheel_missing(views):
    real, ti, _snap = judge(views, "251-cudnn", "torch-251", drop=["nvidia-cudnn-cu12"])
    assert real == "ImportError: libcudnn.so.9: cannot open shared object file: No such file or directory"
    assert ti.error == real
    assert [(b.kind, b.wheel, b.requirement) for b in ti.breaks] == [(MISSING, "nvidia-cudnn-cu12", "nvidia-cudnn-cu12==9.1.0.70")]


def test_torch_251_nvjitlink_too_old(views):
    real, ti, snap = judge(views, "251-oldjit", "torch-251",
                           replace=[("nvidia-nvjitlink-cu12",) + shadowing.F1_SHADOW_WHEEL])
    assert real.endswith("nvidia/cusparse/lib/libcusparse.so.12: undefined symbol: __nvJitLinkComplete_12_4, version libnvJitLink.so.12")
    assert ti.error == real
    b = ti.breaks[0]
    assert (b.kind, b.wheel, b.installed, b.symbol, b.symbol_version) == (
        TOO_OLD, "nvidia-nvjitlink-cu12", "nvidia-nvjitlink-cu12 12.3.101", "__nvJitLinkComplete_12_4", "libnvJitLink.so.12")
    # the pin spelled out: pip replaces 12.3.101 (measured: tools/broken_installs_pip.py)
    assert errors(snap)[0].fix.commands == ("pip install --only-binary=:all: nvidia-nvjitlink-cu12==12.4.127",)


def test_torch_251_nccl_too_old(views):
    real, ti, _snap = judge(views, "251-oldnccl", "torch-251", replace=[("nvidia-nccl-cu12", "nvidia-nccl-cu12", "2.18.1")])
    assert real.endswith("torch/lib/libtorch_cuda.so: undefined symbol: ncclCommRegister")
    assert ti.error == real
    b = ti.breaks[0]
    assert (b.kind, b.wheel, b.requirement, b.installed, b.symbol) == (
        TOO_OLD, "nvidia-nccl-cu12", "nvidia-nccl-cu12==2.21.5", "nvidia-nccl-cu12 2.18.1", "ncclCommRegister")


def test_torch_251_runtime_of_another_major(views):
    """torch-201's nvidia-cuda-runtime-cu11 in place of the cu12 one: torch's preloader loads the
    cu11 runtime, then libtorch_global_deps still finds no libcudart.so.12."""
    s201 = str(bi.site_of(_need("torch-201")))
    real, ti, _snap = judge(views, "251-cu11rt", "torch-251",
                            replace=[("nvidia-cuda-runtime-cu12", s201, "nvidia_cuda_runtime_cu11-11.7.99.dist-info")])
    assert real == "OSError: libcudart.so.12: cannot open shared object file: No such file or directory"
    assert ti.error == real
    b = ti.breaks[0]
    assert (b.kind, b.wheel, b.installed) == (OTHER_MAJOR, "nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime-cu11 11.7.99")


def test_torch_214_nccl_of_another_major(views):
    real, ti, _snap = judge(views, "cu-nccl12", "torch-cu", replace=[("nvidia-nccl-cu13", "nvidia-nccl-cu12", "2.18.1")])
    assert "torch/lib/libtorch_cuda.so: undefined symbol: nccl" in real
    assert ti.error == real
    assert (ti.breaks[0].kind, ti.breaks[0].wheel, ti.breaks[0].requirement) == (OTHER_MAJOR, "nvidia-nccl-cu13", "nvidia-nccl-cu13==2.30.7")


def test_older_wheel_that_still_imports_is_a_warning(views):
    real, ti, snap = judge(views, "cu-oldjit", "torch-cu", replace=[("nvidia-nvjitlink",) + shadowing.CU_SHADOW_WHEEL])
    assert real == "" and ti.error is None
    assert [(b.kind, b.wheel, b.requirement) for b in ti.breaks] == [(UNPINNED, "nvidia-nvjitlink", "nvidia-nvjitlink<14,>=13.0.88")]
    assert not errors(snap)
    warn = [o for o in install.check_torch_wheel_pins(snap) if o.verdict == "problem"]
    assert len(warn) == 1 and warn[0].severity == "warning"


@pytest.mark.parametrize("venv", ["torch-cu", "torch-251"])
def test_complete_installs_have_none(views, venv):
    real, ti, snap = judge(views, venv + "-full", venv)
    assert real == "" and ti.error is None and ti.breaks == []
    assert [o.verdict for o in install.check_torch_install(snap)] == ["ok"]


def test_torch_201_runtime_wheel_only(views):
    """torch-201 (torch 2.0.1 with only nvidia-cuda-runtime-cu11): torch 2.0.1's preloader."""
    real, ti, _snap = judge(views, "201-rt", "torch-201")
    assert real.startswith("ValueError: libcublas.so.*[0-9] not found in the system path")
    assert ti.error == real
    assert "nvidia-cublas-cu11" in {b.wheel for b in ti.breaks}


def test_plan_installs_the_pins(views):
    """The one planner turns the finding's command into a step run by the env's own interpreter."""
    from cudafix.plans.planner import INSTALL, make_plan
    from cudafix import rules

    _real, _ti, snap = judge(views, "251-oldjit-plan", "torch-251",
                             replace=[("nvidia-nvjitlink-cu12",) + shadowing.F1_SHADOW_WHEEL])
    runs = rules.run(snap, tuple(r for r in rules.REGISTRY if r.id in ("torch-install-broken", "torch-wheel-unpinned")))
    plan = make_plan(snap, runs)
    steps = [s for s in plan.steps if s.kind == INSTALL]
    assert [s.argv for s in steps] == [(snap.python.executable, "-m", "pip", "install", "--only-binary=:all:",
                                       "nvidia-nvjitlink-cu12==12.4.127")]
    assert ("torch-install-broken", "nvidia-nvjitlink-cu12", 1) in plan.answers


RECORDED = HERE / "fixtures" / "installs" / "broken_installs_recorded.json"


def test_the_preloader_generations_read_from_torch_itself():
    """Each torch's own torch/__init__.py says how it preloads (the venvs' real files)."""
    for venv, style, first, wide in (("torch-cu", "list", ("cublas", "libcublasLt.so.*[0-9]", True), True),
                                     ("torch-251", "list", ("cublas", "libcublas.so.*[0-9]", True), False),
                                     ("torch-201", "list", ("cublas", "libcublas.so.*[0-9]", True), False)):
        text = (bi.site_of(_need(venv)) / "torch" / "__init__.py").read_text()
        pre = read_preloader(text)
        assert (pre.style, pre.on_error[0], pre.wide_search) == (style, first, wide), venv
    assert read_preloader((bi.site_of(_need("torch-cu")) / "torch" / "__init__.py").read_text()).on_success
    assert not read_preloader((bi.site_of(_need("torch-251")) / "torch" / "__init__.py").read_text()).on_success


def test_recorded_releases_fixture_is_recorded():
    data = json.loads(RECORDED.read_text())
    assert data["_fixture"]["kind"] == "recorded" and data["provenance"].startswith("recorded")
    assert {c["torch"] for c in data["cases"]} >= {"1.13.1", "2.0.1", "2.4.1", "2.5.1", "2.9.1", "2.14.1"}
    for c in data["cases"]:
        assert c["predicted"] == c["real"], c["case"]


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))


def test_torch_201_complete_has_none(views):
    """torch 2.0.1 with every wheel it pins (tests/make_venvs.sh's torch-201-full): imports, no finding."""
    real, ti, snap = judge(views, "201-full", "torch-201-full")
    assert real == "" and ti.error is None and ti.breaks == []
    assert [o.verdict for o in install.check_torch_install(snap)] == ["ok"]


@pytest.mark.parametrize("venv", ["torch-201-full", "torch-201"])
def test_torch_201_nvfuser_is_not_an_extension_to_rebuild(venv):
    """torch 2.0.1's own nvfuser/_C imports 241 torch symbols that torch/lib/libnvfuser_codegen.so
    (its first DT_NEEDED) defines: the real `import nvfuser._C` works after `import torch` in the
    complete install, so ext-torch-symbols must not blame it (nor print a --no-binary torch build)."""
    from cudafix.model.snapshot import ExtensionInfo  # noqa: F401
    from cudafix.probes.pyenv import extensions as pext
    from cudafix.rules.extensions import check_ext_torch_symbols

    site = bi.site_of(_need(venv))
    if venv == "torch-201-full":
        out = subprocess.run([str(bi.VENVS / venv / "bin" / "python"), "-c", "import torch, nvfuser._C"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300, cwd="/")
        assert out.returncode == 0, out.stderr[-2000:]
    info = pext.probe_extensions([str(site)], {}, torch_dir=str(site / "torch"))
    mods = [m for m in info.modules if "/nvfuser/_C" in m.path]
    assert mods and mods[0].package == "torch"
    assert mods[0].torch_symbols_checked > 200 and mods[0].missing_torch_symbols_count == 0
    snap = Snapshot(extensions=info, torch=[TorchBuild(dist=PythonDist(name="torch", version="2.0.1"), version="2.0.1+cu117",
                                                       package_dir=str(site / "torch"))])
    assert not [o for o in check_ext_torch_symbols(snap) if o.verdict == "problem"]
