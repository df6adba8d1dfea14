"""Terminal injection (issue 21 item 5): no string from a snapshot reaches a text report raw.

Every string of the bundled H200 recording (values, and the names of its env variables) carries
ANSI CSI, OSC (window title), C1 CSI, bidi override, CR and a newline followed by a forged report
line.  `cudafix status --from FILE` (plain and coloured) and `cudafix fleet --from DIR` must print
no control character but their own newlines (and, coloured, their own SGR colour codes), and no
line can start with the forged text.
"""

from __future__ import annotations

import json
import re
import unicodedata

from click.testing import CliRunner

from cudafix.cli.fleet import fleet as fleet_cmd
from cudafix.render import report
from cudafix.render.text import COLOURS, RESET
from cudafix.model.snapshot import Snapshot
from cudafix import rules
from tests.conftest import REPO, run_dev_cudafix

RECORDING = REPO / "cudafix" / "data" / "examples" / "h200-torch2.11-cu130.json"
FORGED = "exit 0: the fleet is consistent and clean"
EVIL = "\x1b[2J\x1b]0;pwned\x07\x9b31m\u202e\r\n" + FORGED + "\n"
OWN = re.compile("|".join(re.escape(c) for c in list(COLOURS.values()) + [RESET]))


def _poison(v, node: str = ""):
    if isinstance(v, str):
        return v + EVIL
    if isinstance(v, list):
        return [_poison(x) for x in v]
    if isinstance(v, dict):
        return {(k + EVIL if k.isupper() else k): _poison(x) for k, x in v.items()}  # env names too
    return v


def _evil_snapshot(name: str) -> dict:
    d = json.loads(RECORDING.read_text(encoding="utf-8"))
    d["node"] = {"hostname": name, "engine": "slurm", "node_id": name, "net_interfaces": ["eth0"], "ib_devices": []}
    d = {k: (v if k == "schema" else _poison(v)) for k, v in d.items()}
    return d


def _controls(text: str, colour: bool):
    if colour:
        text = OWN.sub("", text)
    return sorted({c for c in text if c != "\n" and (unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp"))})


def _no_forged_line(text: str) -> None:
    for line in text.splitlines():
        assert not line.startswith(FORGED) and not line.startswith("pwned"), line


def test_status_from_a_poisoned_snapshot_prints_no_control_character(tmp_path):
    path = tmp_path / "evil.json"
    path.write_text(json.dumps(_evil_snapshot("node1")), encoding="utf-8")
    out = run_dev_cudafix("status", "--from", str(path), "--verbose", timeout=300)
    assert out.returncode in (0, 1), out.stderr
    assert "\\x1b]0;pwned" in out.stdout  # the values are there, written out
    assert _controls(out.stdout, colour=False) == []
    _no_forged_line(out.stdout)


def test_status_and_check_render_coloured_keep_only_their_own_colour_codes():
    snap = Snapshot.from_dict(_evil_snapshot("node1"))
    runs = rules.run(snap)
    for text in (report.render_status(snap, runs, origin="evil", color=True, verbose=True),
                 report.render_check(runs, color=True, snap=snap)):
        assert "\x1b[" in text  # it does colour
        assert _controls(text, colour=True) == []
        _no_forged_line(text)


def test_fleet_text_from_poisoned_snapshots_prints_no_control_character(tmp_path):
    for i in (1, 2, 3):
        name = "node%d" % i + (EVIL if i == 2 else "")
        d = _evil_snapshot(name)
        if i == 3:
            d["env"]["NCCL_SOCKET_IFNAME"] = "eth" + EVIL  # an outlier with a poisoned difference
        (tmp_path / ("n%d.json" % i)).write_text(json.dumps(d), encoding="utf-8")
    (tmp_path / ("bad" + EVIL.replace("/", "") + ".json")).write_text("{" + EVIL, encoding="utf-8")  # an error line too
    res = CliRunner().invoke(fleet_cmd, ["--from", str(tmp_path)])
    assert isinstance(res.exception, SystemExit), repr(res.exception)
    text = res.output
    assert "outliers" in text and "could not use" in text and "\\x1b[2J" in text
    assert _controls(text, colour=False) == []
    _no_forged_line(text)
    assert [ln for ln in text.splitlines() if ln.startswith("exit ")] == [text.splitlines()[-1]]
    assert res.exit_code != 0


def test_fix_plan_from_a_poisoned_snapshot_prints_no_control_character(tmp_path):
    """`cudafix fix`'s plan quotes snapshot paths (the interpreter, in `keep Python ...` and the
    head line): with the rich H200 recording's interpreter path and prefix poisoned, and a what-if
    driver that makes a plan of several steps, the plan text carries no control character."""
    d = json.loads((REPO / "cudafix" / "data" / "examples" / "h200-rich-torch2.11-cu130.json").read_text(encoding="utf-8"))
    d["python"]["executable"] += EVIL
    d["python"]["prefix"] += EVIL
    path = tmp_path / "evil.json"
    path.write_text(json.dumps(d), encoding="utf-8")
    out = run_dev_cudafix("fix", "--from", str(path), "--assume-driver", "550.54.14", timeout=300)
    assert out.returncode == 0, out.stderr
    assert "change  torch 2.11.0+cu130 -> " in out.stdout  # a plan with steps was printed
    assert "\\x1b]0;pwned" in out.stdout
    assert _controls(out.stdout, colour=False) == [] and _controls(out.stderr, colour=False) == []
    _no_forged_line(out.stdout)


def test_verify_text_reports_escape_what_status_and_the_children_said():
    """`cudafix verify`'s text reports quote `status` findings (module paths) and NCCL's log: the
    first-run report of the H200 recording with a poisoned finding, through the CLI's own escaping
    step (cudafix/cli/verify.py _shown), carries no control character but its newlines."""
    from cudafix.cli.verify import _shown
    from cudafix.verify import firstrun

    rep = json.loads((REPO / "docs" / "gpu-raw" / "first-run-640.json").read_text(encoding="utf-8"))
    rep["findings"] = [{"rule": "ext-ptx-jit", "severity": "warning", "message": "/x/libevil.so" + EVIL}]
    text = firstrun.render_text(_shown(rep))
    assert "status: [ext-ptx-jit] /x/libevil.so\\x1b[2J" in text
    assert _controls(text, colour=False) == []
    _no_forged_line(text)
