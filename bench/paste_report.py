"""Parse + diagnose a 200-line paste, against `cudafix status --from FILE` on the equivalent snapshot.

    python3 bench/paste_report.py [--runs N]

The paste is built from transcribed public dumps (tests/fixtures/paste/: collect_env of
pytorch/pytorch#30071, nvidia-smi of #45028, yolo checks of SunOner/sunone_aimbot#36) plus a
traceback and log lines, padded to exactly 200 lines.  Measured, in one process, medians of N:

- paste: cudafix.paste.diagnosis.read(text) (decode, parse, build the snapshot, every rule,
  the planner) + cudafix.paste.show.render -- what `status --from-report` does after its imports;
- baseline: what `status --from FILE` does after its imports on the snapshot that paste states
  (Snapshot.load, rules.run, plan_or_error, render_status) -- the same work without the parse.

Then both commands end to end as processes (`python -m cudafix status --from-report / --from`),
medians of N, so the import cost shows.  Budget: the paste, in process, <= 100 ms.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
FIX = os.path.join(REPO, "tests", "fixtures", "paste")


def body(name: str) -> str:
    with open(os.path.join(FIX, name), encoding="utf-8") as fh:
        return fh.read().split("# ---\n", 1)[1]


def make_paste(lines: int = 200) -> str:
    parts = [body("collect_env-1.3-pytorch-30071.txt"), body("nvidia-smi-a100-45028.txt"),
             body("yolo-checks-windows-sunone-36.txt"),
             "Traceback (most recent call last):\n  File \"train.py\", line 12, in <module>\n    x = x.cuda()\n"
             "UserWarning: CUDA initialization: The NVIDIA driver on your system is too old (found version 10000).\n"]
    text = "\n".join(parts)
    have = text.count("\n")
    noise = ["2024-01-01 12:00:%02d INFO epoch 1 step %d loss=0.%04d\n" % (i % 60, i, i) for i in range(lines)]
    return "".join(noise[: max(0, lines - have)]) + text


def median_ms(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000.0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=21)
    args = ap.parse_args()
    text = make_paste()
    assert text.count("\n") == 200, text.count("\n")

    from cudafix import rules
    from cudafix.model.snapshot import Snapshot
    from cudafix.paste import diagnosis, show
    from cudafix.plans.planner import plan_or_error
    from cudafix.render import report

    d = diagnosis.read(text)  # warm: the first call compiles the symptom table and imports the planner's parts
    snap_json = d.snapshot.to_json()
    tmp = tempfile.mkdtemp(prefix="cudafix-bench-")
    paste_file = os.path.join(tmp, "paste.txt")
    snap_file = os.path.join(tmp, "snap.json")
    with open(paste_file, "w", encoding="utf-8") as fh:
        fh.write(text)
    with open(snap_file, "w", encoding="utf-8") as fh:
        fh.write(snap_json)

    def paste_run() -> None:
        dd = diagnosis.read(text)
        show.render(dd, "from paste.txt", width=80)

    def baseline_run() -> None:
        snap = Snapshot.load(snap_file)
        runs = rules.run(snap)
        plan, err = plan_or_error(snap, runs)
        report.render_status(snap, runs, origin="from snap.json", plan=plan, plan_error=err, width=80)

    def parse_only() -> None:
        diagnosis.read_report(text)

    p_ms = median_ms(paste_run, args.runs)
    b_ms = median_ms(baseline_run, args.runs)
    parse_ms = median_ms(parse_only, args.runs)
    print("200-line paste, in process, median of %d:" % args.runs)
    print("  parse only (decode, facts, error texts)            %7.2f ms" % parse_ms)
    print("  paste: read + diagnose + plan + render             %7.2f ms   (budget 100 ms: %s)" % (p_ms, "met" if p_ms <= 100 else "MISSED"))
    print("  baseline: status --from's work on that snapshot    %7.2f ms" % b_ms)
    print("  ratio paste / baseline                             %7.2f" % (p_ms / b_ms))

    env = dict(os.environ, PYTHONPATH=REPO)

    def cli(*argv: str) -> None:
        subprocess.run([sys.executable, "-m", "cudafix"] + list(argv), env=env, stdout=subprocess.DEVNULL, check=False)

    cli_runs = max(3, args.runs // 3)
    c_paste = median_ms(lambda: cli("status", "--from-report", paste_file), cli_runs)
    c_base = median_ms(lambda: cli("status", "--from", snap_file), cli_runs)
    print("end to end (python -m cudafix status ...), median of %d:" % cli_runs)
    print("  --from-report paste.txt                            %7.1f ms" % c_paste)
    print("  --from snap.json (baseline)                        %7.1f ms" % c_base)
    print("  ratio                                              %7.2f" % (c_paste / c_base))


if __name__ == "__main__":
    main()
