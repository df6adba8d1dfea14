"""cudafix.model.record.asdict (Snapshot.to_dict, FixPlan.to_dict: the `status --json` document)
gives what dataclasses.asdict gives, the truth: for every snapshot fixture and bundled example, and
for the plan cudafix makes for each; equal dicts, equal JSON text, and no value shared with the
object (lists and dicts are copies, as dataclasses makes them)."""

from __future__ import annotations

import dataclasses
import json
import pathlib

import pytest

from cudafix.model import record
from cudafix.model.snapshot import Snapshot
from tests.conftest import REPO, snapshot_files




SNAPSHOTS = snapshot_files()


def test_there_aresnapshot_files():
    assert len(SNAPSHOTS) >= 20


@pytest.mark.parametrize("path", SNAPSHOTS, ids=lambda p: str(pathlib.Path(p).relative_to(REPO)))
def test_as_dataclasses_asdict(path):
    from cudafix.plans.planner import plan_or_error

    snap = Snapshot.load(str(path))
    plan = plan_or_error(snap)[0]
    for obj in (snap, plan) if plan is not None else (snap,):
        mine, truth = record.asdict(obj), dataclasses.asdict(obj)
        assert mine == truth
        assert json.dumps(mine) == json.dumps(truth)  # same key order too
    d = snap.to_dict()
    d["env"]["CUDAFIX_TEST"] = "x"  # a copy: the snapshot is untouched
    assert "CUDAFIX_TEST" not in snap.env
