"""The loader simulation against the real loader, on real wheels (torch 2.14.1+cu130, torch 2.5.1+cu124)."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess

import pytest

from cudafix.probes.loader import ldcache, libraries
from cudafix.probes.loader import loadersim
from tests import shadowing
from tests.conftest import require, venv_site_packages

MAPS_SCRIPT = r"""
import ctypes, json, sys
for p in sys.argv[2:]:
    ctypes.CDLL(p)
try:
    ctypes.CDLL(sys.argv[1])
    err = None
except OSError as exc:
    err = str(exc)
paths = set()
for line in open('/proc/self/maps'):
    parts = line.split(None, 5)
    if len(parts) == 6 and parts[5].strip().startswith('/'):
        paths.add(parts[5].strip())
print(json.dumps({"error": err, "maps": sorted(paths)}))
"""


def real_loader(python: pathlib.Path, lib: str, env: dict, preload=()) -> dict:
    """What the real glibc loader maps when a child python ctypes-loads ``lib`` (no GPU needed)."""
    out = subprocess.run(
        [str(python), "-c", MAPS_SCRIPT, lib, *preload], env=env, capture_output=True, text=True, timeout=120, check=True
    )
    return json.loads(out.stdout)


def base_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "LD_PRELOAD")}
    return env


@pytest.fixture(scope="module")
def torch_cu_dir(torch_cu_python) -> str:
    return str(venv_site_packages(torch_cu_python) / "torch")


def by_soname(info):
    return {r.soname: r for r in info.resolutions}


def test_clean_env_everything_resolves_inside_the_venv(torch_cu_python, torch_cu_dir):
    site = os.path.realpath(os.path.dirname(torch_cu_dir))
    info = libraries.probe_libraries(torch_cu_dir, base_env(), executable=str(torch_cu_python))
    res = by_soname(info)
    # The CUDA libraries libtorch_cuda.so needs directly, and the second-level ones.
    for soname in ("libcudart.so.13", "libcublas.so.13", "libcublasLt.so.13", "libcudnn.so.9", "libcusparse.so.12",
                   "libnvJitLink.so.13", "libnccl.so.2", "libnvrtc.so.13", "libcudnn_graph.so.9"):
        assert soname in res, soname
    for r in info.resolutions:
        if r.soname in ("libcuda.so.1", "libnvidia-ml.so.1"):
            assert r.resolved is None and r.unknown  # no driver on this machine
            continue
        assert r.resolved and r.resolved.startswith(site + os.sep), (r.soname, r.resolved)
        assert r.resolved == r.expected and r.resolved_version == r.expected_version
    assert res["libnvJitLink.so.13"].resolved_via == "DT_RUNPATH"  # libcusparse's RUNPATH $ORIGIN
    assert res["libnvJitLink.so.13"].requested_by.endswith("libcusparse.so.12")
    assert res["libcublas.so.13"].resolved_via == "DT_RPATH"  # libtorch_cuda's RPATH
    # wheel files carry only the major in their names: versions come from the wheels' RECORDs
    assert res["libnvJitLink.so.13"].resolved_version == "13.5.37"
    assert res["libcublasLt.so.13"].resolved_version == "13.1.1.3"


def test_shadowed_second_level_dependency(torch_cu_python, torch_cu_dir):
    sc = shadowing.torch_cu_nvjitlink_dir()
    env = dict(base_env(), LD_LIBRARY_PATH=sc.ld_library_path)
    res = by_soname(libraries.probe_libraries(torch_cu_dir, env, executable=str(torch_cu_python)))
    jl = res["libnvJitLink.so.13"]
    assert jl.resolved == os.path.realpath(str(sc.shadow_file))
    assert jl.resolved_via == "LD_LIBRARY_PATH"
    assert jl.resolved_version == "13.0.39" and jl.expected_version == "13.5.37"
    assert jl.expected != jl.resolved
    # direct dependencies of libtorch_cuda are protected by its DT_RPATH
    assert res["libcusparse.so.12"].resolved == res["libcusparse.so.12"].expected


@pytest.mark.parametrize("shadow", [False, True])
def test_simulation_equals_real_loader_torch_cu(torch_cu_python, torch_cu_dir, shadow):
    env = base_env()
    if shadow:
        env["LD_LIBRARY_PATH"] = shadowing.torch_cu_nvjitlink_dir().ld_library_path
    root = os.path.join(torch_cu_dir, "lib", "libtorch_cuda.so")
    real = real_loader(torch_cu_python, root, env)
    assert real["error"] is None
    maps = set(real["maps"])
    info = libraries.probe_libraries(torch_cu_dir, env, executable=str(torch_cu_python))
    needed = [r for r in info.resolutions if r.how == "needed"]
    assert len(needed) >= 12
    for r in needed:
        assert r.resolved in maps, (r.soname, r.resolved)
    # and nothing CUDA is mapped that the simulation did not predict
    predicted = {r.resolved for r in needed}
    real_cuda = {p for p in maps if loadersim.is_cuda_soname(os.path.basename(p))}
    assert real_cuda <= predicted, real_cuda - predicted


@pytest.fixture(scope="module")
def f1():
    return shadowing.torch_251_nvjitlink_scenario()


def test_f1_is_a_real_import_failure(f1):
    env = dict(base_env(), LD_LIBRARY_PATH=f1.ld_library_path)
    out = subprocess.run([str(f1.python), "-c", "import torch"], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode != 0
    assert f1.expected_error in out.stderr
    ok = subprocess.run([str(f1.python), "-c", "import torch"], env=base_env(), capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr[-2000:]


def test_f1_simulation_predicts_the_failure_and_the_preload_fix(f1):
    torch_dir = str(venv_site_packages(f1.python) / "torch")
    env = dict(base_env(), LD_LIBRARY_PATH=f1.ld_library_path)
    info = libraries.probe_libraries(torch_dir, env, executable=str(f1.python))
    jl = by_soname(info)["libnvJitLink.so.12"]
    assert jl.resolved == os.path.realpath(str(f1.shadow_file)) and jl.resolved_via == "LD_LIBRARY_PATH"
    assert jl.resolved_version == "12.3.101" and jl.expected_version == "12.4.127"
    assert jl.requested_by.endswith("libcusparse.so.12")
    # the real loader agrees: loading libtorch_cuda.so fails on the same symbol
    root = os.path.join(torch_dir, "lib", "libtorch_cuda.so")
    real = real_loader(f1.python, root, env)
    assert real["error"] and "__nvJitLinkComplete_12_4" in real["error"]
    # preloading torch's own copy by absolute path (the startup hook's fix) wins over LD_LIBRARY_PATH
    fixed = by_soname(libraries.probe_libraries(torch_dir, env, executable=str(f1.python), preloaded=[jl.expected]))
    assert fixed["libnvJitLink.so.12"].resolved == jl.expected
    real = real_loader(f1.python, root, env, preload=[jl.expected])
    assert real["error"] is None and jl.expected in real["maps"]
    assert os.path.realpath(str(f1.shadow_file)) not in real["maps"]


def test_cpu_build_has_nothing_cuda(torch_cpu_python):
    torch_dir = str(venv_site_packages(torch_cpu_python) / "torch")
    info = libraries.probe_libraries(torch_dir, base_env(), executable=str(torch_cpu_python))
    assert info.resolutions == [] and "resolutions" not in info.unknown


def test_no_torch_dir_is_unknown(tmp_path):
    info = libraries.probe_libraries(str(tmp_path), base_env())
    assert info.resolutions == [] and "no libtorch_cuda.so" in info.unknown["resolutions"]


def test_dlopen_edges_are_in_the_real_binaries(torch_cu_dir):
    """Every dlopen name we model appears as a string in the real caller (for the versioned
    cuDNN names: the unversioned stem, which cuDNN completes with its major)."""
    res = {r.soname: r for r in libraries.probe_libraries(torch_cu_dir, base_env()).resolutions}
    checked = 0
    for prefix, names in loadersim.DLOPEN_EDGES:
        caller = next((r.resolved for s, r in res.items() if s.startswith(prefix) and r.resolved), None)
        if caller is None and prefix == "libtorch_cuda.so":
            caller = os.path.join(torch_cu_dir, "lib", "libtorch_cuda.so")
        if caller is None:
            continue
        with open(caller, "rb") as fh:
            data = fh.read()
        for n in names:
            stem = n.split(".so")[0] + ".so"
            assert stem.encode() in data, (caller, n)
            checked += 1
    assert checked >= 10


def test_ld_cache_matches_ldconfig():
    cache = ldcache.read_ld_cache()
    assert cache.unknown is None
    ldconfig = shutil.which("ldconfig") or "/sbin/ldconfig"
    out = subprocess.run([ldconfig, "-p"], capture_output=True, text=True, timeout=30).stdout.splitlines()
    ref = []
    for line in out:
        if "=>" in line:
            name = line.split()[0]
            ref.append((name, line.rsplit("=> ", 1)[1].strip()))
    assert len(ref) > 10
    assert sorted(ref) == sorted((e.name, e.path) for e in cache.entries)


def test_ld_cache_bad_input(tmp_path):
    assert ldcache.read_ld_cache(str(tmp_path / "absent")).unknown
    assert ldcache.read_ld_cache(str(tmp_path)).unknown  # a directory
    real = pathlib.Path("/etc/ld.so.cache").read_bytes()
    for cut in (10, 30, 60, len(real) // 2):
        p = tmp_path / ("cut%d" % cut)
        p.write_bytes(real[:cut])
        c = ldcache.read_ld_cache(str(p))
        assert c.unknown and not c.entries, cut
    junk = tmp_path / "junk"
    junk.write_bytes(b"\0" * 100)
    assert "unknown cache format" in ldcache.read_ld_cache(str(junk)).unknown


def test_locate_libcuda_absent_here_and_found_on_ld_library_path(tmp_path, torch_cu_dir):
    path, via, why = libraries.locate_libcuda(base_env())
    require(not os.path.exists("/proc/driver/nvidia/version"), "needs a machine without an NVIDIA driver")
    assert path is None and why and "libcuda.so.1" in why
    # a libcuda.so.1 (a real ELF shared object) in a compat dir on LD_LIBRARY_PATH is what libcudart gets
    compat = tmp_path / "cuda" / "compat"
    compat.mkdir(parents=True)
    target = compat / "libcuda.so.580.95.05"
    shutil.copy(os.path.join(torch_cu_dir, "lib", "libc10.so"), str(target))
    os.symlink(target.name, str(compat / "libcuda.so.1"))
    env = dict(base_env(), LD_LIBRARY_PATH="/nonexistent:" + str(compat))
    path, via, why = libraries.locate_libcuda(env)
    assert path == str(target) and via == "LD_LIBRARY_PATH" and why is None
    assert libraries.find_compat_libcuda(env) == [str(target)]
    assert libraries.find_compat_libcuda(base_env()) == []


def test_wrong_class_is_skipped_like_the_loader(tmp_path):
    """glibc skips a same-named file of another ELF class and keeps searching."""
    gcc = shutil.which("gcc")
    ld = shutil.which("ld")
    require(gcc and ld, "needs gcc and ld (binutils)")
    src = tmp_path / "f.c"
    src.write_text("int f(void){return 1;}\n")
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    obj32 = tmp_path / "f32.o"
    cc = subprocess.run([gcc, "-m32", "-c", "-fPIC", "-o", str(obj32), str(src)], capture_output=True, text=True)
    require(cc.returncode == 0, "gcc cannot build 32-bit objects here: %s" % cc.stderr.strip()[-300:])
    subprocess.run([ld, "-m", "elf_i386", "-shared", "-soname", "libcufft.so.12", "-o", str(a / "libcufft.so.12"), str(obj32)], check=True)
    subprocess.run([gcc, "-shared", "-fPIC", "-Wl,-soname,libcufft.so.12", "-o", str(b / "libcufft.so.12"), str(src)], check=True)
    sim = loadersim.LoaderSim({"LD_LIBRARY_PATH": "%s:%s" % (a, b)})
    path, _elf, via = sim.find("libcufft.so.12", None, sim._want())
    assert path == str(b / "libcufft.so.12") and via == "LD_LIBRARY_PATH"


def test_hostile_env_values_never_raise(torch_cu_dir):
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=40, deadline=None)
    @given(st.text(min_size=0, max_size=300))
    def check(value):
        env = dict(base_env(), LD_LIBRARY_PATH=value)
        info = libraries.probe_libraries(torch_cu_dir, env)
        assert "resolutions" not in info.unknown, info.unknown
        assert libraries.locate_libcuda(env)[0] is None or os.path.isabs(libraries.locate_libcuda(env)[0])
        libraries.find_compat_libcuda(env)

    check()
    huge = ":".join("/nonexistent/%d" % i for i in range(20000))
    info = libraries.probe_libraries(torch_cu_dir, dict(base_env(), LD_LIBRARY_PATH=huge))
    assert by_soname(info)["libcublas.so.13"].resolved  # RPATH still wins; the walk stays bounded
    jl = by_soname(info)["libnvJitLink.so.13"]
    assert jl.resolved is None and "undecided, search stopped after" in jl.unknown


def test_no_torch_at_all():
    info = libraries.probe_libraries(None, base_env())
    assert info.resolutions == [] and "no torch" in info.unknown["resolutions"]


IMPORT_MAPS = r"""
import json, sys
import torch
maps = sorted({l.split(None, 5)[5].strip() for l in open('/proc/self/maps') if len(l.split(None, 5)) == 6})
print(json.dumps({"sys_path": sys.path, "maps": [p for p in maps if p.startswith('/')]}))
"""


def _real_import(python: pathlib.Path, env: dict) -> dict:
    out = subprocess.run([str(python), "-c", IMPORT_MAPS], env=env, capture_output=True, text=True, timeout=300, cwd="/")
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.splitlines()[-1])


def test_torch_214_loads_its_own_nvjitlink_first_so_the_shadow_never_wins(torch_cu_python, torch_cu_dir):
    """torch 2.14.1's __init__ preloads its whole table by path after libtorch_global_deps.so
    (issue 36, Low): an older libnvJitLink.so.13 on LD_LIBRARY_PATH is never the one mapped --
    the real `import torch` is the truth -- so lib-shadowed has nothing to say about it."""
    from cudafix.model.findings import OK
    from cudafix.probes import take_snapshot
    from cudafix.rules import libs as rlibs

    sc = shadowing.torch_cu_nvjitlink_dir()
    env = dict(base_env(), LD_LIBRARY_PATH=sc.ld_library_path, CUDAFIX_DISABLE="1")
    real = _real_import(torch_cu_python, env)
    jl_mapped = [p for p in real["maps"] if os.path.basename(p).startswith("libnvJitLink.so")]
    assert jl_mapped and os.path.realpath(str(sc.shadow_file)) not in jl_mapped, jl_mapped
    sys_path = [p for p in real["sys_path"] if p]
    info = libraries.probe_libraries(torch_cu_dir, env, executable=str(torch_cu_python), sys_path=sys_path)
    jl = by_soname(info)["libnvJitLink.so.13"]
    assert jl.resolved in jl_mapped and jl.resolved == jl.expected, (jl.resolved, jl_mapped)
    # the whole probe as `status` runs it, then the rule
    snap = take_snapshot(str(torch_cu_python), env, use_nvml=False, call_driver_api=False, scan_arch=False)
    assert snap.libraries.resolutions and "torch's own loads" in snap.libraries.found_via
    shadowed = [o for o in rlibs.check_lib_shadowed(snap) if o.verdict != OK]
    assert not shadowed, [o.message for o in shadowed]


def test_torch_251_has_no_such_preload_and_stays_shadowed(torch_cu_python):
    """torch 2.5.1 preloads nothing after a successful load: the shadow wins there, with
    sys.path or without it (the real import fails: test_f1_is_a_real_import_failure)."""
    sc = shadowing.torch_251_nvjitlink_scenario()
    site = venv_site_packages(sc.python)
    env = dict(base_env(), LD_LIBRARY_PATH=sc.ld_library_path)
    info = libraries.probe_libraries(str(site / "torch"), env, executable=str(sc.python), sys_path=[str(site)])
    jl = by_soname(info)["libnvJitLink.so.12"]
    assert jl.resolved == os.path.realpath(str(sc.shadow_file)) and jl.resolved != jl.expected
