"""The H200 device machine, recorded: cudafix must find nothing wrong there, and every GPU fact
must match what nvidia-smi / cuobjdump printed on the same machine (tests/fixtures/h200/README.md
says how each file was recorded there on 2026-11-30)."""

from __future__ import annotations

import csv
import re

from cudafix import rules
from cudafix.model.snapshot import Snapshot
from tests.conftest import FIXTURES

RAW = FIXTURES / "h200"
SNAP = Snapshot.load(str(RAW / "snapshot.json"))  # recorded with nvidia-smi-query.csv, same machine


def test_no_errors_or_warnings_on_the_healthy_h200():
    found = rules.findings(rules.run(SNAP))
    assert [f for f in found if f.severity in ("error", "warning")] == []


def test_gpu_facts_match_nvidia_smi():
    rows = list(csv.reader((RAW / "nvidia-smi-query.csv").read_text().splitlines(), skipinitialspace=True))
    header, data = rows[0], rows[1:]
    assert len(data) == len(SNAP.gpus.gpus) == 1
    smi = dict(zip(header, data[0]))
    gpu = SNAP.gpus.gpus[0]
    assert gpu.name == smi["name"]
    assert gpu.compute_capability == smi["compute_cap"]
    assert "%d MiB" % gpu.memory_mib == smi["memory.total [MiB]"]
    assert gpu.mig_mode is (smi["mig.mode.current"] == "Enabled")
    assert gpu.uuid == smi["uuid"]
    assert gpu.pci_bus_id.lower() == smi["pci.bus_id"].lower()
    assert SNAP.driver.kernel_version == smi["driver_version"] == (RAW / "sys_module_nvidia_version.txt").read_text().strip()
    assert SNAP.driver.cuda_version == 13000  # nvidia-smi header: "CUDA Version: 13.0"
    assert "CUDA Version: 13.0" in (RAW / "nvidia-smi.txt").read_text()


def test_fatbin_scan_matches_cuobjdump_on_the_same_library():
    listed = set(re.findall(r"\.(sm_\d+[af]?)\.cubin", (RAW / "cuobjdump-list-elf.txt").read_text()))
    scanned = next(a for a in SNAP.torch[0].arch if a.library.endswith("/libtorch_cuda.so"))
    assert set(scanned.sass) == listed
    assert scanned.ptx == [] and "No PTX file found" in (RAW / "cuobjdump-list-ptx.txt").read_text()
