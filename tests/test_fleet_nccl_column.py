"""The fleet report's NCCL column: `none` where a node has no NCCL (a CPU torch build), never `?`;
`?` stays for "could not tell" (issue 21)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess

from cudafix.fleet import compare, render
from tests.conftest import require
from tests.snapbuild import H200, load_base



# -- the NCCL column: "none" where a node has no NCCL, "?" only where it could not be told -----

def test_nccl_column_none_for_a_cpu_torch_question_mark_for_unknown(tmp_path):
    # transcribed: torch 2.1.0+cpu (ultralytics/ultralytics#8869): a CPU build ships no NCCL
    cpu = json.loads((pathlib.Path(__file__).parent / "fixtures" / "snapshots" / "f5_ultralytics_cpu_torch.json").read_text())
    assert compare.node_facts(cpu)["NCCL"] == "none"
    # the H200 recording: torch's own NCCL; with its library resolutions lost, cudafix cannot tell
    h200 = load_base(H200)
    assert compare.node_facts(h200)["NCCL"][0].isdigit()
    h200["libraries"]["resolutions"] = []
    assert compare.node_facts(h200)["NCCL"] == "?"


def test_real_cpu_torch_node_reads_none(tmp_path):
    py = pathlib.Path.home() / ".cache" / "cudafix-venvs" / "torch-cpu" / "bin" / "python"
    require(py.exists(), "torch-cpu venv")
    out = tmp_path / "cpu.json"
    env = dict(os.environ, PYTHONPATH=str(pathlib.Path(__file__).resolve().parent.parent))
    subprocess.run([str(py), "-m", "cudafix", "snapshot", "-o", str(out)], env=env, check=True, timeout=300, capture_output=True)
    doc = json.loads(out.read_text())
    # the truth: that torch's own version.py says it is no CUDA build
    version_py = next((pathlib.Path(doc["torch"][0]["package_dir"])).glob("version.py")).read_text()
    assert "cuda: Optional[str] = None" in version_py or "cuda = None" in version_py
    assert compare.node_facts(doc)["NCCL"] == "none"


def test_text_report_says_none_for_the_cpu_node():
    from cudafix.fleet.inputs import parse_stream
    from tests import fleet_gen
    fleet = fleet_gen.make_fleet(3, {})
    cpu = json.loads((pathlib.Path(__file__).parent / "fixtures" / "snapshots" / "f5_ultralytics_cpu_torch.json").read_text())
    cpu["node"] = {"hostname": "cpu01", "node_id": "cpu01"}
    fleet["cpu01"] = cpu
    docs = []
    for name, d in fleet.items():
        docs += parse_stream(json.dumps(d), name)[0]
    text = render.render_text(compare.compare(docs, []))
    line = [l for l in text.splitlines() if l.startswith("  cpu01:")][0]
    assert "NCCL none (majority: 2." in line and "NCCL ?" not in text
