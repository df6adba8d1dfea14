"""GPU probe: /proc parser on a recorded H200 text, CUDA_VISIBLE_DEVICES semantics, this machine."""

from __future__ import annotations

from hypothesis import given, strategies as st

from cudafix.model import visible_devices as vd
from cudafix.probes.machine import gpus as gp
from cudafix.model.snapshot import GPU
from tests.conftest import FIXTURES

H200_UUID = "GPU-8f6284fb-6446-e1dc-1efd-0d08141350d4"


def _four():
    # Four identical GPUs (nvidia-smi index = PCI order), as on a 4x H200 host.
    return [GPU(index=i, name="NVIDIA H200", compute_capability="9.0", uuid="GPU-%d000000-0000-0000-0000-00000000000%d" % (i, i),
                pci_bus_id="00000000:%02x:00.0" % (0x18 + i)) for i in range(4)]


def test_parse_gpu_information_recorded_h200():
    fields = gp.parse_gpu_information((FIXTURES / "probe" / "h200_gpu_information.txt").read_text())
    assert fields["Model"] == "NVIDIA H200"
    assert fields["GPU UUID"] == H200_UUID
    assert fields["Bus Location"] == "0000:00:06.0"
    assert fields["GPU Excluded"] == "No"


def _proc_root(tmp_path):
    d = tmp_path / "proc/driver/nvidia/gpus/0000:00:06.0"
    d.mkdir(parents=True)
    (d / "information").write_text((FIXTURES / "probe" / "h200_gpu_information.txt").read_text())
    return str(tmp_path)


def test_probe_gpus_from_proc_without_nvml(tmp_path):
    info = gp.probe_gpus(env={}, root=_proc_root(tmp_path), use_nvml=False)
    assert [(g.index, g.name, g.uuid, g.pci_bus_id) for g in info.gpus] == [(0, "NVIDIA H200", H200_UUID, "0000:00:06.0")]
    assert info.gpus[0].compute_capability is None and "compute_capability" in info.unknown
    assert info.visible == [0]
    assert info.found_via["gpus"].startswith("/proc/driver/nvidia/gpus")


def test_probe_gpus_from_proc_with_visible_devices(tmp_path):
    root = _proc_root(tmp_path)
    assert gp.probe_gpus(env={"CUDA_VISIBLE_DEVICES": "GPU-8f6284fb"}, root=root, use_nvml=False).visible == [0]
    info = gp.probe_gpus(env={"CUDA_VISIBLE_DEVICES": "1"}, root=root, use_nvml=False)
    assert info.visible == [] and "matches no GPU" in info.found_via["visible"]
    assert gp.probe_gpus(env={"CUDA_VISIBLE_DEVICES": ""}, root=root, use_nvml=False).visible == []


def test_probe_gpus_on_this_machine_never_raises():
    info = gp.probe_gpus(env={})
    if not info.gpus:
        assert "gpus" in info.unknown and "nvml" in info.unknown


def test_nvidia_documented_example_invalid_entry_stops_parsing():
    # NVIDIA: "0,2,-1,1" -> devices 0 and 2 visible.
    res = vd.resolve_visible(_four(), "0,2,-1,1", "PCI_BUS_ID")
    assert res.indices == [0, 2]
    assert res.invalid == ("-1",) and res.stopped_at == 2


def test_list_order_is_cuda_order():
    assert vd.visible_indices(_four(), "2,1", "PCI_BUS_ID") == [2, 1]


def test_unset_empty_and_minus_one():
    assert vd.visible_indices(_four(), None, None) == [0, 1, 2, 3]
    assert vd.visible_indices(_four(), "", None) == []
    assert vd.visible_indices(_four(), "-1", None) == []
    spec = vd.parse_cuda_visible_devices("-1")
    assert spec.hides_all and spec.stopped_at == 0
    assert vd.parse_cuda_visible_devices("").hides_all
    assert not vd.parse_cuda_visible_devices(None).hides_all


def test_uuid_full_and_unique_prefix():
    g = _four()
    assert vd.visible_indices(g, g[3].uuid + ",GPU-1", None) == [3, 1]


def test_ambiguous_uuid_prefix_is_invalid():
    g = [GPU(index=i, name="NVIDIA A100-SXM4-80GB", compute_capability="8.0", uuid="GPU-ab0%d1111-2222-3333-4444-555555555555" % i,
             pci_bus_id="0000:%02x:00.0" % (i + 1)) for i in range(2)]
    res = vd.resolve_visible(g, "1,GPU-ab0,0", None)
    assert res.indices == [1] and res.invalid == ("GPU-ab0",) and res.stopped_at == 1
    assert vd.visible_indices(g, "GPU-ab00", None) == [0]


def test_out_of_range_index_stops():
    res = vd.resolve_visible(_four(), "3,7,0", "PCI_BUS_ID")
    assert res.indices == [3] and res.invalid == ("7",) and res.stopped_at == 1


def test_mig_and_duplicates_are_undecided():
    assert vd.visible_indices(_four(), "MIG-GPU-0000/1/2", None) is None
    assert vd.resolve_visible(_four(), "0,0", "PCI_BUS_ID").indices is None


def test_mixed_models_default_order_is_undecided_but_pci_order_is_not():
    g = [GPU(index=0, name="NVIDIA GeForce RTX 3060", compute_capability="8.6", pci_bus_id="0000:01:00.0", uuid="GPU-a"),
         GPU(index=1, name="NVIDIA GeForce RTX 4090", compute_capability="8.9", pci_bus_id="0000:02:00.0", uuid="GPU-b")]
    res = vd.resolve_visible(g, None, None)
    assert res.indices is None and "cannot be decided" in res.reason
    assert vd.visible_indices(g, None, "PCI_BUS_ID") == [0, 1]
    assert vd.visible_indices(g, "1", None) is None  # an index under FASTEST_FIRST: unknown GPU
    assert vd.visible_indices(g, "GPU-b", None) == [1]  # a UUID names one GPU whatever the order


def test_parse_entries_kinds():
    spec = vd.parse_cuda_visible_devices(" 0, GPU-8f6284fb ,MIG-GPU-x/1/2,abc,1")
    assert [e.kind for e in spec.entries] == [vd.INDEX, vd.UUID, vd.MIG, vd.INVALID, vd.INDEX]
    assert spec.stopped_at == 3


@given(st.text(max_size=40), st.sampled_from([None, "", "PCI_BUS_ID", "FASTEST_FIRST", "bogus"]))
def test_never_raises_and_stays_in_range(value, order):
    g = _four()
    res = vd.resolve_visible(g, value, order)
    if res.indices is not None:
        assert all(0 <= i < len(g) for i in res.indices)
        assert len(set(res.indices)) == len(res.indices)
    vd.parse_cuda_visible_devices(value)
