"""`cudafix verify --first-run -- CMD ARGS...`: attribute the user's own program's first run.

The program is never edited: the whole command runs several times under environment changes
alone, and the differences of its wall time are the causes.  The cases, each run ``repeat`` times
(default 3), interleaved round by round:

  cold           empty JIT cache (CUDA_CACHE_PATH) and empty inductor/Triton caches: a first run
  jit-warm       the same JIT cache again, inductor caches empty        cold - jit-warm = PTX JIT
  inductor-kept  the same JIT cache and the same inductor caches         jit-warm - kept = compile
  <flip>         one per costly switch set in the env, flipped to its default (kept caches):
                 CUDA_MODULE_LOADING=EAGER -> LAZY, CUDA_LAUNCH_BLOCKING=1 -> unset,
                 TORCHINDUCTOR_FORCE_DISABLE_CACHES=1 -> unset          kept - flip = that switch
  warm:<module>  one per module `cudafix warm` covers on this machine (its own targets): a fresh JIT
                 cache filled by warm's child with that module alone    cold - warm:<m> = m's share
  warm-all       (two modules or more) every one of them warmed         warm-all - jit-warm = the rest

The rest is named for what it can be (cudafix/verify/cmdattr.py): cuDNN's tuning kernels when the
program sets cudnn.benchmark, modules warm cannot load, the program's own runtime compiles.  What
the command uses is recorded from inside its Python processes (cudafix/verify/cmdprobe.py).

The number of runs is printed before the first one starts, the time estimate after it (the cold
run is the slowest case); the first run that exits non-zero stops the check (exit 2).  All caches
are temp dirs, removed after.  A cost is a difference of minima, counted only above the noise the
cases showed in this same check (cmdattr.compare).
"""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
import time
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from cudafix.store import runner
from cudafix.store.fsutil import scratch_dirs
from cudafix.verify import attribution, cmdattr, cmdprobe

# env var -> (the costly value, the flipped value (None: unset), the cause's name, its fix)
SWITCHES: Dict[str, Tuple[str, Optional[str], str, str]] = {
    "CUDA_MODULE_LOADING": ("EAGER", "LAZY", "CUDA_MODULE_LOADING=EAGER", attribution.FIX_LAZY),
    "CUDA_LAUNCH_BLOCKING": ("1", None, "CUDA_LAUNCH_BLOCKING=1 (every launch waits for the GPU)",
                             "`unset CUDA_LAUNCH_BLOCKING` (a debugging setting)"),
    "TORCHINDUCTOR_FORCE_DISABLE_CACHES": ("1", None, "TORCHINDUCTOR_FORCE_DISABLE_CACHES=1 (every start recompiles)",
                                           "`unset TORCHINDUCTOR_FORCE_DISABLE_CACHES`"),
}
DEFAULT_REPEAT = 3
MIN_REPEAT = 2  # the noise is measured from a case's runs: one run has none


class WarmUnit(NamedTuple):
    """A module (or torch's own libraries, warmed together by `import torch`) that `cudafix warm`
    covers: ``warm(cache_dir)`` runs warm's child into that JIT cache, returns an error or None."""

    label: str
    warm: Callable[[str], Optional[str]]


class CommandFailed(RuntimeError):
    def __init__(self, label: str, index: int, total: int, rc: int, tail: List[str]) -> None:
        super().__init__("run %d/%d (%s) exited with %d; stopped" % (index, total, label, rc))
        self.label, self.index, self.total, self.rc, self.tail = label, index, total, rc, tail


def flips(env: Dict[str, str]) -> List[str]:
    """The costly switches this env sets (each gets one flipped run)."""
    return [k for k, (bad, _g, _n, _f) in SWITCHES.items() if env.get(k, "").upper() == bad]


def case_names(env: Dict[str, str], units: Sequence[str] = ()) -> List[str]:
    names = ["cold", "jit-warm", "inductor-kept"] + ["flip:" + k for k in flips(env)]
    names += ["warm:" + u for u in units] + (["warm-all"] if len(units) > 1 else [])
    return names


def plan_runs(env: Dict[str, str], repeat: int, units: Sequence[str] = ()) -> List[Tuple[str, int]]:
    """Round by round (every case once per round): a slow stretch of the machine hits all cases."""
    names = case_names(env, units)
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


def attribute(walls: Dict[str, List[float]], growth: int, flipped: Sequence[str], units: Sequence[str] = (),
              uses: Optional[Dict[str, Any]] = None, inductor_growth: Optional[int] = None,
              env: Optional[Dict[str, str]] = None, unwarmable: Sequence[Dict[str, str]] = ()) -> Dict[str, Any]:
    """Wall times per case (one per round) -> the breakdown (cmdattr: minima, spreads, not used).
    ``inductor_growth`` None (a recording made before it was measured): the inductor cause is measured."""
    uses = dict(uses or {})
    env = dict(env or {k: SWITCHES[k][0] for k in flipped})
    causes = [cmdattr.jit_cause(walls, growth, units, uses, unwarmable),
              cmdattr.inductor_cause(walls, 1 if inductor_growth is None else inductor_growth, uses),
              cmdattr.benchmark_cause(uses),
              cmdattr.loading_cause(walls, env, uses, SWITCHES["CUDA_MODULE_LOADING"][2], SWITCHES["CUDA_MODULE_LOADING"][3])]
    for k in flipped:
        if k == "CUDA_MODULE_LOADING":
            continue
        m = cmdattr.compare(walls, "inductor-kept", "flip:" + k)
        causes.append(dict(m, id=k.lower().replace("_", "-"), name=SWITCHES[k][2], in_env=True, fix=SWITCHES[k][3],
                           measured_as="whole command, as set minus flipped"))
    out = cmdattr.verdict(causes)
    st = {n: cmdattr.stats(v) for n, v in walls.items()}
    out.update(first_run_s=(st.get("cold") or {}).get("min_s"), rest_s=(st.get("inductor-kept") or {}).get("min_s"),
               causes=causes, case_stats=st, uses=uses)
    return out


def _case_env(base: Dict[str, str], name: str, rep: int, tmp: str, site: str, record: str) -> Tuple[Dict[str, str], str, str]:
    """(the run's env, its JIT cache dir, its inductor cache dir)."""
    if name.startswith("warm"):  # a JIT cache of its own, warmed before the run; inductor empty as in cold
        jit, ind = "jit%d-%s" % (rep, name.replace(":", "-")), "inductor%d-%s" % (rep, name.replace(":", "-"))
    else:
        jit, ind = "jit%d" % rep, "inductor%d-%s" % (rep, "cold" if name == "cold" else "kept")
    jit, ind = scratch_dirs(tmp, (jit.replace(os.sep, "_"), ind.replace(os.sep, "_")))
    e = cmdprobe.child_env(dict(base, CUDA_CACHE_PATH=jit, TORCHINDUCTOR_CACHE_DIR=ind,
                                TRITON_CACHE_DIR=os.path.join(ind, "triton")), site, record)
    if name.startswith("flip:"):
        k = name[5:]
        if SWITCHES[k][1] is None:
            e.pop(k, None)
        else:
            e[k] = SWITCHES[k][1]  # type: ignore[assignment]
    return e, jit, ind


def _announce(cmd: Sequence[str], plan: List[Tuple[str, int]], repeat: int, units: Sequence[WarmUnit]) -> str:
    names = [n for n, r in plan if r == 0]
    nwarm = sum(len(units) if n == "warm-all" else 1 for n in names if n.startswith("warm")) * repeat
    return ("cudafix verify --first-run: will run `%s` %d times: %d rounds of %d cases (%s), interleaved%s; "
            "the time estimate follows the first run" % (
                " ".join(shlex.quote(a) for a in cmd), len(plan), repeat, len(names), ", ".join(names),
                "; plus %d runs of cudafix warm's child to fill the warm:* cases' JIT caches" % nwarm if nwarm else ""))


def run_command(cmd: Sequence[str], repeat: int = 3, timeout: float = 3600.0,
                progress: Callable[[str], None] = lambda s: None, env: Optional[Dict[str, str]] = None,
                units: Sequence[WarmUnit] = (), unwarmable: Sequence[Dict[str, str]] = ()) -> Dict[str, Any]:
    base = dict(os.environ if env is None else env)
    labels = [u.label for u in units]
    plan = plan_runs(base, repeat, labels)
    flipped = flips(base)
    progress(_announce(cmd, plan, repeat, units))
    walls: Dict[str, List[float]] = {}
    runs: List[Dict[str, Any]] = []
    growth = ind_growth = 0
    records: List[Dict[str, Any]] = []
    started = time.perf_counter()
    try:
        cwd = os.getcwd()
    except OSError:
        cwd = "/"
    tmp = tempfile.mkdtemp(prefix="cudafix-firstrun-cmd-")
    try:
        site = cmdprobe.install(tmp)
        for i, (name, rep) in enumerate(plan):
            record = os.path.join(tmp, "probe-%d.jsonl" % i)
            e, jit, ind = _case_env(base, name, rep, tmp, site, record)
            warm_s = _warm_case(name, units, jit, i, len(plan))
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
                ind_growth = max(ind_growth, _dir_bytes(ind))
            recs = cmdprobe.read(record)
            records += recs
            last = (proc.text().strip().splitlines() or [""])[-1]
            runs.append({"run": name, "repeat": rep, "wall_s": round(wall, 4), "rc": proc.returncode,
                         "jit_cache_added_bytes": added, "warm_child_s": warm_s, "uses": cmdprobe.summarize(recs),
                         "last_line": last[-300:]})
            if proc.returncode != 0:
                tail = proc.text().strip().splitlines()[-5:]
                raise CommandFailed(name, i + 1, len(plan), proc.returncode, tail)
            walls.setdefault(name, []).append(wall)
            progress("  [%d/%d] %-16s %6.2f s" % (i + 1, len(plan), name, wall))
            if i == 0 and len(plan) > 1:
                progress("  estimate: at most about %.0f s more (%d runs, none slower than this cold one)%s" % (
                    wall * (len(plan) - 1), len(plan) - 1, ", plus the warm children" if units else ""))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rep_ = attribute(walls, growth, flipped, labels, cmdprobe.summarize(records), ind_growth, base, unwarmable)
    rep_.update(schema="cudafix.verify.first-run/2", mode="command", command=list(cmd), repeat=repeat,
                planned_runs=len(plan), cases=case_names(base, labels), runs=runs, units=labels,
                unwarmable=list(unwarmable), total_s=round(time.perf_counter() - started, 2),
                exit_code=attribution.EXIT_CODES[rep_["verdict"]])
    return rep_


def _warm_case(name: str, units: Sequence[WarmUnit], jit: str, i: int, total: int) -> Optional[float]:
    """Fill a warm:* case's fresh JIT cache with warm's child (its time is not the command's)."""
    if not name.startswith("warm"):
        return None
    todo = list(units) if name == "warm-all" else [u for u in units if "warm:" + u.label == name]
    t = time.perf_counter()
    for u in todo:
        err = u.warm(jit)
        if err:
            raise CommandFailed("cudafix warm's child for %s" % u.label, i + 1, total, 2, [err])
    return round(time.perf_counter() - t, 3)


def render_text(rep: Dict[str, Any], modules: Sequence[str] = ()) -> str:
    return "\n".join(cmdattr.render(rep))
