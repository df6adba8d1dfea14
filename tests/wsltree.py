"""WSL 2 trees laid out in a temp dir (tests/fixtures/wsl/SOURCES.md names where each file's layout
and content come from), with the real ldconfig building their ld.so.cache.

The libcuda files are small ELF shared objects compiled here with the soname the real ones carry
(libcuda.so.1: microsoft/WSL#11229's objdump -p); their code is synthetic (the Windows driver's
library cannot exist on this machine).
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
from typing import Dict, Tuple

from tests.conftest import require

FIX = pathlib.Path(__file__).parent / "fixtures" / "wsl"
STORE = "usr/lib/wsl/drivers/nv_dispsi.inf_amd64_7cc7738d8e428783"  # NVIDIA/nvidia-container-toolkit#1890
LINUX_DRIVER = "535.104.05"
STUBS = "usr/local/cuda-12.1/targets/x86_64-linux/lib/stubs"
SCENARIOS = ("healthy", "stock", "linux-driver", "linux-driver-ldpath", "stub", "no-dxg", "not-wsl")


def _elf(out: pathlib.Path, soname: str, rc: int, build: pathlib.Path) -> None:
    cc = shutil.which("cc") or shutil.which("gcc")
    require(cc, "no C compiler to build the tree's ELF files")
    src = build / "c.c"
    src.write_text("int cuDriverGetVersion(int *v) { *v = 12060; return %d; }\n" % rc)
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([cc, "-shared", "-fPIC", "-Wl,-soname," + soname, "-o", str(out), str(src)], check=True, timeout=120)


def ldconfig(root: pathlib.Path) -> subprocess.CompletedProcess:
    """The real ldconfig over the tree (chroot: needs root), as `sudo ldconfig` runs after every install."""
    tool = shutil.which("ldconfig") or "/sbin/ldconfig"
    require(os.path.exists(tool) and os.geteuid() == 0, "ldconfig -r needs root and ldconfig")
    return subprocess.run([tool, "-r", str(root)], capture_output=True, text=True, timeout=120)


def build(tmp: pathlib.Path, scenario: str) -> Tuple[pathlib.Path, Dict[str, str], str]:
    """(root, env, ldconfig's stderr) for one scenario."""
    assert scenario in SCENARIOS
    root = tmp / ("root-" + scenario)
    work = tmp / ("build-" + scenario)
    work.mkdir(parents=True)
    for rel in ("etc/ld.so.conf", "etc/ld.so.conf.d/x86_64-linux-gnu.conf", "proc/sys/kernel/osrelease", "proc/version"):
        dst = root / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        src = FIX / rel.replace("/", "__")
        if scenario == "not-wsl" and rel.startswith("proc/"):
            src = FIX / ("native__" + rel.replace("/", "__"))
        shutil.copyfile(src, dst)
    (root / "usr/lib/x86_64-linux-gnu").mkdir(parents=True)
    (root / "lib").symlink_to("usr/lib")  # merged /usr (Ubuntu 22.04)
    env = {"PATH": "/usr/bin:/bin"}
    if scenario != "not-wsl":
        shutil.copyfile(FIX / "etc__ld.so.conf.d__ld.wsl.conf", root / "etc/ld.so.conf.d/ld.wsl.conf")
        lib = root / "usr/lib/wsl/lib"
        _elf(root / STORE / "libcuda.so.1.1", "libcuda.so.1", 0, work)
        lib.mkdir(parents=True)
        shutil.copyfile(root / STORE / "libcuda.so.1.1", lib / "libcuda.so.1.1")
        if scenario == "healthy":  # after microsoft/WSL#5663's fix: the two names are symlinks
            (lib / "libcuda.so.1").symlink_to("libcuda.so.1.1")
            (lib / "libcuda.so").symlink_to("libcuda.so.1")
        else:  # as the Windows driver maps them: three regular files (microsoft/WSL#8587's ls -la)
            shutil.copyfile(lib / "libcuda.so.1.1", lib / "libcuda.so.1")
            shutil.copyfile(lib / "libcuda.so.1.1", lib / "libcuda.so")
        if scenario != "no-dxg":
            (root / "dev").mkdir()
            (root / "dev/dxg").write_bytes(b"")  # a character device on WSL; existence is what is read
    if scenario.startswith("linux-driver"):  # a Linux driver's libcuda installed inside WSL (apt/runfile)
        _elf(root / "usr/lib/x86_64-linux-gnu" / ("libcuda.so." + LINUX_DRIVER), "libcuda.so.1", 0, work)
    if scenario == "linux-driver-ldpath":  # microsoft/WSL#9099: LD_LIBRARY_PATH=...:/usr/lib/x86_64-linux-gnu
        env["LD_LIBRARY_PATH"] = "/usr/lib/x86_64-linux-gnu"
    if scenario == "stub":  # a toolkit's link-time stub on LD_LIBRARY_PATH
        _elf(root / STUBS / "libcuda.so", "libcuda.so.1", 34, work)  # 34: CUDA_ERROR_STUB_LIBRARY
        env["LD_LIBRARY_PATH"] = "/" + STUBS
    if scenario == "healthy":  # NVIDIA's WSL guide: the cuda-toolkit-12-x package of the WSL-Ubuntu repo
        tk = root / "usr/local/cuda-12.4"
        (tk / "bin").mkdir(parents=True)
        shutil.copyfile(FIX / "cuda-12.4__version.json", tk / "version.json")
        shutil.copyfile(FIX / "cuda-12.4__nvcc", tk / "bin/nvcc")
        (tk / "bin/nvcc").chmod(0o755)
        (root / "usr/local/cuda").symlink_to("cuda-12.4")
    (root / "usr/local").mkdir(parents=True, exist_ok=True)
    proc = ldconfig(root)
    assert proc.returncode == 0, proc.stderr
    return root, env, proc.stderr
