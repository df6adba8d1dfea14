"""Issue 36's attack harness: every case of the issue against a tree, High / Medium / Low counted.

    python -m tools.attack36 --tree DIR [--race N]

Runs this checkout's attack tests (real processes, real files, a real second user: run as root)
against the cudafix of ``DIR`` (a worktree of any commit: the tests are copied into it, so the
same cases judge the old and the new code), then, with ``--race N``, N whole warm runs of
warm's child while another user's process flips a link in a shared sticky extension directory
between a module of root's and one of its own (the issue's H1: "4-9 of 40"), counting the runs
in which that user's constructor ran as root.  Prints one line per case and the totals.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

HERE = pathlib.Path(__file__).resolve().parent.parent
FILES = ["tests/test_trusted_loader.py", "tests/test_trusted_runner.py", "tests/test_deploy_hardening.py",
         "tests/test_low_hardening36.py", "tests/test_libraries.py", "tests/test_fleet_input.py", "tests/worldenv.py"]
# the earlier passes' attack tests, the tree's own: they must still pass
EARLIER = ["tests/test_warm_trust.py", "tests/test_hook_hardening.py", "tests/test_low_hardening.py", "tests/test_child_cwd.py"]
# test (prefix) -> severity, the item
SEVERITY = [
    ("test_warm_child_never_loads_the_other_side_of_a_flipped_link", "High", "H1 warm race"),
    ("test_trusted_load_in_process_never_loads_the_flipped_side", "High", "H1 in-process (hook/driver) race"),
    ("test_open_checked_refuses_another_users_link_and_dir", "High", "H1 link's own directory"),
    ("test_hook_never_preloads_through_a_link_in_another_users_directory", "High", "H1 hook preload link"),
    ("test_first_run_load_child_loads_only_what_the_check_passes", "High", "H2 first-run --load"),
    ("test_root_never_runs_code_another_user_planted_in_the_env", "High", "H3 prolog/NHC"),
    ("test_verify_cmd_does_not_wait_for_a_grandchild_holding_stdout", "Medium", "verify -- CMD grandchild"),
    ("test_verify_cmd_on_a_signal_kills_the_command_and_removes_its_caches", "Medium", "SIGTERM/SIGINT"),
    ("test_a_signal_inside_popen_still_kills_the_child", "Medium", "SIGINT inside Popen (the race)"),
    ("test_verify_cmd_output_is_bounded", "Medium", "unbounded output"),
    ("test_fleet_stdin_is_streamed_with_the_file_limit", "Medium", "fleet --from - whole"),
    ("test_first_run_child_never_imports_from_the_callers_directory", "Medium", "first-run child cwd"),
    ("test_nccl_child_never_imports_from_the_callers_directory", "Medium", "nccl child cwd"),
    ("test_nvcc_of_another_user_is_never_run", "Medium", "another user's nvcc"),
    ("test_hanging_nvcc_costs_its_timeout_and_no_more", "Medium", "hanging nvcc"),
    ("test_verify_cmd_gets_no_stdin", "Low", "verify -- CMD stdin"),
    ("test_fleet_file_takes_a_multi_node_stream_over_64_mib_as_stdin_does", "Low", "fleet FILE over 64 MiB"),
    ("test_tcsh_activation_never_runs_rm_from_path", "Low", "tcsh rm via PATH"),
    ("test_crafted_pe_section_name_is_a_reason_not_a_crash", "Low", "PE section name"),
    ("test_driver_probe_never_loads_a_libcuda_of_another_users_directory", "Low", "libcuda in anyone's dir"),
    ("test_torch_214_loads_its_own_nvjitlink_first_so_the_shadow_never_wins", "Low", "lib-shadowed: torch's own nvJitLink"),
    ("test_a_plain_stream_of_many_nodes_says_nothing_vouches_for_their_names", "Low", "a stream claims 100 nodes"),
    ("test_a_ray_node_output_is_one_node_named_by_ray", "Low", "a Ray node claims more nodes"),
]


def classify(name: str):
    for prefix, sev, item in SEVERITY:
        if name.startswith(prefix):
            return sev, item
    return "control", "earlier hardening (must pass)"


def run_cases(tree: pathlib.Path, python: str) -> int:
    for f in FILES:
        if (tree / f).resolve() != (HERE / f).resolve():
            shutil.copy2(str(HERE / f), str(tree / f))
    xml = tempfile.mktemp(suffix=".xml")
    subprocess.run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml", xml] + FILES[:-1] + EARLIER,
                   cwd=str(tree), timeout=3600, stdout=subprocess.DEVNULL)
    counts = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        name = case.get("name")
        failed = case.find("failure") is not None or case.find("error") is not None
        skipped = case.find("skipped") is not None
        sev, item = classify(name)
        state = "SKIP" if skipped else "FOUND" if failed else "closed"
        if sev == "control":
            state = "SKIP" if skipped else "FAIL" if failed else "pass"
        print("%-8s %-7s %-32s %s" % (state, sev, item, name))
        key = (sev, state)
        counts[key] = counts.get(key, 0) + 1
    os.unlink(xml)
    cases = sum(counts.values())
    print("cases: %d" % cases)
    for sev in ("High", "Medium", "Low"):
        print("%-6s found %d, closed %d" % (sev, counts.get((sev, "FOUND"), 0), counts.get((sev, "closed"), 0)))
    print("earlier hardening cases: %d pass, %d fail" % (counts.get(("control", "pass"), 0), counts.get(("control", "FAIL"), 0)))
    return counts.get(("High", "FOUND"), 0) + counts.get(("Medium", "FOUND"), 0)


RACE = r"""
import os, sys, time, subprocess
sys.path.insert(0, sys.argv[1])
sys.path.insert(1, sys.argv[2])
from tests import test_trusted_loader as T
from tests import users
import pathlib, tempfile
n = int(sys.argv[3])
u = users.create("cfxsec-race")
root = pathlib.Path(tempfile.mkdtemp(prefix="cfxrace-", dir="/tmp"))
os.chmod(str(root), 0o755)
marker = root / "marker"; marker.touch(); marker.chmod(0o666)
good = T._so(root / "good", "good", marker)
evil = T._so(root / "evil", "evil", marker)
os.chown(str(evil.parent), u.pw_uid, u.pw_gid); os.chown(str(evil), u.pw_uid, u.pw_gid)
shared = root / "shared"; shared.mkdir(); shared.chmod(0o1777)
link = shared / "cfx_mod.so"
flip = T._flip(u, link, good, evil)
from cudafix.warm import runtime as warmrun
hits = 0
try:
    t, snap = T._target_snap(link)
    for i in range(n):
        before = len(T._evil_runs(marker))
        warmrun.run_child(sys.executable, t, snap, dict(os.environ, CUDA_CACHE_PATH=str(root / "c")), timeout=60)
        hits += len(T._evil_runs(marker)) > before
finally:
    T._stop(flip)
    import shutil
    shutil.rmtree(str(root), ignore_errors=True)
    users.remove("cfxsec-race")
print("race: the other user's module ran as root in %d of %d warm runs" % (hits, n))
"""


def race(tree: pathlib.Path, python: str, n: int) -> None:
    # the tree's cudafix first on sys.path, this checkout's tests helpers after it
    subprocess.run([python, "-c", RACE, str(tree), str(HERE), str(n)], cwd="/", timeout=3600)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree", default=str(HERE))
    ap.add_argument("--race", type=int, default=0)
    ap.add_argument("--python", default=sys.executable)
    a = ap.parse_args()
    tree = pathlib.Path(a.tree).resolve()
    found = run_cases(tree, a.python)
    if a.race:
        race(tree, a.python, a.race)
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
