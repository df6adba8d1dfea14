"""`cudafix verify --first-run -- CMD ARGS...`: attribute the user's own program's first run.

The program is never edited: the whole command runs several times under environment changes
alone, and the differences of its wall time are the causes.  Per repeat:

  cold           empty JIT cache (CUDA_CACHE_PATH) and empty inductor/Triton caches: a first run
  jit-warm       the same JIT cache again, inductor caches empty        cold - jit-warm = PTX JIT
  inductor-kept  the same JIT cache and the same inductor caches         jit-warm - kept = compile
  <flip>         one per costly switch set in the env, flipped to its default (kept caches):
                 CUDA_MODULE_LOADING=EAGER -> LAZY, CUDA_LAUNCH_BLOCKING=1 -> unset,
                 TORCHINDUCTOR_FORCE_DISABLE_CACHES=1 -> unset          kept - flip = that switch

The number of runs is printed before the first one starts; the first run that exits non-zero
stops the check (exit 2: cudafix could not complete it).  All caches are temp dirs, removed after.
"""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from cudafix.store import runner
from cudafix.store.fsutil import scratch_dirs
from cudafix.verify import attribution

# env var -> (the costly value, the flipped value (None: unset), the cause's name, its fix)
SWITCHES: Dict[str, Tuple[str, Optional[str], str, str]] = {
    "CUDA_MODULE_LOADING": ("EAGER", "LAZY", "CUDA_MODULE_LOADING=EAGER", attribution.FIX_LAZY),
    "CUDA_LAUNCH_BLOCKING": ("1", None, "CUDA_LAUNCH_BLOCKING=1 (every launch waits for the GPU)",
                             "`unset CUDA_LAUNCH_BLOCKING` (a debugging setting)"),
    "TORCHINDUCTOR_FORCE_DISABLE_CACHES": ("1", None, "TORCHINDUCTOR_FORCE_DISABLE_CACHES=1 (every start recompiles)",
                                           "`unset TORCHINDUCTOR_FORCE_DISABLE_CACHES`"),
}


class CommandFailed(RuntimeError):
    def __init__(self, label: str, index: int, total: int, rc: int, tail: List[str]) -> None:
        super().__init__("run %d/%d (%s) exited with %d; stopped" % (index, total, label, rc))
        self.label, self.index, self.total, self.rc, self.tail = label, index, total, rc, tail


def flips(env: Dict[str, str]) -> List[str]:
    """The costly switches this env sets (each gets one flipped run)."""
    return [k for k, (bad, _g, _n, _f) in SWITCHES.items() if env.get(k, "").upper() == bad]


def plan_runs(env: Dict[str, str], repeat: int) -> List[Tuple[str, int]]:
    names = ["cold", "jit-warm", "inductor-kept"] + ["flip:" + k for k in flips(env)]
    return [(n, rep) for rep in range(repeat) for n in names]


def _dir_bytes(path: str) -> int:
    total = 0
    for root, _d, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total


def attribute(walls: Dict[str, List[float]], growth: int, flipped: Sequence[str]) -> Dict[str, Any]:
    """Wall times per run name (one per repeat) -> the breakdown (minimum over repeats)."""
    def b(name: str) -> Optional[float]:
        return min(walls[name]) if walls.get(name) else None

    def d(x: Optional[float], y: Optional[float]) -> Optional[float]:
        return None if x is None or y is None else round(x - y, 4)

    cold, warm, kept = b("cold"), b("jit-warm"), b("inductor-kept")
    causes = []
    jit_s = d(cold, warm)
    causes.append({"id": "ptx-jit", "name": "PTX JIT (the JIT cache was empty)", "seconds": jit_s,
                   "significant": attribution.significant(jit_s, warm) and growth > 0, "in_env": growth > 0,
                   "fix": attribution.FIX_WARM, "jit_cache_growth_bytes": growth,
                   "measured_as": "whole command, empty minus warm CUDA_CACHE_PATH"})
    ind_s = d(warm, kept)
    causes.append({"id": "inductor-cache", "name": "torch.compile / Triton compiles (inductor cache empty)", "seconds": ind_s,
                   "significant": attribution.significant(ind_s, kept), "in_env": None, "fix": attribution.FIX_COMPILE,
                   "measured_as": "whole command, empty minus kept TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR"})
    for k in flipped:
        s = d(kept, b("flip:" + k))
        causes.append({"id": k.lower().replace("_", "-"), "name": SWITCHES[k][2], "seconds": s, "in_env": True,
                       "significant": attribution.significant(s, b("flip:" + k)), "fix": SWITCHES[k][3],
                       "measured_as": "whole command, as set minus flipped"})
    env_costs = [c["id"] for c in causes if c["significant"] and c["in_env"]]
    return {"verdict": attribution.DEGRADED if env_costs else attribution.HEALTHY, "first_run_s": cold,
            "rest_s": kept, "causes": causes, "env_causes": env_costs}


def run_command(cmd: Sequence[str], repeat: int = 1, timeout: float = 3600.0,
                progress: Callable[[str], None] = lambda s: None, env: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    base = dict(os.environ if env is None else env)
    plan = plan_runs(base, repeat)
    flipped = flips(base)
    progress("cudafix verify --first-run: will run `%s` %d times (%s)" % (
        " ".join(shlex.quote(a) for a in cmd), len(plan), ", ".join(n for n, r in plan if r == 0) + (" x%d" % repeat if repeat > 1 else "")))
    walls: Dict[str, List[float]] = {}
    runs: List[Dict[str, Any]] = []
    growth = 0
    try:
        cwd = os.getcwd()
    except OSError:
        cwd = "/"
    tmp = tempfile.mkdtemp(prefix="cudafix-firstrun-cmd-")
    try:
        for i, (name, rep) in enumerate(plan):
            jit = os.path.join(tmp, "jit%d" % rep)
            ind = os.path.join(tmp, "inductor%d-%s" % (rep, "cold" if name == "cold" else "kept"))
            scratch_dirs(tmp, (os.path.basename(jit), os.path.basename(ind)))
            e = dict(base, CUDA_CACHE_PATH=jit, TORCHINDUCTOR_CACHE_DIR=ind, TRITON_CACHE_DIR=os.path.join(ind, "triton"))
            if name.startswith("flip:"):
                k = name[5:]
                if SWITCHES[k][1] is None:
                    e.pop(k, None)
                else:
                    e[k] = SWITCHES[k][1]  # type: ignore[assignment]
            progress("  [%d/%d] %s" % (i + 1, len(plan), name))
            before = _dir_bytes(jit)
            t = time.perf_counter()
            try:
                # the trusted runner: the user's own command (not owner-checked: they named it), in
                # their directory, stdin closed, its own process group killed when it exits or on
                # the timeout / SIGTERM / SIGINT, output kept as a head and a tail
                proc = runner.run(list(cmd), timeout, env=e, check_exe=False, merge_stderr=True, cwd=cwd)
            except OSError as exc:
                raise CommandFailed(name, i + 1, len(plan), 127, [str(exc)]) from None
            if proc.timed_out:
                raise CommandFailed(name, i + 1, len(plan), 124, ["timed out after %ds" % timeout])
            wall = time.perf_counter() - t
            added = _dir_bytes(jit) - before
            if name == "cold":
                growth = max(growth, added)
            last = (proc.text().strip().splitlines() or [""])[-1]
            runs.append({"run": name, "repeat": rep, "wall_s": round(wall, 4), "rc": proc.returncode,
                         "jit_cache_added_bytes": added, "last_line": last[-300:]})
            if proc.returncode != 0:
                tail = proc.text().strip().splitlines()[-5:]
                raise CommandFailed(name, i + 1, len(plan), proc.returncode, tail)
            walls.setdefault(name, []).append(wall)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rep_ = attribute(walls, growth, flipped)
    rep_.update(schema="cudafix.verify.first-run/1", mode="command", command=list(cmd), repeat=repeat,
                planned_runs=len(plan), runs=runs, exit_code=attribution.EXIT_CODES[rep_["verdict"]])
    return rep_


def render_text(rep: Dict[str, Any], modules: Sequence[str] = ()) -> str:
    out = ["cudafix verify --first-run: first run %.2f s, %.2f s once every cache is warm" % (rep["first_run_s"], rep["rest_s"])]
    for c in rep["causes"]:
        if c["seconds"] is None:
            continue
        if not c["significant"]:
            out.append("  %-22s %+6.2f s  within noise (no cost)" % (c["id"], c["seconds"]))
            continue
        name = c["name"]
        if c["id"] == "ptx-jit" and modules:
            name = "PTX JIT of %s" % ", ".join(modules)
        out.append("  %-22s %.2f s of it is %s (fix: %s)" % (c["id"], c["seconds"], name, c["fix"]))
    if rep["verdict"] == attribution.HEALTHY:
        out.append("no first-run cost found in the env's switches")
    return "\n".join(out)
