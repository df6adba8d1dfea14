"""The loader simulation and the extension scan read a laid-out WSL tree (tests/wsltree.py), not
this machine's /: every probe takes its root from one place (cudafix.store.paths.probe_root,
docs/wsl.md "One root").

The expected libcuda is what the **real** glibc loader opens inside the tree: a copy of the tree
gets this machine's libc and ld.so and a small C program that dlopen()s each name and prints the
path the loader mapped (dlinfo RTLD_DI_LINKMAP, then realpath), run under chroot(8) with the
scenario's LD_LIBRARY_PATH.  The loader then reads the tree's own /etc/ld.so.cache (written by the
real `ldconfig -r`) and the tree's default directories, exactly as on a WSL machine.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from cudafix import probes
from cudafix.probes.loader.loaderfs import FileSystem
from cudafix.probes.loader.loadersim import LoaderSim
from tests import extbuild, wsltree
from tests.conftest import require
from tests.test_wsl import venv_python

DLOPEN_C = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        void *h = dlopen(argv[i], RTLD_NOW | RTLD_LOCAL);
        struct link_map *m = 0;
        char real[PATH_MAX];
        if (h && dlinfo(h, RTLD_DI_LINKMAP, &m) == 0 && realpath(m->l_name, real))
            printf("%s\t%s\t%s\n", argv[i], m->l_name, real);
        else
            printf("%s\t-\t-\n", argv[i]);
    }
    return 0;
}
"""
NAMES = ("libcuda.so.1", "libcuda.so")


def real_loader(tmp: pathlib.Path, root: pathlib.Path, env: dict, names=NAMES) -> dict:
    """name -> (path as opened, realpath) or None: the real ld.so's answer inside a copy of the tree."""
    cc = shutil.which("cc") or shutil.which("gcc")
    chroot = shutil.which("chroot")
    require(cc and chroot and os.geteuid() == 0, "the real-loader check needs cc, chroot(8) and root")
    copy = tmp / ("chroot-" + root.name)
    shutil.copytree(str(root), str(copy), symlinks=True)
    # this machine's libc in the tree's first default dir (/lib -> usr/lib), ld.so at its PT_INTERP;
    # /etc/ld.so.cache is left as ldconfig wrote it (libc is found in the default dirs, after it)
    multiarch = copy / "usr/lib/x86_64-linux-gnu"
    require(os.path.exists("/lib/x86_64-linux-gnu/libc.so.6") and os.path.exists("/lib64/ld-linux-x86-64.so.2"),
            "an x86_64 Debian-layout glibc on this machine")
    shutil.copyfile(os.path.realpath("/lib/x86_64-linux-gnu/libc.so.6"), str(multiarch / "libc.so.6"))
    (copy / "lib64").mkdir(exist_ok=True)
    shutil.copyfile(os.path.realpath("/lib64/ld-linux-x86-64.so.2"), str(copy / "lib64/ld-linux-x86-64.so.2"))
    (copy / "lib64/ld-linux-x86-64.so.2").chmod(0o755)
    src = tmp / "dlopen.c"
    src.write_text(DLOPEN_C)
    subprocess.run([cc, "-o", str(copy / "dlopen-probe"), str(src)], check=True, timeout=120)
    run_env = {"PATH": "/usr/bin:/bin"}
    if env.get("LD_LIBRARY_PATH"):
        run_env["LD_LIBRARY_PATH"] = env["LD_LIBRARY_PATH"]
    out = {}
    for want in names:  # one process per name: a second dlopen would reuse the first's object
        proc = subprocess.run([chroot, str(copy), "/dlopen-probe", want], env=run_env,
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        name, opened, real = proc.stdout.strip().split("\t")
        assert name == want, proc.stdout
        out[name] = None if opened == "-" else (opened, real)
    return out


def unroot(root: pathlib.Path, path):
    assert path is None or path.startswith(str(root) + "/"), "%s is not inside the tree %s" % (path, root)
    return None if path is None else path[len(str(root)):]


@pytest.mark.parametrize("scenario", wsltree.SCENARIOS)
def test_libcuda_pick_is_the_real_loaders(tmp_path, scenario):
    """The driver probe's libcuda (the loader simulation's dlopen("libcuda.so.1"), under the root)
    and the simulation's dlopen("libcuda.so") are the files the real loader opens in the tree."""
    root, env, _ = wsltree.build(tmp_path, scenario)
    real = real_loader(tmp_path, root, env)
    snap = probes.take_snapshot(env=env, root=str(root), call_driver_api=False, scan_arch=False, scan_extensions=False)
    want = real["libcuda.so.1"]
    assert unroot(root, snap.driver.libcuda_path) == (want[1] if want else None), (snap.driver.found_via, real)
    sim = LoaderSim(env, fs=FileSystem(str(root)))
    for name in NAMES:
        path, _elf, via = sim.find(name, None, sim._want())
        assert unroot(root, path) == (real[name][0] if real[name] else None), (name, via, real)


def test_ldconfig_lists_what_the_simulation_reads(tmp_path):
    """Without LD_LIBRARY_PATH the loader takes ld.so.cache's first libcuda.so.1: the one
    `ldconfig -p -C <tree>/etc/ld.so.cache` lists first (the real tool's reading of the tree's cache)."""
    import re

    for scenario in ("healthy", "linux-driver"):
        root, env, _ = wsltree.build(tmp_path / scenario, scenario)
        listed = subprocess.run(["ldconfig", "-p", "-C", str(root / "etc/ld.so.cache")], capture_output=True,
                                text=True, timeout=60).stdout
        first = re.findall(r"^\s+libcuda\.so\.1 \(libc6,x86-64\) => (\S+)$", listed, re.M)
        fs = FileSystem(str(root))
        cached = fs.read_ld_cache().lookup("libcuda.so.1")
        assert [unroot(root, p) for p in cached] == first, listed
        sim = LoaderSim(env, fs=fs)
        assert unroot(root, sim.find("libcuda.so.1", None, sim._want())[0]) == first[0]


@pytest.mark.parametrize("scenario", ("healthy", "linux-driver", "linux-driver-ldpath", "stub"))
def test_torch_libraries_resolve_inside_the_tree(tmp_path, scenario):
    """torch 2.5.1's libtorch_cuda dlopen()s libcuda.so.1 (loadersim.DLOPEN_EDGES): the libraries
    probe resolves it to the tree's file the real loader takes, with and without the env's
    LD_LIBRARY_PATH (resolved / expected), and every other copy it names is the tree's."""
    root, env, _ = wsltree.build(tmp_path, scenario)
    real = real_loader(tmp_path, root, env, ("libcuda.so.1",))["libcuda.so.1"]
    base = {k: v for k, v in env.items() if k != "LD_LIBRARY_PATH"}
    real_base = real_loader(tmp_path / "base", root, base, ("libcuda.so.1",))["libcuda.so.1"] if base != env else real
    snap = probes.take_snapshot(python=venv_python("torch-251"), env=env, root=str(root), call_driver_api=False,
                                scan_arch=False, scan_extensions=False)
    (r,) = [r for r in snap.libraries.resolutions if r.soname == "libcuda.so.1"]
    assert unroot(root, r.resolved) == real[1], (r, real)
    assert unroot(root, r.expected) == real_base[1], (r, real_base)
    for p in r.others:
        unroot(root, p)
    assert "ld.so.cache" in snap.libraries.found_via and str(root) in snap.libraries.found_via["ld.so.cache"]


@pytest.mark.parametrize("scenario", ("healthy", "linux-driver", "stub"))
def test_extension_scan_reads_the_tree(tmp_path, scenario):
    """A venv laid out inside the tree (its site-packages holds a module with device code) and a
    torch JIT-extension cache under the tree's $HOME: the scan reports both, inside the tree, with
    the device code cuobjdump lists.  $HOME is a path the machine names (read under the root);
    sys.path is the inspected interpreter's own (real paths, here inside the tree)."""
    from tests.test_extensions import _cuobjdump, cuobjdump_archs

    require(extbuild.nvcc_path() is not None, "nvcc (/usr/local/cuda-13.0)")
    _cuobjdump()
    so = extbuild.build_kernels("cfx_sm80", ["-gencode=arch=compute_80,code=sm_80"], cudart="shared")
    root, env, _ = wsltree.build(tmp_path, scenario)
    venv = root / "home/wsl/venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin/python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    in_site = pathlib.Path(site) / "cfxk" / "libcfx_sm80.so"
    in_site.parent.mkdir(parents=True)
    shutil.copyfile(so, str(in_site))
    jit = root / "home/wsl/.cache/torch_extensions/py311_cu124/cfx_jit/cfx_jit.so"
    jit.parent.mkdir(parents=True)
    shutil.copyfile(so, str(jit))
    env = dict(env, HOME="/home/wsl")
    snap = probes.take_snapshot(python=str(py), env=env, root=str(root), call_driver_api=False)
    assert "extensions" not in snap.probe_errors, snap.probe_errors
    by = {m.path: m for m in snap.extensions.modules}
    assert set(by) == {str(in_site), str(jit)}, sorted(by)
    sass, ptx = cuobjdump_archs(str(jit))
    for m in by.values():
        assert (set(m.sass), set(m.ptx)) == (sass, ptx) == ({"sm_80"}, set())
    assert by[str(jit)].location == "torch extension cache"
    assert str(root / "home/wsl/.cache/torch_extensions") in snap.extensions.roots
    assert snap.jit_cache.path == str(root / "home/wsl/.nv/ComputeCache")  # CUDA's default: $HOME/.nv/ComputeCache


def test_machine_paths_and_the_envs_own(tmp_path):
    """What is re-rooted (docs/wsl.md "One root"): a machine path goes under the root; one already
    inside the tree or inside the env's prefix, a relative one, and everything under "/" stay."""
    from cudafix.probes.machine.host import machine_path

    root, env_prefix = str(tmp_path / "root"), str(tmp_path / "venv")
    assert machine_path("/", "/usr/lib/wsl/lib") == "/usr/lib/wsl/lib"
    assert machine_path(root, "/usr/lib/wsl/lib") == root + "/usr/lib/wsl/lib"
    assert machine_path(root, root + "/usr/lib") == root + "/usr/lib"
    assert machine_path(root, env_prefix + "/lib", (env_prefix,)) == env_prefix + "/lib"
    assert machine_path(root, env_prefix + "x/lib", (env_prefix,)) == root + env_prefix + "x/lib"  # a sibling is not inside
    assert machine_path(root, "lib") == "lib"
