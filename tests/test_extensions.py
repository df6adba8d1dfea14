"""Every CUDA binary in the env (issue 14): the scan, the ext-* rules and `cudafix warm`'s plan,
on REAL modules built here by nvcc (tests/extbuild.py), torchvision 0.29.1's own `_C_stable.so`
from PyPI, and the real torch 2.14.1+cu130 / 2.5.1+cu124 venvs.

Independent truths: NVIDIA's cuobjdump (the copy Triton ships in the torch-cu venv) for device
code, binutils' readelf / nm for DT_NEEDED and dynamic symbols, a real `import` for undefined
symbols, importlib.metadata for ownership.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time

import pytest

from cudafix.model.snapshot import GPU, Snapshot
from cudafix.probes.binfmt import elfsym
from cudafix.probes.pyenv import extensions as pext
from cudafix.probes.pyenv import extowners
from cudafix.warm import runtime as warmrun
from cudafix.warm import plan as warm
from tests import extbuild
from tests.conftest import REPO, VENVS

CI = os.environ.get("CI") == "true"


def _need(ok: bool, what: str) -> None:
    if not ok:
        (pytest.fail if CI else pytest.skip)("prerequisite missing: %s" % what)


def _venv(name: str) -> pathlib.Path:
    py = VENVS / name / "bin" / "python"
    _need(py.exists(), "test venv %s (tests/make_venvs.sh)" % py)
    return py


def _site(name: str) -> pathlib.Path:
    return VENVS / name / "lib" / "python3.11" / "site-packages"


def _cuobjdump() -> str:
    p = _site("torch-cu") / "triton" / "backends" / "nvidia" / "bin" / "cuobjdump"
    _need(p.exists(), "cuobjdump (Triton's copy in the torch-cu venv)")
    return str(p)


def cuobjdump_archs(path: str):
    """(SASS, PTX) sets as NVIDIA's cuobjdump lists them."""
    out = subprocess.run([_cuobjdump(), "--list-elf", "--list-ptx", path], capture_output=True, text=True).stdout
    sass = set(re.findall(r"^ELF file\s+\d+: .*\.(sm_\d+[af]?)\.cubin$", out, re.M))
    ptx = {"compute_" + a[3:] for a in re.findall(r"^PTX file\s+\d+: .*\.(sm_\d+[af]?)\.ptx$", out, re.M)}
    return sass, ptx


def readelf_needed(path: str):
    _need(shutil.which("readelf") is not None, "readelf (binutils)")
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", out)


def _nvcc() -> str:
    n = extbuild.nvcc_path()
    _need(n is not None, "nvcc (/usr/local/cuda-13.0)")
    return n


# -- built modules ---------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def plain_modules():
    """Plain CUDA libraries (no torch) in the combinations issue 14 names."""
    _nvcc()
    return {
        "sm80-shared": extbuild.build_kernels("cfx_sm80", ["-gencode=arch=compute_80,code=sm_80"], cudart="shared"),
        "ptx75-static": extbuild.build_kernels("cfx_ptx75", ["-gencode=arch=compute_75,code=compute_75"], cudart="static"),
        "multi-compressed": extbuild.build_kernels(
            "cfx_multi", ["-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_90,code=[sm_90,compute_90]"],
            cudart="shared", nkernels=40, extra=["-Xfatbin=-compress-all"]),
        "multi-plain": extbuild.build_kernels(
            "cfx_multi", ["-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_90,code=[sm_90,compute_90]"],
            cudart="shared", nkernels=40, extra=["-no-compress"]),
    }


@pytest.fixture(scope="session")
def ext_cu():
    """A torch extension (sm_80 SASS) built against torch 2.14.1+cu130's headers and libraries."""
    _nvcc()
    return extbuild.build_torch_ext("cfx_ext", str(_venv("torch-cu")), ["-gencode=arch=compute_80,code=sm_80"])


@pytest.fixture(scope="session")
def ext_251():
    """The same extension built against torch 2.5.1+cu124."""
    _nvcc()
    return extbuild.build_torch_ext("cfx_ext", str(_venv("torch-251")), ["-gencode=arch=compute_80,code=sm_80"])


@pytest.mark.parametrize("name", ["sm80-shared", "ptx75-static", "multi-compressed", "multi-plain"])
def test_device_code_and_runtime_match_cuobjdump_and_readelf(plain_modules, name):
    path = plain_modules[name]
    facts = pext.examine(path)
    assert facts is not None
    sass, ptx = cuobjdump_archs(path)
    assert sass or ptx
    assert set(facts["sass"]) == sass and set(facts["ptx"]) == ptx
    needed = [n for n in readelf_needed(path) if n.startswith("libcudart.so")]
    if needed:
        assert facts["cudart_linkage"] == "shared" and facts["cudart"] == needed[0].split(".so.")[1].split(".")[0]
    else:
        # the static runtime's version: the toolkit that built it (nvcc --version), not cudafix
        rel = re.search(r"release (\d+)\.(\d+)", subprocess.run([_nvcc(), "--version"], capture_output=True, text=True).stdout)
        assert name.endswith("static") and facts["cudart_linkage"] == "static"
        assert facts["cudart_version"] == int(rel.group(1)) * 1000 + int(rel.group(2)) * 10 and facts["cudart"] == rel.group(1)


def test_compressed_fatbin_really_compressed(plain_modules):
    # Same code, -compress-all vs -compress-none: the compressed fatbin is smaller, and the scan
    # reads both the same (PTX size: the uncompressed text size, from the entry header).
    comp, plain = pext.examine(plain_modules["multi-compressed"]), pext.examine(plain_modules["multi-plain"])
    assert os.path.getsize(plain_modules["multi-compressed"]) < os.path.getsize(plain_modules["multi-plain"])
    assert comp["sass"] == plain["sass"] and comp["ptx"] == plain["ptx"] == ["compute_90"]
    assert comp["ptx_bytes"]["compute_90"] >= plain["ptx_bytes"]["compute_90"] * 0.9


def test_torchvision_c_scanned_for_real():
    py = _venv("torchvision-cu")
    info = pext.probe_extensions([str(_site("torchvision-cu"))], os.environ, torch_dir=str(_site("torch-cu") / "torch"))
    by = {os.path.basename(m.path): m for m in info.modules}
    c = by["_C_stable.so"]
    sass, ptx = cuobjdump_archs(c.path)
    assert set(c.sass) == sass and set(c.ptx) == ptx
    # ownership: importlib.metadata in that venv lists the file under torchvision
    code = "import importlib.metadata as m; d=m.distribution('torchvision'); print(d.version); print(any(str(f).endswith('torchvision/_C_stable.so') for f in d.files))"
    out = subprocess.run([str(py), "-c", code], capture_output=True, text=True, env=dict(os.environ, CUDAFIX_DISABLE="1")).stdout.split()
    assert (c.package, c.package_version) == ("torchvision", out[0]) and out[1] == "True"
    assert c.cudart == "13" and "libcudart.so.13" in readelf_needed(c.path)
    # no missing torch symbol predicted; truth: the loader binds it with RTLD_NOW after `import torch`
    assert c.torch_linked and c.torch_symbols_checked > 0 and c.missing_torch_symbols_count == 0
    real = subprocess.run([str(py), "-c", "import torch, ctypes, os; ctypes.CDLL(%r, mode=os.RTLD_NOW)" % c.path],
                          capture_output=True, text=True, env=dict(os.environ, CUDAFIX_DISABLE="1"), timeout=300)
    assert real.returncode == 0, real.stderr[-500:]


def test_needed_symbols_and_gnu_hash_lookup_agree_with_nm():
    _need(shutil.which("nm") is not None, "nm (binutils)")
    tv = str(_site("torchvision-cu") / "torchvision" / "_C_stable.so")
    ns, why = elfsym.needed_symbols(tv)
    assert ns is not None, why
    und = subprocess.run(["nm", "-D", "--undefined-only", tv], capture_output=True, text=True).stdout
    truth = {l.split()[-1].split("@")[0] for l in und.splitlines() if l.split() and l.split()[0] == "U"}
    assert set(ns.strong) == truth
    for venv in ("torch-cu", "torch-251"):
        lib = _site(venv) / "torch" / "lib"
        tables = [elfsym.SymbolTable(str(p)) for p in sorted(lib.glob("lib*.so"))]
        missing, err = elfsym.missing_from(ns.strong, tables)
        assert err is None
        defined = set()
        for p in lib.glob("lib*.so"):
            out = subprocess.run(["nm", "-D", "--defined-only", str(p)], capture_output=True, text=True).stdout
            defined.update(l.split()[-1].split("@")[0] for l in out.splitlines() if l.strip())
        assert missing == [n for n in ns.strong if n not in defined]
        if venv == "torch-251":  # torchvision 0.29's stable-ABI shim calls are newer than torch 2.5
            assert any(m.startswith("aoti_torch_") for m in missing)


# -- torch extensions across venvs ------------------------------------------------------------------


_XDG = []  # one private cudafix cache dir for this test session (set by the fixture below)


@pytest.fixture(scope="session", autouse=True)
def _private_xdg(tmp_path_factory):
    _XDG.append(str(tmp_path_factory.mktemp("xdg")))


def _status(python: pathlib.Path, ext_dir: str, *args: str) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), ext_dir]), CUDAFIX_DISABLE="1", XDG_CACHE_HOME=_XDG[-1])
    p = subprocess.run([str(python), "-m", "cudafix", "status", "--json", "--assume-gpu", "NVIDIA H200", *args],
                       capture_output=True, text=True, env=env, timeout=300, cwd="/")
    assert p.returncode in (0, 1), p.stderr[-2000:]
    return json.loads(p.stdout)


def _real_import(python: pathlib.Path, ext: str):
    env = dict(os.environ, PYTHONPATH=os.path.dirname(ext), CUDAFIX_DISABLE="1")
    name = os.path.basename(ext).split(".", 1)[0]
    return subprocess.run([str(python), "-c", "import torch, %s" % name], capture_output=True, text=True, env=env, timeout=300)


def _findings(doc: dict, rule: str, subject: str):
    return [f for f in doc["findings"] if f["rule"] == rule and f["subject"] == subject]


@pytest.mark.parametrize("built,run_in", [("cu", "torch-cu"), ("cu", "torch-251"), ("251", "torch-251"), ("251", "torch-cu")])
def test_missing_torch_symbol_predicted_equals_real_import_error(ext_cu, ext_251, built, run_in):
    ext = ext_cu if built == "cu" else ext_251
    py = _venv(run_in)
    doc = _status(py, os.path.dirname(ext))
    name = os.path.basename(ext)
    real = _real_import(py, ext)
    sym = _findings(doc, "ext-torch-symbols", name)
    m = re.search(r"undefined symbol: (\S+)", real.stderr)
    if real.returncode == 0:
        assert not sym, sym
    else:
        assert m, real.stderr[-800:]
        assert len(sym) == 1 and sym[0]["severity"] == "error"
        assert "undefined symbol: %s'" % m.group(1) in sym[0]["message"]
        demangled = subprocess.run(["c++filt", m.group(1)], capture_output=True, text=True).stdout.strip()
        assert demangled in sym[0]["message"]
    # Built against one torch and placed into the other: the import really fails (both ways:
    # 2.5.1 wheels use the pre-C++11 string ABI, 2.14.1 added c10 symbols); at home it imports.
    native = {"cu": "torch-cu", "251": "torch-251"}[built]
    assert (real.returncode == 0) == (run_in == native), real.stderr[-800:]


def test_cuda_major_and_arch_rules_on_h200(ext_cu):
    doc = _status(_venv("torch-251"), os.path.dirname(ext_cu))
    name = os.path.basename(ext_cu)
    major = _findings(doc, "ext-cuda-major", name)
    assert len(major) == 1 and "CUDA 13" in major[0]["message"] and "CUDA 12.4" in major[0]["message"]
    doc = _status(_venv("torch-cu"), os.path.dirname(ext_cu))
    assert not _findings(doc, "ext-cuda-major", name)
    arch = _findings(doc, "ext-arch-unsupported", name)
    assert len(arch) == 1 and arch[0]["severity"] == "error" and "sm_90" in arch[0]["message"]
    assert "TORCH_CUDA_ARCH_LIST=\"9.0\"" in arch[0]["fix"]["summary"]


def test_pip_owned_module_gets_the_rebuild_command():
    from cudafix.model.snapshot import ExtensionModule
    from cudafix.rules.extensions import rebuild

    snap = Snapshot()
    snap.python.executable = "/envs/a b/bin/python"
    m = ExtensionModule(path="/x/site-packages/flash_attn_2_cuda.so", package="flash_attn", package_version="2.8.3",
                        location="site-packages")
    fix = rebuild(snap, m, ["9.0", "8.6", "9.0"])
    assert fix.commands == ("TORCH_CUDA_ARCH_LIST=\"8.6;9.0\" '/envs/a b/bin/python' -m pip install --no-build-isolation "
                            "--force-reinstall --no-deps --no-binary flash_attn flash_attn==2.8.3",)


# -- scan mechanics ---------------------------------------------------------------------------------


def test_cache_hit_skips_examination(plain_modules, tmp_path, monkeypatch):
    d = os.path.dirname(plain_modules["sm80-shared"])
    first = pext.probe_extensions([d], {}, cache_dir=str(tmp_path))
    assert [os.path.basename(m.path) for m in first.modules] == ["libcfx_sm80.so"]

    def boom(path):
        raise AssertionError("examined again: %s" % path)

    monkeypatch.setattr(pext, "examine", boom)
    second = pext.probe_extensions([d], {}, cache_dir=str(tmp_path))
    assert [m.__dict__ for m in second.modules] == [m.__dict__ for m in first.modules]


OLD_PLUS = time.time() - 1800  # a second "old" mtime, for a change made after the first aging


def _aged(*paths, when=None) -> None:
    """mtimes outside the caches' racy window (cachefile.RACY_NS), as an installed env's are; the
    ctime a change gives each path stays, so the stat signature still tells the change."""
    t = when or time.time() - 3600
    for p in paths:
        os.utime(str(p), (t, t))


def _dist(site: pathlib.Path, name: str, version: str, files) -> pathlib.Path:
    """A dist-info as pip writes it (RECORD: path,hash,size); importlib.metadata reads it back."""
    d = site / ("%s-%s.dist-info" % (name, version))
    d.mkdir()
    (d / "METADATA").write_text("Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version))
    (d / "RECORD").write_text("".join("%s,,\n" % f for f in files))
    return d


def _truth_owner(site: pathlib.Path, rel: str):
    """importlib.metadata's answer: the dists under ``site`` whose RECORD lists ``rel``."""
    import importlib.metadata as md

    return sorted((d.metadata["Name"], d.version) for d in md.distributions(path=[str(site)])
                  if any(str(f) == rel for f in (d.files or ())))


def test_owner_is_cached_and_every_change_of_it_seen(plain_modules, tmp_path, monkeypatch):
    """A warm scan reads no RECORD (issue 23: ~180 RECORD reads on the H200 image's env per
    `status`); a reinstall under another version, and a RECORD that stops listing the file, are
    seen.  Truth: importlib.metadata over the same directory."""
    site = tmp_path / "site"
    (site / "myops").mkdir(parents=True)
    shutil.copy(plain_modules["sm80-shared"], str(site / "myops" / "_C.so"))
    for i in range(3):  # other dists read first (sorted by name): a scan without the cache reads them all
        _dist(site, "aaa%d" % i, "1", ["aaa%d/__init__.py" % i])
    d1 = _dist(site, "myops", "1.0", ["myops/_C.so", "myops/__init__.py"])
    _aged(*[p for p in site.rglob("*")], site)
    cache = str(tmp_path / "cache")
    os.makedirs(cache)

    def owner():
        (m,) = pext.probe_extensions([str(site)], {}, cache_dir=cache).modules
        return m.package, m.package_version

    assert owner() == ("myops", "1.0") and _truth_owner(site, "myops/_C.so") == [("myops", "1.0")]
    real = extowners.Owners._read_record
    reads = []
    monkeypatch.setattr(extowners.Owners, "_read_record", staticmethod(lambda p: reads.append(p) or real(p)))
    assert owner() == ("myops", "1.0") and reads == []  # warm: a stat of the RECORD and of the site dir
    # pip install myops==2.0: the old dist-info goes, a new one comes
    shutil.rmtree(str(d1))
    d2 = _dist(site, "myops", "2.0", ["myops/_C.so"])
    _aged(d2, d2 / "RECORD", d2 / "METADATA", site, when=OLD_PLUS)
    assert owner() == ("myops", "2.0") == _truth_owner(site, "myops/_C.so")[0]
    # the same dist's RECORD rewritten without the file (site dir unchanged): no owner
    (d2 / "RECORD").write_text("myops/__init__.py,,\n")
    _aged(d2 / "RECORD", when=OLD_PLUS - 60)
    assert _truth_owner(site, "myops/_C.so") == []
    assert owner() == (None, None)


def test_torch_extension_cache_dir_scanned(plain_modules, tmp_path):
    # torch.utils.cpp_extension._get_build_directory: TORCH_EXTENSIONS_DIR/<name>/<name>.so ...
    ted = tmp_path / "ted" / "myop"
    ted.mkdir(parents=True)
    shutil.copy(plain_modules["ptx75-static"], str(ted / "myop.so"))
    info = pext.probe_extensions([], {"TORCH_EXTENSIONS_DIR": str(tmp_path / "ted")})
    (m,) = info.modules
    assert m.location == "torch extension cache" and m.package == "myop" and m.ptx == ["compute_75"]
    # ... else <XDG_CACHE_HOME>/torch_extensions/py311_cu130/<name>/: only this env's tag counts
    for tag in ("py311_cu130", "py38_cu113"):
        d = tmp_path / "xdg" / "torch_extensions" / tag / ("op_" + tag)
        d.mkdir(parents=True)
        shutil.copy(plain_modules["sm80-shared"], str(d / ("op_%s.so" % tag)))
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    assert pext.extension_tag("3.11.7", "13.0", None) == "py311_cu130"
    info = pext.probe_extensions([], env, tag=pext.extension_tag("3.11.7", "13.0", None))
    assert [m.package for m in info.modules] == ["op_py311_cu130"]
    info = pext.probe_extensions([], env)  # torch unknown: every tag
    assert sorted(m.package for m in info.modules) == ["op_py311_cu130", "op_py38_cu113"]


def test_snapshot_round_trip_and_old_snapshots(plain_modules):
    snap = Snapshot()
    snap.extensions = pext.probe_extensions([os.path.dirname(plain_modules["ptx75-static"])], {})
    back = Snapshot.from_json(snap.to_json())
    assert back.extensions == snap.extensions and back.extensions.scanned
    old = json.loads(snap.to_json())
    del old["extensions"]  # a /1 snapshot written before the extension scan existed
    from cudafix import rules

    runs = rules.run(Snapshot.from_dict(old), rules.select(only=["ext-ptx-jit", "ext-torch-symbols"]))
    assert [r.verdict for r in runs] == ["unknown", "unknown"]


# -- warm -------------------------------------------------------------------------------------------


def _h200_snap(paths):
    snap = Snapshot()
    snap.gpus.gpus = [GPU(index=0, name="NVIDIA H200", compute_capability="9.0", uuid="GPU-x")]
    snap.extensions = pext.probe_extensions(sorted({os.path.dirname(p) for p in paths}), {})
    snap.python.executable = sys.executable
    return snap


def test_warm_plan(plain_modules):
    snap = _h200_snap([plain_modules["ptx75-static"], plain_modules["sm80-shared"], plain_modules["multi-plain"]])
    (t,) = warm.targets(snap)
    by = {os.path.basename(m.path): m for m in t.modules}
    # sm80-only: nothing to JIT (no code at all: ext-arch-unsupported); multi: sm_90 SASS, no JIT.
    assert set(by) == {"libcfx_ptx75.so"}
    m = by["libcfx_ptx75.so"]
    assert m.ptx_bytes and not m.warmable and "statically" in m.why_not
    lines = warm.plan_lines([t], snap, {}, {"CUDA_CACHE_PATH": "/nonexistent"})
    assert "not" in lines[2] and "statically" in lines[2]


def test_warm_child_failure_is_never_recorded_as_warm(ext_cu, tmp_path):
    # This machine has no GPU: the child's cudaFree(0) fails; the result says so.
    snap = Snapshot()
    snap.gpus.gpus = [GPU(index=0, name="NVIDIA H200", compute_capability="9.0")]
    from cudafix.model.snapshot import ExtensionModule

    snap.extensions.scanned = True
    snap.extensions.modules = [ExtensionModule(path=ext_cu, ptx=["compute_75"], ptx_bytes={"compute_75": 1000},
                                               cudart="13", cudart_linkage="shared", torch_linked=True)]
    (t,) = warm.targets(snap)
    env = dict(os.environ, CUDA_CACHE_PATH=str(tmp_path / "cache"), PYTHONPATH=str(REPO))
    res = warmrun.run_child(str(_venv("torch-cu")), t, snap, env, timeout=300)
    assert res["ok"] is False and res["error"]
    assert res["steps"][0]["step"] == "import torch"  # the child loaded torch, then the module
    assert any(s.get("step") == "dlopen" for s in res["steps"])


def test_background_start_once_logged(tmp_path, plain_modules):
    snap = _h200_snap([plain_modules["multi-plain"]])
    assert warmrun.start_background(snap, ["arch-unsupported"], {}, str(tmp_path)) is None  # no JIT finding
    assert warmrun.start_background(snap, ["ext-ptx-jit"], {}, str(tmp_path)) is None  # nothing warmable
    snap.extensions.modules[0].sass = []  # compute_90 PTX only now: needs JIT, warmable (shared runtime)
    env = dict(os.environ, PYTHONPATH=str(REPO), XDG_CACHE_HOME=str(tmp_path / "xdg"))
    log = warmrun.start_background(snap, ["ext-ptx-jit"], env, str(tmp_path))
    assert log == str(tmp_path / warm.LOG_FILE)
    import time

    deadline = time.time() + 120
    while time.time() < deadline and "nothing to warm" not in open(log).read():
        time.sleep(0.5)
    # The detached job probed this (GPU-less) machine itself and found nothing to warm.
    assert "nothing to warm" in open(log).read()


# -- on the recorded fixtures -------------------------------------------------------------------------

SNAPS = REPO / "tests" / "fixtures" / "snapshots"


def test_warm_plan_takes_torch_itself_when_torch_needs_jit():
    # conda torch 1.10 cu113 on an H100: compute_37 PTX only for sm_90 (docs/yolov9.md)
    snap = Snapshot.load(str(SNAPS.parent / "yolov9" / "yolov9-h100-conda-cudahome.json"))
    (t,) = warm.targets(snap)
    assert t.cc == "9.0"
    assert [m.via for m in t.modules] and all(m.via == "import torch" and m.warmable for m in t.modules)
    # the generated fixture carries the generator's PTX-size estimate (stated in its found_via) ...
    assert t.size_known
    # ... without PTX sizes (a transcribed report), no time estimate is claimed
    for a in snap.torch[0].arch:
        a.ptx_bytes, a.largest_ptx_bytes = {}, None
    (t0,) = warm.targets(snap)
    assert not t0.size_known and "no time estimate" in t0.describe()
    assert warm.child_spec(t, snap)["import_torch"] is True
    assert warm.child_spec(t, snap)["cudarts"] == ["libcudart.so.11"]


def test_warm_plan_on_the_recorded_h200_ptx_extension():
    snap = Snapshot.load(str(SNAPS / "h200_ext_ptx_jit.json"))
    (t,) = warm.targets(snap)
    (m,) = t.modules
    assert m.warmable and m.via == "dlopen" and m.ptx_bytes == 1187026 and m.cudart == "libcudart.so.13"
    spec = warm.child_spec(t, snap)
    assert spec == {"import_torch": True, "libs": [m.path], "cudarts": ["libcudart.so.13"]}
    env = warm.child_env(t, {"CUDA_CACHE_PATH": "/c", "CUDA_CACHE_MAXSIZE": "4294967296"})
    assert env["CUDA_MODULE_LOADING"] == "EAGER" and env["CUDA_CACHE_PATH"] == "/c" and env["CUDA_CACHE_MAXSIZE"] == "4294967296"
    assert env["CUDA_VISIBLE_DEVICES"] == snap.gpus.gpus[0].uuid


def test_status_section_compact_and_verbose():
    from cudafix import rules
    from cudafix.render.report import render_status

    snap = Snapshot.load(str(SNAPS / "ext_foreign_torch_h200.json"))
    runs = rules.run(snap)
    compact = render_status(snap, runs).split("Extension modules\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert compact[0].startswith("  unowned: /root/.cache/cudafix-test-ext/")
    assert compact[0].endswith("1 file  SASS sm_80; PTX none  CUDA 13  error (ext-arch-unsupported, ext-cuda-major, ext-torch-symbols)")
    verbose = render_status(snap, runs, verbose=True)
    assert "cfx_ext.cpython-311-x86_64-linux-gnu.so: SASS sm_80; PTX none; CUDA 13; error  torch symbols: 12 checked, 4 missing" in verbose


def test_ptx_jit_fix_offers_warm_only_where_it_can_work(plain_modules):
    from cudafix import rules

    snap = _h200_snap([plain_modules["ptx75-static"]])
    (f,) = [f for f in rules.findings(rules.run(snap, rules.select(only=["ext-ptx-jit"])))]
    assert "cudafix warm" not in f.fix.commands and "linked statically" in f.fix.summary


def test_activation_starts_warm_with_the_environment_the_shell_will_have(monkeypatch):
    # The one call activation makes: the warm job must see the JIT cache size activation sets
    # (arch-ptx-jit raises CUDA_CACHE_MAXSIZE), and nothing starts without a PTX-JIT finding.
    from cudafix.model.findings import Finding
    from cudafix.activation import runtime as activation
    from cudafix.activation.shells import ActivationPlan

    calls = []
    monkeypatch.setattr(warmrun, "start_background", lambda snap, rules_, env, cache_dir, python=None: calls.append((rules_, env)))
    snap = Snapshot()
    plan = ActivationPlan(changes=(("CUDA_CACHE_MAXSIZE", "4294967296"), ("CUDA_HOME", None)))
    env = {"CUDA_HOME": "/x", "HOME": "/h"}
    activation._start_warm(snap, [Finding("cuda-home-mismatch", "error", "m")], plan, env)
    assert calls == []
    activation._start_warm(snap, [Finding("arch-ptx-jit", "warning", "m")], plan, env)
    ((rules_, got),) = calls
    assert rules_ == ["arch-ptx-jit"] and got == {"CUDA_CACHE_MAXSIZE": "4294967296", "HOME": "/h"}


def test_conda_env_lib_and_site_packages_owned_by_conda_records(plain_modules, tmp_path):
    # A conda prefix (synthetic: conda-meta records written here in conda's format) holding one
    # CUDA module in lib/ and one in site-packages without a dist-info RECORD.
    prefix = tmp_path / "env"
    (prefix / "conda-meta").mkdir(parents=True)
    site = prefix / "lib" / "python3.11" / "site-packages" / "myops"
    site.mkdir(parents=True)
    shutil.copy(plain_modules["sm80-shared"], str(prefix / "lib" / "libmyops_cuda.so"))
    shutil.copy(plain_modules["multi-plain"], str(site / "_C.so"))
    shutil.copy(plain_modules["sm80-shared"], str(prefix / "lib" / "libcublasLt.so.12"))  # NVIDIA's: skipped
    rec = {"name": "myops", "version": "1.2", "files": ["lib/libmyops_cuda.so", "lib/python3.11/site-packages/myops/_C.so"]}
    (prefix / "conda-meta" / "myops-1.2-cuda_0.json").write_text(json.dumps(rec))
    info = pext.probe_extensions([str(site.parent)], {}, prefix=str(prefix), conda=True)
    got = sorted((os.path.basename(m.path), m.location, m.package, m.package_version, m.owner_via) for m in info.modules)
    assert got == [("_C.so", "site-packages", "myops", "1.2", "conda-meta/myops-1.2-cuda_0.json"),
                   ("libmyops_cuda.so", "conda lib", "myops", "1.2", "conda-meta/myops-1.2-cuda_0.json")]
    from cudafix.rules.extensions import rebuild

    fix = rebuild(Snapshot(), info.modules[0], ["9.0"])
    assert not fix.commands and "conda package myops" in fix.summary


def test_warm_lock_is_exclusive_across_processes(tmp_path):
    held = warmrun.take_lock(str(tmp_path))
    assert held is not None
    code = "import sys; sys.path.insert(0, %r); from cudafix.warm import runtime as warm; print(warm.take_lock(%r) is None)" % (str(REPO), str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "True", out.stderr
    held.close()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


def test_warm_cli_on_a_machine_without_gpu(tmp_path):
    from tests.conftest import run_dev_cudafix

    if os.path.exists("/proc/driver/nvidia"):
        pytest.skip("a GPU machine: bench/gpu_warm_cli.sh covers `cudafix warm` there (docs/gpu.md)")
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path), CUDAFIX_DISABLE="1")
    for args in (["warm", "--status"], ["warm"]):
        p = run_dev_cudafix(*args, env=env)
        # this dev box has no NVIDIA GPU: nothing needs PTX JIT, nothing is started or recorded
        assert p.returncode == 0 and p.stdout == "nothing to warm: no visible GPU needs PTX JIT for torch or an extension module\n", p.stderr
    assert not list(tmp_path.rglob("warm-state.json"))
