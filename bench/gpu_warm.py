"""The `cudafix warm` proof on a real GPU (run on the H200 device machine; results in docs/gpu.md).

Builds a torch extension PTX-only (TORCH_CUDA_ARCH_LIST="7.5+PTX", NKERNELS kernels) and the same
extension with native SASS for this GPU, then times the program's FIRST call (import the
extension through torch, launch every kernel once, synchronize) in fresh processes:

  cold        empty JIT cache (CUDA_CACHE_PATH a new directory)
  hit         the same cache again (what a second run of the program sees)
  after-warm  empty cache, then `cudafix warm` (a child: EAGER load + cudaFree(0)), then the program
  native      the SASS build, empty cache (the floor)

Each case runs REPS times with its own fresh cache.  The JIT cache's growth during each program
run is recorded: after a warm, a cache hit adds nothing.  Prints one JSON document.
Usage: python3 bench/gpu_warm.py OUTDIR [NKERNELS] [REPS]
       python3 bench/gpu_warm.py --program EXT CACHE_DIR   (one timed first call; bench/gpu_warm_cli.sh)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))

import extbuild  # noqa: E402

PROGRAM = r"""
import json, sys, time
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
sys.path.insert(0, sys.argv[1])
import %(name)s as ext
x = torch.ones(1 << 16, device="cuda")
torch.cuda.synchronize()
t2 = time.perf_counter()
y = ext.scale(x, -1)
torch.cuda.synchronize()
t3 = time.perf_counter()
y = ext.scale(y, -1)
torch.cuda.synchronize()
t4 = time.perf_counter()
print(json.dumps({"import_torch_s": t1 - t0, "cuda_init_s": t2 - t1, "first_call_s": t3 - t2, "second_call_s": t4 - t3}))
"""


def dir_bytes(p):
    n = 0
    for r, _d, fs in os.walk(p):
        for f in fs:
            n += os.path.getsize(os.path.join(r, f))
    return n


def program(ext_path, cache, extra_env=None):
    name = os.path.basename(ext_path).split(".", 1)[0]
    env = dict(os.environ, CUDA_CACHE_PATH=cache, CUDAFIX_DISABLE="1")
    env.pop("CUDA_MODULE_LOADING", None)
    env.update(extra_env or {})
    before = dir_bytes(cache) if os.path.isdir(cache) else 0
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", PROGRAM % {"name": name}, os.path.dirname(ext_path)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, timeout=600)
    wall = time.perf_counter() - t
    if out.returncode != 0:
        return {"error": out.stderr.decode(errors="replace")[-2000:]}
    r = json.loads(out.stdout.decode().strip().splitlines()[-1])
    r["process_s"] = wall
    r["cache_added"] = (dir_bytes(cache) if os.path.isdir(cache) else 0) - before
    return r


def warm(ext_path, cache):
    """`cudafix warm` for the env that has the extension on its path (the library API: the device's
    python may lack click); returns the plan and the child's measured result."""
    from cudafix import probes
    from cudafix.warm import runtime as w

    env = dict(os.environ, CUDA_CACHE_PATH=cache, PYTHONPATH=os.path.dirname(ext_path) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    sys.path.insert(0, os.path.dirname(ext_path))
    try:
        t = time.perf_counter()
        snap = probes.take_snapshot(env=env, cache_dir=None)
        probe_s = time.perf_counter() - t
    finally:
        sys.path.pop(0)
    targets = w.plan(snap)
    out = {"probe_s": probe_s, "targets": [], "probe_errors": snap.probe_errors,
           "gpus": [(g.name, g.compute_capability) for g in snap.gpus.gpus],
           "ext": [m.__dict__ for m in snap.extensions.modules if ext_path in m.path or os.path.basename(ext_path) in m.path]}
    for tgt in targets:
        res = w.run_child(sys.executable, tgt, snap, env)
        out["targets"].append({"cc": tgt.cc, "ptx_bytes": tgt.ptx_bytes, "estimate_s": tgt.estimate_s(),
                               "modules": [(m.label, m.ptx_bytes, m.warmable, m.why_not) for m in tgt.modules], "result": res})
    return out


def main():
    outdir = sys.argv[1]
    nk = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    reps = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    os.makedirs(outdir, exist_ok=True)
    doc = {"nkernels": nk, "reps": reps, "python": sys.version.split()[0]}
    import torch

    doc["torch"] = torch.__version__
    doc["gpu"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    doc["nvidia_smi"] = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,compute_cap", "--format=csv,noheader"],
                                       stdout=subprocess.PIPE).stdout.decode().strip()
    t = time.perf_counter()
    ptx = extbuild.build_torch_ext("cfx_ptx75", sys.executable, extbuild.gencode_for_arch_list("7.5+PTX"), nkernels=nk)
    doc["build_ptx_s"] = time.perf_counter() - t
    t = time.perf_counter()
    native = extbuild.build_torch_ext("cfx_sm90", sys.executable, extbuild.gencode_for_arch_list("9.0"), nkernels=nk)
    doc["build_native_s"] = time.perf_counter() - t
    doc["ext_sizes"] = {os.path.basename(p): os.path.getsize(p) for p in (ptx, native)}
    for tool, flag in (("cuobjdump", "--list-ptx"), ("cuobjdump", "--list-elf")):
        exe = shutil.which(tool) or "/usr/local/cuda/bin/" + tool
        r = subprocess.run([exe, flag, ptx], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        doc["%s %s" % (tool, flag)] = r.stdout.decode(errors="replace").strip()[-2000:]
    cases = []
    base = tempfile.mkdtemp(prefix="cfxwarm-")
    for rep in range(reps):
        c = os.path.join(base, "cold%d" % rep)
        cases.append(("cold", rep, program(ptx, c)))
        cases.append(("hit", rep, program(ptx, c)))
        c = os.path.join(base, "warm%d" % rep)
        wres = warm(ptx, c)
        cases.append(("warm-child", rep, {"cache_after_warm": dir_bytes(c) if os.path.isdir(c) else 0, "detail": wres}))
        cases.append(("after-warm", rep, program(ptx, c)))
        cases.append(("native", rep, program(native, os.path.join(base, "native%d" % rep))))
    doc["cases"] = [{"case": n, "rep": r, **v} for n, r, v in cases]
    text = json.dumps(doc, indent=1, default=str)
    with open(os.path.join(outdir, "gpu_warm.json"), "w") as fh:
        fh.write(text)
    for n, r, v in cases:
        if n == "warm-child":
            res = [t["result"] for t in v["detail"]["targets"]]
            print("%-11s rep%d  warm child: %s  cache %d B  %s" % (n, r, [(x.get("seconds"), x.get("ok"), x.get("error")) for x in res],
                                                             v["cache_after_warm"], [t["estimate_s"] for t in v["detail"]["targets"]]))
        else:
            print("%-11s rep%d  first call %.3f s  second %.4f s  cache +%s B  process %.2f s  %s" % (
                n, r, v.get("first_call_s", -1), v.get("second_call_s", -1), v.get("cache_added"), v.get("process_s", -1), v.get("error", "")[-300:]))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--program"]:  # one timed first call: --program EXT CACHE_DIR
        print(json.dumps(program(sys.argv[2], sys.argv[3])))
    else:
        main()
