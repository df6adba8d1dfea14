"""Prove cudafix's PYTORCH_CUDA_ALLOC_CONF verdicts against torch's OWN parser on real torch builds.

For each test venv (tests/make_venvs.sh) and each string below, torch's parser runs without a GPU:

- torch >= 2.0 with Python bindings importable: ``torch.cuda.memory._set_allocator_settings(s)``
  (the same ``parseArgs`` the allocator runs on the variable at its first use);
- torch 1.10 / a torch installed without its CUDA wheels: the env-var path itself, in a child
  process with ``PYTORCH_CUDA_ALLOC_CONF=s``: the library's own config constructor is called
  through ctypes (1.10: ``CachingAllocatorConfig::init()``, 2.0: ``CachingAllocatorConfig::instance()``,
  local symbols found with ``nm``); a c10::Error ends the child with torch's message.

cudafix's verdict comes from the probe (option names read from that torch's libraries) and
cudafix.knowledge.alloc_syntax.  Where cudafix would repair a value, torch's parser is also run
on the repaired value, which must be accepted.

    python -m tools.alloc_conf_proof [--venvs DIR] [--write docs/alloc-conf.md]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
from typing import Dict, List, Optional, Sequence, Tuple

from cudafix.knowledge import alloc_conf as table
from cudafix.knowledge import alloc_syntax
from cudafix.probes.pyenv.alloc_conf import read_alloc_keys

STRINGS: Tuple[str, ...] = (
    "expandable_segments:True",
    "expandable_segments:True,bogus_key:1",
    "bogus_key:1",
    "bogus_key",
    "expandable_segment:True",
    "expandable_segments:true",
    "max_split_size_mb:128",
    "max_split_size_mb:21",
    "max_split_size_mb:20",
    "max_split_size_mb:19",
    "max_split_size_mb:abc",
    "max_split_size_mb:128, garbage_collection_threshold:0.6",
    "garbage_collection_threshold:0.6",
    "garbage_collection_threshold:1.5",
    "roundup_power2_divisions:4",
    "roundup_power2_divisions:3",
    "roundup_power2_divisions:[256:1,512:2,>:8]",
    "roundup_power2_divisions:[300:2,>:8]",
    "roundup_power2_divisions:[256:3,>:8]",
    "backend:native",
    "backend:foo",
    "roundup_bypass_threshold_mb:10",
    "release_lock_on_cudamalloc:True",
    "pinned_use_cuda_host_register:True,pinned_num_register_threads:8",
    "pinned_num_register_threads:3",
    "pinned_use_background_threads:True",
    "max_non_split_rounding_mb:64",
    "per_process_memory_fraction:0.5",
    "per_process_memory_fraction:1.5",
    "graph_capture_record_stream_reuse:True",
    "pinned_reserve_segment_size_mb:0",
    "throw_on_cudamalloc_oom:True",
    "large_segment_size_mb:64",
    "max_split_size_mb:512,expandable_segments:True,garbage_collection_threshold:0.8",
    "max_split_size_mb:512,roundup_bypass_threshold_mb:10,expandable_segments:True",
)

# (venv dir name, how torch's parser is reached)
VENVS: Tuple[Tuple[str, str], ...] = (
    ("torch-110", "ctypes:c10::cuda::CUDACachingAllocator::CachingAllocatorConfig::init()"),
    ("torch-201", "ctypes:c10::cuda::CUDACachingAllocator::CachingAllocatorConfig::instance()"),
    ("torch-251", "setter"),
    ("torch-cpu", "env"),
    ("torch-cu", "setter"),
)

_SETTER = r"""
import json, sys, warnings
warnings.simplefilter("ignore")
import torch
f = torch.cuda.memory._set_allocator_settings
for s in json.loads(sys.argv[1]):
    try:
        f(s)
        out = ("accepted", "")
    except Exception as e:
        out = ("rejected", (str(e).strip().splitlines() or [""])[0])
    try:
        f("")
    except Exception:
        pass
    print(json.dumps([s, out[0], out[1]]))
"""

_ENV = r"""
import json, os, sys, warnings
warnings.simplefilter("ignore")
import torch
torch.zeros(4) + 1
print(json.dumps([os.environ["PYTORCH_CUDA_ALLOC_CONF"], "accepted", ""]))
"""

_CTYPES = r"""
import ctypes, os, sys
lib, addr = sys.argv[1], int(sys.argv[2])
ctypes.CDLL(os.path.join(os.path.dirname(lib), "libc10.so"), mode=ctypes.RTLD_GLOBAL)
ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)
real = os.path.realpath(lib)
base = None
with open("/proc/self/maps") as fh:
    for line in fh:
        p = line.split()
        if len(p) >= 6 and p[5] == real and int(p[2], 16) == 0:
            base = int(p[0].split("-")[0], 16)
            break
ctypes.CFUNCTYPE(ctypes.c_void_p)(base + addr)()
sys.stdout.write("ACCEPTED\n")
"""


def venv_root() -> str:
    return os.environ.get("CUDAFIX_TEST_VENVS") or os.path.expanduser("~/.cache/cudafix-venvs")


def torch_dir(venv: str) -> Optional[str]:
    hits = sorted(glob.glob(os.path.join(venv, "lib", "python3*", "site-packages", "torch")))
    return hits[0] if hits else None


def torch_version(tdir: str) -> str:
    from cudafix.probes.pyenv.torch_build import parse_version_py

    with open(os.path.join(tdir, "version.py"), encoding="utf-8") as fh:
        vp = parse_version_py(fh.read())
    return "%s" % vp.get("__version__"), vp.get("cuda")  # type: ignore[return-value]


def _symbol(lib: str, name: str) -> int:
    out = subprocess.run(["nm", "-C", lib], stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=True).stdout.decode()
    for line in out.splitlines():
        if line.endswith(" " + name):
            return int(line.split()[0], 16)
    raise RuntimeError("%s: no symbol %s" % (lib, name))


def torch_verdicts(venv: str, how: str, strings: Sequence[str]) -> Dict[str, Tuple[str, str]]:
    """string -> (accepted | rejected, torch's first message line), from torch's own parser."""
    python = os.path.join(venv, "bin", "python")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTORCH_", "CUDAFIX_", "PYTHON"))}
    env["CUDAFIX_DISABLE"] = "1"
    out: Dict[str, Tuple[str, str]] = {}
    if how == "setter":
        proc = subprocess.run([python, "-c", _SETTER, json.dumps(list(strings))], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=env, timeout=600)
        for line in proc.stdout.decode().splitlines():
            if line.startswith("["):
                s, verdict, msg = json.loads(line)
                out[s] = (verdict, msg)
        if len(out) != len(set(strings)):
            raise RuntimeError("%s: parser run incomplete: %s" % (venv, proc.stderr.decode()[-400:]))
        return out
    if how == "env":  # a CPU build: what `import torch` and a CPU tensor do with the variable set
        def one_env(s: str) -> Tuple[str, Tuple[str, str]]:
            proc = subprocess.run([python, "-c", _ENV], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  env=dict(env, PYTORCH_CUDA_ALLOC_CONF=s), timeout=300)
            err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
            return s, (("accepted", "") if proc.returncode == 0 else ("rejected", err[-1] if err else "exit %d" % proc.returncode))
        return dict(_parallel(one_env, strings))
    lib = os.path.join(torch_dir(venv) or "", "lib", "libc10_cuda.so")
    addr = _symbol(lib, how.split(":", 1)[1])

    def one(s: str) -> Tuple[str, Tuple[str, str]]:
        proc = subprocess.run([python, "-c", _CTYPES, lib, str(addr)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=dict(env, PYTORCH_CUDA_ALLOC_CONF=s), timeout=120)
        err = proc.stderr.decode("utf-8", "replace")
        if proc.returncode == 0 and proc.stdout.decode().strip() == "ACCEPTED":
            return s, ("accepted", "")
        if "terminate called after throwing" in err:
            what = [ln.split("what():", 1)[1].strip() for ln in err.splitlines() if "what():" in ln]
            return s, ("rejected", what[0] if what else err.strip().splitlines()[0])
        raise RuntimeError("%s: parser child for %r failed (%d): %s" % (venv, s, proc.returncode, err[-400:]))
    return dict(_parallel(one, strings))


def _parallel(fn, items: Sequence[str]) -> List[Tuple[str, Tuple[str, str]]]:
    """One child process per value, two at a time."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(fn, list(dict.fromkeys(items))))


def cudafix_verdict(tdir: str, cuda: Optional[str], value: str) -> Tuple[str, Optional[str], str]:
    """(accepted | rejected | uncertain, the repaired value or None, why) as cudafix's rule decides."""
    if not cuda:
        return "accepted", None, "CPU build: the CUDA allocator never reads the variable"
    names = set(table.KNOWN_NAMES) | {it.key for it in alloc_syntax.split_items(value, "regex")} \
        | {it.key for it in alloc_syntax.split_items(value, "lexer")}
    info = read_alloc_keys(tdir, names)
    if info.unknown:
        return "uncertain", None, info.unknown
    issues = alloc_syntax.check(value, info.parser, info.accepted, info.rejected, info.uncertain, info.max_split_check)
    if not issues:
        return "accepted", None, ""
    certain = [i for i in issues if i.kind != alloc_syntax.UNCERTAIN]
    if not certain:
        return "uncertain", None, "; ".join(i.reason for i in issues)
    repaired = None
    if all(i.kind == alloc_syntax.REJECTED for i in certain) and len(certain) == len(issues):
        repaired = alloc_syntax.without(value, info.parser, [i.key for i in certain])
    return "rejected", repaired, "; ".join(i.reason for i in issues)


def run(root: str, strings: Sequence[str] = STRINGS, require_all: bool = False) -> List[dict]:
    """One row per (venv, string): torch's verdict, cudafix's, and torch's verdict on the repair."""
    rows: List[dict] = []
    for name, how in VENVS:
        venv = os.path.join(root, name)
        tdir = torch_dir(venv)
        if tdir is None:
            if require_all:
                raise RuntimeError("test venv %s is missing (tests/make_venvs.sh builds it)" % venv)
            continue
        version, cuda = torch_version(tdir)  # type: ignore[misc]
        ours = {s: cudafix_verdict(tdir, cuda, s) for s in strings}
        repairs = sorted({r for _, r, _ in ours.values() if r is not None})
        theirs = torch_verdicts(venv, how, list(strings) + [r for r in repairs if r not in strings])
        for s in strings:
            verdict, repaired, why = ours[s]
            rows.append({
                "venv": name, "torch": version, "string": s,
                "torch_verdict": theirs[s][0], "torch_message": theirs[s][1],
                "cudafix_verdict": verdict, "cudafix_reason": why,
                "repaired": repaired, "torch_on_repaired": theirs[repaired][0] if repaired is not None else None,
            })
    return rows


def equal(row: dict) -> bool:
    if row["cudafix_verdict"] != row["torch_verdict"]:
        return False
    return row["repaired"] is None or row["torch_on_repaired"] == "accepted"


def contradicts(row: dict) -> bool:
    """cudafix says the opposite of torch, or its repair is rejected ("uncertain" is no claim)."""
    if row["cudafix_verdict"] == "uncertain":
        return False
    return not equal(row)


def _how_text(how: str) -> str:
    if how == "setter":
        return "`torch.cuda.memory._set_allocator_settings(value)`"
    if how == "env":
        return "`import torch` and a CPU tensor with the variable set (a CPU build has no CUDA allocator to parse it)"
    return "`%s` of its libc10_cuda.so via ctypes, with the variable set" % how.split(":", 1)[1]


def render(rows: List[dict]) -> str:
    versions: List[Tuple[str, str]] = []
    for r in rows:
        if (r["venv"], r["torch"]) not in versions:
            versions.append((r["venv"], r["torch"]))
    by = {(r["venv"], r["string"]): r for r in rows}
    strings = [r["string"] for r in rows if r["venv"] == versions[0][0]] if versions else []
    mark = {"accepted": "ok", "rejected": "REJECTED", "uncertain": "uncertain"}
    lines = [
        "# PYTORCH_CUDA_ALLOC_CONF: cudafix vs torch's own parser",
        "",
        "Generated by `python -m tools.alloc_conf_proof --write docs/alloc-conf.md` from a real run;",
        "`tests/test_alloc_conf_real.py` re-runs it and compares with this file. Each cell: torch's verdict /",
        "cudafix's verdict; `repair ok` means torch's parser also accepts the value cudafix repairs it to.",
        "",
        "How torch's parser was run (no GPU needed; see the module doc of `tools/alloc_conf_proof.py`):",
        "",
    ]
    for name, how in VENVS:
        v = [ver for n, ver in versions if n == name]
        if v:
            lines.append("- torch %s (`%s` venv): %s" % (v[0], name, _how_text(how)))
    lines += ["", "cudafix's verdict uses only the option names read from that torch's libraries "
              "(`cudafix/probes/pyenv/alloc_conf.py`) and the value rules of `cudafix/knowledge/alloc_syntax.py`. "
              "torch 2.13.0 is a CPU build: the CUDA allocator never reads the variable (torch accepts anything).", ""]
    lines.append("| value | " + " | ".join("torch %s" % v for _, v in versions) + " |")
    lines.append("|---|" + "---|" * len(versions))
    n_equal = n_all = 0
    for s in strings:
        cells = []
        for name, _ in versions:
            r = by[(name, s)]
            n_all += 1
            n_equal += equal(r)
            cell = "%s / %s" % (mark[r["torch_verdict"]], mark[r["cudafix_verdict"]])
            if r["repaired"] is not None:
                cell += " (repair `%s` %s)" % (r["repaired"] or "(unset)", "ok" if r["torch_on_repaired"] == "accepted" else "REJECTED")
            if contradicts(r):
                cell = "**WRONG: %s**" % cell
            cells.append(cell)
        lines.append("| `%s` | %s |" % (s.replace("|", "\\|"), " | ".join(cells)))
    n_wrong = sum(contradicts(r) for r in rows)
    lines += ["", "%d of %d cells equal; %d uncertain (cudafix warns \"may be rejected\" and repairs nothing); "
              "%d wrong." % (n_equal, n_all, n_all - n_equal - n_wrong, n_wrong), "",
              "\"uncertain\": the name occurs in the library only as the end of a longer string (torch 2.5.1 and "
              "2.14.1 carry the function name `release_expandable_segment`, which ends in the typo "
              "`expandable_segment`). The linker also stores a real key that way when another string ends with it, "
              "so cudafix cannot tell the two apart and does not drop such a key.", "", "## torch's messages", ""]
    for name, ver in versions:
        msgs = [(r["string"], r["torch_message"]) for r in rows if r["venv"] == name and r["torch_message"]]
        lines.append("- torch %s: %s" % (ver, "; ".join("`%s` -> %s" % m for m in msgs) if msgs else "none"))
    return "\n".join(lines) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--venvs", default=venv_root())
    ap.add_argument("--write", metavar="FILE")
    ap.add_argument("--require-all", action="store_true")
    ap.add_argument("--rows", metavar="JSON", help="also write the raw rows here")
    ap.add_argument("--from-rows", metavar="JSON", help="render rows written by --rows (no parser run)")
    args = ap.parse_args(argv)
    if args.from_rows:
        with open(args.from_rows, encoding="utf-8") as fh:
            rows = json.load(fh)
    else:
        rows = run(args.venvs, require_all=args.require_all)
    if args.rows:
        with open(args.rows, "w", encoding="utf-8") as fh:
            json.dump(rows, fh, indent=1)
    text = render(rows)
    if args.write:
        with open(args.write, "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        sys.stdout.write(text)
    bad = [r for r in rows if contradicts(r)]
    for r in bad:
        sys.stderr.write("DIFFERENT: torch %s %r: torch %s (%s), cudafix %s (%s)\n" % (
            r["torch"], r["string"], r["torch_verdict"], r["torch_message"], r["cudafix_verdict"], r["cudafix_reason"]))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
