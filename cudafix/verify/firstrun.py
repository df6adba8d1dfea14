"""`cudafix verify --first-run`: run the built-in detector's first run in fresh processes, attribute it.

The runs (each a fresh interpreter of the env, cudafix/verify/firstrun_child.py), per repeat:

  cold           an empty JIT cache (CUDA_CACHE_PATH a new temp dir)
  warm           the same cache again: the reference run
  benchmark      torch.backends.cudnn.benchmark = True, on the cache of cold/warm (the tuning's kernels new)
  benchmark-warm the same again: the tuning's kernels are in the JIT cache now (tuning alone)
  loading        CUDA_MODULE_LOADING flipped (EAGER when the env is lazy, LAZY when it is EAGER)
  compile-fresh  torch.compile, an empty TORCHINDUCTOR_CACHE_DIR / TRITON_CACHE_DIR
  compile-kept   torch.compile, the same inductor cache again
  modules-cold   only when the env has extension modules that need PTX JIT on this GPU
  modules-warm   (from the snapshot, as `cudafix status` reports them): loaded eagerly, cold / warm cache

cudafix's own process never imports torch.  The user's JIT and inductor caches are not touched:
every cache a run uses is a temp dir, removed afterwards.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from cudafix.store import runner, trustload
from cudafix.store.fsutil import scratch_dirs
from cudafix.store.safefs import env_owners
from cudafix.verify import attribution

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "firstrun_child.py")
# status findings that name a first-run cost the env has before anything runs
ENV_FINDINGS = ("arch-ptx-jit", "ext-ptx-jit", "jit-cache-too-small", "jit-cache-unwritable", "jit-cache-disabled",
                "module-loading-eager")


class FirstRunError(RuntimeError):
    """The check could not run (one line for the user)."""


def jit_modules(snap: Any) -> List[str]:
    """Paths of the env's extension modules that run only through PTX JIT on a visible GPU and can be
    loaded by the child (shared CUDA runtime, no missing torch symbols)."""
    from cudafix.knowledge import arch as karch
    from cudafix.knowledge import gpus as kgpus

    out: List[str] = []
    ccs = [g.compute_capability or kgpus.compute_capability(g.name) for g in snap.visible_gpus()]
    for m in snap.extensions.modules:
        if m.cudart_linkage != "shared" or m.missing_torch_symbols_count:
            continue
        if any(cc and karch.fit(m.sass, m.ptx, cc).kind == "ptx" for cc in ccs) and m.path not in out:
            out.append(m.path)
    return out


def status_context(python: str) -> Tuple[List[Dict[str, Any]], List[str]]:
    """(the status findings that name a first-run cost, the extension modules needing JIT)."""
    try:
        from cudafix import rules
        from cudafix.probes import take_snapshot

        snap = take_snapshot(python=None if python == sys.executable else python)
        found = [f.to_dict() for f in rules.findings(rules.run(snap)) if f.rule in ENV_FINDINGS]
        return found, jit_modules(snap)
    except Exception as exc:  # context for the report, not a precondition
        return [{"rule": "cudafix", "severity": "info", "message": "snapshot failed: %s" % exc}], []


def plan_runs(repeat: int, with_compile: bool, modules: Sequence[str]) -> List[Tuple[str, int]]:
    names = ["cold", "warm", "benchmark", "benchmark-warm", "loading"]
    if with_compile:
        names += ["compile-fresh", "compile-kept"]
    if modules:
        names += ["modules-cold", "modules-warm"]
    return [(n, rep) for rep in range(repeat) for n in names]


def _child_env(base: Dict[str, str], name: str, dirs: Dict[str, str], env_loading: str) -> Dict[str, str]:
    env = dict(base)
    env["CUDA_CACHE_PATH"] = dirs["modjit" if name.startswith("modules") else "jit"]
    env["TORCHINDUCTOR_CACHE_DIR"] = dirs["inductor"]
    env["TRITON_CACHE_DIR"] = os.path.join(dirs["inductor"], "triton")
    env["PYTHONUNBUFFERED"] = "1"
    if name == "loading":
        env["CUDA_MODULE_LOADING"] = "LAZY" if env_loading.upper() == "EAGER" else "EAGER"
    if name.startswith("modules"):
        env["CUDA_MODULE_LOADING"] = "EAGER"
    return env


def load_specs(modules: Sequence[str], owners: Sequence[int]) -> Tuple[List[Dict[str, Any]], List[Dict[str, str]]]:
    """(what the child loads, what it must not): each module through the trusted loader
    (store/trustload.py) as warm checks it -- a module another user owns or can write never runs
    its constructors here, and the child loads the file checked or nothing (issue 36, H2)."""
    specs: List[Dict[str, Any]] = []
    refused: List[Dict[str, str]] = []
    for m in modules:
        spec, why = trustload.spec_of(m, tuple(owners), sticky_ok=True)
        if spec is None:
            refused.append({"path": m, "why": "not loaded: %s (a module another user owns or can write never is)" % why})
        else:
            specs.append(spec)
    return specs, refused


def _child_args(name: str, batch: int, imgsz: int, half: bool, iters: int, modules: Sequence[str], device: str,
                owners: Sequence[int] = ()) -> List[str]:
    args = ["--batch", str(batch), "--imgsz", str(imgsz), "--iters", str(iters), "--device", device]
    if half:
        args.append("--half")
    if name.startswith("benchmark"):
        args.append("--benchmark")
    if name.startswith("compile"):
        args.append("--compile")
    if name.startswith("modules"):
        args.append("--load-only")
        # checked again before every run (files change): the child gets the checked file only
        for spec in load_specs(modules, owners)[0]:
            args += ["--load", json.dumps(spec, sort_keys=True)]
    return args


def run_child(python: str, args: Sequence[str], env: Dict[str, str], timeout: float) -> Dict[str, Any]:
    # the trusted runner: -I, cwd /, stdin closed, its own process group, bounded output
    try:
        proc = runner.run(runner.python_argv(python, CHILD, *args), timeout, env=env,
                          owners=env_owners(os.path.dirname(os.path.dirname(python))))
    except OSError as exc:
        raise FirstRunError("cannot run %s: %s" % (python, exc)) from None
    if proc.timed_out:
        raise FirstRunError("a first-run child did not finish within %ds" % timeout)
    lines = [ln for ln in proc.text().splitlines() if ln.startswith("{")]
    if not lines:
        tail = (proc.text("stderr").strip().splitlines() or ["no output"])[-1]
        raise FirstRunError("the first-run child failed (exit %d): %s" % (proc.returncode, tail))
    try:
        return json.loads(lines[-1])
    except ValueError:
        raise FirstRunError("the first-run child printed unreadable output") from None


def first_run(python: Optional[str] = None, batch: int = 8, imgsz: int = 640, half: bool = False, repeat: int = 1,
              with_compile: bool = True, iters: int = 10, timeout: float = 600.0, device: str = "cuda",
              progress: Callable[[str], None] = lambda s: None) -> Dict[str, Any]:
    """Run the variants and return the report dict (schema cudafix.verify.first-run/1)."""
    python = python or sys.executable
    findings, modules = status_context(python)
    base_env = dict(os.environ)
    env_loading = base_env.get("CUDA_MODULE_LOADING", "")
    report: Dict[str, Any] = {"schema": "cudafix.verify.first-run/1", "mode": "model",
                              "config": {"batch": batch, "imgsz": imgsz, "half": half, "repeat": repeat,
                                         "iters": iters, "compile": with_compile, "device": device,
                                         "env_module_loading": env_loading or None},
                              "findings": findings, "modules": modules}
    tmp = tempfile.mkdtemp(prefix="cudafix-firstrun-")
    try:
        return _run_all(python, batch, imgsz, half, repeat, with_compile, iters, timeout, device, progress,
                        report, modules, base_env, env_loading, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _run_all(python: str, batch: int, imgsz: int, half: bool, repeat: int, with_compile: bool, iters: int,
             timeout: float, device: str, progress: Callable[[str], None], report: Dict[str, Any], modules: List[str],
             base_env: Dict[str, str], env_loading: str, tmp: str) -> Dict[str, Any]:
    # even the probe's one kernel runs on a temp JIT cache: the user's cache is never written
    probe = run_child(python, ["--load-only", "--device", device],
                      dict(base_env, PYTHONUNBUFFERED="1", CUDA_CACHE_PATH=os.path.join(tmp, "probe")), timeout)
    if probe.get("torch_import_error") or "torch" not in probe:
        report.update(verdict="no torch", exit_code=4, reasons=["import torch failed: %s" % probe.get(
            "torch_import_error", probe.get("child_error", "torch is not installed in this env"))])
        return report
    if not probe.get("cuda_available") and device == "cuda":
        report.update(verdict="CPU fallback", exit_code=3, torch=probe.get("torch"), reasons=[
            "torch %s cannot use a GPU here (%s): no first-run cost could be measured on a GPU"
            % (probe.get("torch"), "a CPU-only build" if not probe.get("torch_cuda") else "torch.cuda.is_available() is False")])
        return report
    owners = env_owners(str(probe.get("prefix") or os.path.dirname(os.path.dirname(python))))
    specs, refused = load_specs(modules, owners)
    if refused:
        report["skipped_modules"] = refused
        modules = [s["path"] for s in specs]
    plan = plan_runs(repeat, with_compile, modules)
    progress("cudafix verify --first-run: %d runs of the built-in detector, each a fresh process" % len(plan))
    variants: Dict[str, List[Dict[str, Any]]] = {}
    for i, (name, rep) in enumerate(plan):
        dirs = {"jit": os.path.join(tmp, "jit%d" % rep), "modjit": os.path.join(tmp, "modjit%d" % rep),
                "inductor": os.path.join(tmp, "inductor%d" % rep)}
        scratch_dirs(tmp, [os.path.basename(d) for d in dirs.values()])
        progress("  [%d/%d] %s" % (i + 1, len(plan), name))
        out = run_child(python, _child_args(name, batch, imgsz, half, iters, modules, device, owners),
                        _child_env(base_env, name, dirs, env_loading), timeout)
        if out.get("child_error") or out.get("run_error"):
            raise FirstRunError("the %s run failed: %s" % (name, out.get("child_error") or out.get("run_error")))
        variants.setdefault(name, []).append(out)
    att = attribution.attribute(variants, env_loading, [os.path.basename(m) for m in modules])
    report.update(att)
    report.update(exit_code=attribution.EXIT_CODES[att["verdict"]], torch=probe.get("torch"),
                  gpu=variants["warm"][0].get("device"), runs=variants)
    return report


def render_text(report: Dict[str, Any]) -> str:
    if "causes" not in report:
        return "\n".join(["cudafix verify --first-run: %s" % report["verdict"]] + ["  - %s" % r for r in report.get("reasons", [])])
    out = attribution.render(report)
    if report.get("gpu"):
        out.insert(1, "torch %s on %s" % (report.get("torch"), report["gpu"]))
    for f in report.get("findings", []):
        out.append("status: [%s] %s" % (f.get("rule"), f.get("message")))
    return "\n".join(out)
