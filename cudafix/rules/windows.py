"""Native Windows rules: DLL loading at ``import torch`` and the commit charge of DataLoader workers
(docs/windows.md).  Off Windows every rule answers ok "not Windows".  The CPU wheel PyPI serves on
Windows is cpu-only-torch's finding (rules/torch.py), its command the plan's (cudafix fix)."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Iterable, List, Optional

from cudafix.knowledge import windows as K
from cudafix.model.findings import ERROR, WARNING, Outcome, Rule
from cudafix.model.fixes import Fix
from cudafix.model.snapshot import Snapshot
from cudafix.rules._util import fmt_bytes, ok, problem, unknown

# Ultralytics' default DataLoader workers (--workers 8), the setting of the WinError 1455 reports
# (ultralytics/yolov3#1643, ultralytics/yolov5#11418).
DEFAULT_WORKERS = 8


def _gate(snap: Snapshot) -> Optional[List[Outcome]]:
    if not (snap.python.platform or "").startswith("win"):
        return [ok("not native Windows (platform %s)" % (snap.python.platform or "?"), subject="windows")]
    if not snap.windows.probed:
        return [unknown("Windows DLL section not probed (snapshot from an older cudafix)", subject="windows")]
    return None


def check_dll_missing(snap: Snapshot) -> Iterable[Outcome]:
    gate = _gate(snap)
    if gate is not None:
        return gate
    w = snap.windows
    if w.dll_failure is None:
        if "dll_failure" in w.unknown:
            return [unknown("DLL loading not simulated", w.unknown["dll_failure"], subject="windows")]
        return [ok("every DLL torch loads at import resolves (%s)" % w.found_via.get("system32", ""), subject="windows")]
    f = w.dll_failure
    missing = str(f.get("missing", "?"))
    chain = " -> ".join(f.get("chain") or []) + " -> " + missing
    ev = [str(f.get("error", "")), "needed by: %s" % chain,
          "searched: the DLL's directory, python.exe's, System32, os.add_dll_directory (torch\\lib, Library\\bin, CUDA_PATH_Vx_y\\bin), then PATH"]
    if missing.lower() in K.VC_RUNTIME:
        fix = Fix(summary="install the Microsoft Visual C++ Redistributable (x64): %s" % K.VC_REDIST_URL)
    else:  # torch's own DLLs come back with torch's reinstall, which the plan (cudafix fix) owns
        fix = Fix(summary="reinstall the package that ships %s (torch\\lib: torch itself, `cudafix fix` gives the command; CUDA DLLs: the nvidia-* wheels or CUDA_PATH)" % missing)
    return [problem("import torch fails: %s is not found while loading %s" % (missing, f.get("loading")), ev, fix=fix,
                    severity=ERROR, subject="windows")]


def check_commit_charge(snap: Snapshot) -> Iterable[Outcome]:
    gate = _gate(snap)
    if gate is not None:
        return gate
    w = snap.windows
    if not w.dll_bytes:
        return [unknown("size of the DLLs torch maps is unknown", subject="windows")]
    if not w.commit_limit_bytes:
        return [unknown("commit limit unknown: %s" % w.unknown.get("commit_limit_bytes", "?"), subject="windows")]
    per = w.dll_bytes
    fits = w.commit_limit_bytes // per - 1  # the main process, then each worker (spawned: maps them again)
    ev = ["each process maps %s of DLLs (torch\\lib and the nvidia wheels)" % fmt_bytes(per),
          "commit limit (RAM + pagefile) %s" % fmt_bytes(w.commit_limit_bytes),
          "an estimate from file sizes: a lower bound of what each process charges before any tensor"]
    if fits >= DEFAULT_WORKERS:
        return [ok("%d DataLoader workers' DLLs fit the commit limit" % DEFAULT_WORKERS, *ev, subject="windows")]
    return [problem("%d DataLoader workers (ultralytics' default) would charge %s of DLLs against a %s commit limit: WinError 1455"
                    % (DEFAULT_WORKERS, fmt_bytes(per * (DEFAULT_WORKERS + 1)), fmt_bytes(w.commit_limit_bytes)), ev,
                    fix=Fix(summary="use at most %d workers (DataLoader num_workers / yolo --workers), or enlarge the pagefile (System Properties > Advanced > Performance > Virtual memory; system-managed)" % max(fits, 0)),
                    severity=WARNING, subject="windows")]


RULES = (
    Rule(id="windows-dll-missing", severity=ERROR, title="import torch fails with WinError 126: a DLL it needs is not found",
         check=check_dll_missing, needs=("windows", "torch"),
         cause="torch's __init__.py loads every torch\\lib\\*.dll with LoadLibraryExW (the DLL's directory, python.exe's, System32, os.add_dll_directory dirs; PATH only on its retry). A dependency found in none of them fails the import; Windows names only the DLL being loaded, never the missing one.",
         symptoms=('OSError: [WinError 126] The specified module could not be found. Error loading "...\\torch\\lib\\c10.dll" or one of its dependencies.',
                   "Microsoft Visual C++ Redistributable is not installed, this may lead to the DLL load failure."),
         evidence_used="the PE import tables of torch\\lib\\*.dll and torch\\_C*.pyd, the DLL directories torch adds, System32's DLLs",
         fix_text="install the VC++ Redistributable when the missing DLL is msvcp140*.dll; otherwise reinstall the package that ships it.",
         sources=("pytorch/pytorch torch/__init__.py (_load_dll_libraries)", "https://learn.microsoft.com/en-us/windows/win32/dlls/dynamic-link-library-search-order",
                  "https://docs.python.org/3/library/os.html#os.add_dll_directory")),
    Rule(id="windows-commit-charge", severity=WARNING, title="DataLoader workers' DLLs exceed the Windows commit limit (WinError 1455)",
         check=check_commit_charge, needs=("windows",),
         cause="Windows spawns each DataLoader worker as a new process that loads torch's and the CUDA DLLs again, and charges them against the commit limit (RAM + pagefile); with large CUDA DLLs a few workers exhaust it.",
         symptoms=(K.WINERROR_1455 + ' Error loading "...\\torch\\lib\\cudnn_cnn_infer64_8.dll" or one of its dependencies.',),
         evidence_used="the sizes of torch\\lib\\*.dll and the nvidia wheels' DLLs, GlobalMemoryStatusEx's commit limit",
         fix_text="fewer DataLoader workers, or a larger (system-managed) pagefile.",
         sources=("pytorch/pytorch#59904", "ultralytics/yolov3#1643", "ultralytics/yolov5#11418", "cszn/KAIR#127")),
)
