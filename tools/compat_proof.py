"""Prove the compatibility model's PTX and runtime answers on a real driver (issue 34).

Two steps, on two machines:

    python -m tools.compat_proof build DIR     # here: NVIDIA's nvcc wheels of several CUDA 13.x
                                               # releases build one small module each, PTX-only
                                               # (compute_90) and SASS (sm_90), static runtime
    python -m tools.compat_proof run DIR OUT   # on the GPU machine: for each module, what cudafix
                                               # reads (the fatbin's PTX ISA, the static runtime's
                                               # version), what cuobjdump says (`.version` of the
                                               # PTX), what the model predicts for this driver, and
                                               # what really happens: the module launches its
                                               # kernel in a child process (cudaGetErrorString)

`run` writes OUT/compat-proof.json; docs/compat.md's H200 column is that file.  The independent
truths: nvcc's own PTX text (`nvcc -ptx`, its `.version` line) and cuobjdump for the ISA, the
runtime's own cudaRuntimeGetVersion for its version (tests/test_cudart_static.py), and the launch
itself for the verdict.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile

# nvcc, its front end (crt), cicc (nvvm) and the runtime's headers and static library: one
# release each, all four published as wheels of the same version.
RELEASES = ("13.0.88", "13.1.80", "13.2.86", "13.4.92", "13.5.37")
WHEELS = ("nvidia-cuda-nvcc", "nvidia-nvvm", "nvidia-cuda-crt", "nvidia-cuda-runtime")

SOURCE = r"""
#include <cuda_runtime.h>
__global__ void add(float *x, float v) { x[threadIdx.x] += v; }
extern "C" int cfx_launch(void) {
  float *d = 0;
  cudaError_t e = cudaMalloc(&d, 256 * sizeof(float));
  if (e) return (int)e;
  add<<<1, 256>>>(d, 1.0f);
  e = cudaGetLastError();
  if (!e) e = cudaDeviceSynchronize();
  cudaFree(d);
  return (int)e;
}
extern "C" const char *cfx_error(int e) { return cudaGetErrorString((cudaError_t)e); }
extern "C" int cfx_runtime(void) { int v = -1; cudaRuntimeGetVersion(&v); return v; }
"""

TARGETS = {"ptx90": "arch=compute_90,code=compute_90", "sass90": "arch=compute_90,code=sm_90",
           "sass80": "arch=compute_80,code=sm_80"}  # no code an sm_90 GPU runs: "no kernel image"


def _toolkit(release: str, cache: str) -> str:
    """NVIDIA's wheels of ``release`` unpacked into one toolkit directory (nvidia/cu13)."""
    top = os.path.join(cache, "tk-" + release)
    nvcc = os.path.join(top, "nvidia", "cu13", "bin", "nvcc")
    if os.path.exists(nvcc):
        return os.path.dirname(os.path.dirname(nvcc))
    wheels = os.path.join(cache, "wheels")
    os.makedirs(wheels, exist_ok=True)
    specs = ["%s==%s" % (w, release) for w in WHEELS]
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", wheels] + specs, check=True)
    for w in WHEELS:
        name = w.replace("-", "_") + "-" + release
        (found,) = [f for f in os.listdir(wheels) if f.startswith(name + "-") and f.endswith(".whl")]
        with zipfile.ZipFile(os.path.join(wheels, found)) as z:
            z.extractall(top)
    root = os.path.dirname(os.path.dirname(nvcc))
    for d in ("bin", os.path.join("nvvm", "bin")):
        for f in os.listdir(os.path.join(root, d)):
            p = os.path.join(root, d, f)
            if os.path.isfile(p):
                os.chmod(p, 0o755)
    return root


def build(out: str, cache: str) -> None:
    os.makedirs(out, exist_ok=True)
    src = os.path.join(out, "kmod.cu")
    with open(src, "w") as fh:
        fh.write(SOURCE)
    manifest = []
    for rel in RELEASES:
        root = _toolkit(rel, cache)
        # 13.0's nvcc.profile looks under targets/x86_64-linux/; the wheels lay out include/ and lib/
        nvcc = [os.path.join(root, "bin", "nvcc"), "-I" + os.path.join(root, "include"), "-L" + os.path.join(root, "lib")]
        ptx = subprocess.run(nvcc + ["-ptx", "-arch=compute_90", src, "-o", "-"], capture_output=True, text=True, check=True).stdout
        m = re.search(r"^\s*\.version\s+(\d+\.\d+)", ptx, re.M)
        for kind, gencode in TARGETS.items():
            name = "cfx_%s_%s.so" % (rel.replace(".", "_"), kind)
            subprocess.run(nvcc + ["-shared", "-Xcompiler", "-fPIC", "-gencode", gencode, src, "-o", os.path.join(out, name)], check=True)
            manifest.append({"module": name, "nvcc": rel, "kind": kind, "nvcc_ptx_version": m.group(1) if m else None})
    with open(os.path.join(out, "manifest.json"), "w") as fh:
        json.dump(manifest, fh, indent=1)
    print("built %d modules in %s" % (len(manifest), out))


CHILD = "import ctypes, sys; L = ctypes.CDLL(sys.argv[1]); L.cfx_error.restype = ctypes.c_char_p; " \
        "r = L.cfx_runtime(); e = L.cfx_launch(); print(r, e, L.cfx_error(e).decode())"


def run(src: str, out: str) -> int:
    src = os.path.abspath(src)
    from cudafix.knowledge import compat
    from cudafix.probes.binfmt.cudart_static import static_cudart_version
    from cudafix.probes.binfmt.fatbin import scan_fatbin_uncached
    from cudafix.probes.machine import driver as pdriver
    from cudafix.store.paths import probe_root  # noqa: F401  (the probes read the real root here)

    info = pdriver.probe_driver()
    drv = compat.Driver(info.cuda_version, info.kernel_version)
    rows = []
    agree = 0
    with open(os.path.join(src, "manifest.json")) as fh:
        manifest = json.load(fh)
    for item in manifest:
        path = os.path.join(src, item["module"])
        cov = scan_fatbin_uncached(path)
        rt, _how = static_cudart_version(path)
        try:
            dump = subprocess.run(["cuobjdump", "--dump-ptx", path], capture_output=True, text=True).stdout
        except OSError as exc:  # no cuobjdump on this machine: say so in the row
            dump = "cuobjdump: %s" % exc
        versions = sorted(set(re.findall(r"^\s*\.version\s+(\d+\.\d+)", dump, re.M)))
        runtime = compat.runtime(drv, rt)
        code = compat.device_code(drv, "9.0", cov.sass, cov.ptx, cov.ptx_isa)
        predicted = compat.FAILS if (runtime.fails or code.fails) else (compat.RUNS if runtime.runs and code.runs else compat.UNKNOWN)
        p = subprocess.run([sys.executable, "-c", CHILD, path], capture_output=True, text=True, timeout=120, cwd="/")
        parts = p.stdout.strip().split(" ", 2)
        observed = {"exit": p.returncode, "stderr": p.stderr[-400:]}
        if len(parts) == 3:
            observed.update(runtime_version=int(parts[0]), error_code=int(parts[1]), error=parts[2])
        real = (compat.RUNS if observed.get("error_code") == 0 else compat.FAILS) if "error_code" in observed else None
        ok = real == predicted and (real == compat.RUNS or (code.error or runtime.error) == observed.get("error"))
        agree += bool(ok)
        rows.append(dict(item, cudafix_sass=cov.sass, cudafix_ptx=cov.ptx, cudafix_ptx_isa=cov.ptx_isa, cudafix_static_runtime=rt,
                         cuobjdump_ptx_versions=versions, model_runtime=compat.summary(runtime), model_code=compat.summary(code),
                         predicted=predicted, predicted_error=code.error or runtime.error, observed=observed, agrees=ok))
        print("%-26s ISA cudafix %-6s cuobjdump %-6s runtime %s | predicted %-7s %s | observed %s" % (
            item["module"], ",".join(cov.ptx_isa.values()) or "-", ",".join(versions) or "-", rt, predicted,
            (code.error or runtime.error or "")[:40], observed.get("error", observed["stderr"][-160:])))
    doc = {"driver": {"kernel": info.kernel_version, "cuda": info.cuda_version}, "modules": rows, "agree": agree, "total": len(rows)}
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "compat-proof.json"), "w") as fh:
        json.dump(doc, fh, indent=1)
    print("model agrees with the driver on %d of %d modules" % (agree, len(rows)))
    return 0 if agree == len(rows) else 1


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) >= 2 and argv[0] == "build":
        build(argv[1], os.environ.get("CUDAFIX_WHEEL_CACHE", os.path.expanduser("~/.cache/cudafix-nvcc-wheels")))
        return 0
    if len(argv) == 3 and argv[0] == "run":
        return run(argv[1], argv[2])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
