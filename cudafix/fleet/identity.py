"""What makes a node this node and not its neighbour: the one list of identity fields.

Two nodes whose snapshots are equal apart from these fields have the same stack: `cudafix fleet`
builds the record and runs the rules once for them (compare.py).  A field belongs here only if no
rule reads it (tests/test_fleet_identity.py holds that against the rules' source), so leaving it
out of the content can never change a finding.  ``node.unknown`` is not here: the NCCL rules
quote it.
"""

from __future__ import annotations

import marshal
from typing import Any, Dict, Optional

TOP_FIELDS = ("created", "source")  # when and where the snapshot was taken
NODE_FIELDS = ("hostname", "engine", "node_id", "found_via")  # the node section: who the node is
GPU_FIELDS = ("uuid", "pci_bus_id")  # each GPU of gpus.gpus: the card's own serial and slot


def split(data: Dict[str, Any]) -> Dict[str, Any]:
    """The snapshot without its identity fields (shallow copies: ``data`` is left as it is).
    A section of another shape than the schema's stays in whole: its content is judged."""
    view = _view(data)
    return view if view is not None else {k: v for k, v in data.items() if k not in TOP_FIELDS}


def content_bytes(data: Dict[str, Any]) -> Optional[bytes]:
    """The content as bytes, or None where an identity field holds what the schema does not
    allow there (such a node is judged on its own: its snapshot's own type check names the field).
    Equal bytes mean equal content, types included (true and 1, 1 and 1.0 are told apart, as the
    snapshot's type check tells them apart; ``==`` would not).  Keys in another order, or objects
    shared in another way (marshal marks an object referenced twice), give other bytes: one more
    judgement, never a wrong merge."""
    view = _view(data)
    return None if view is None else marshal.dumps(view)


def _view(data: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """split's view, checking the identity fields on the way (one pass): None where one is of
    the wrong type."""
    view = {}
    for k, v in data.items():
        if k in TOP_FIELDS:
            if not isinstance(v, str):
                return None
        else:
            view[k] = v
    node = view.get("node", {})
    if not isinstance(node, dict):
        return None
    rest = {}
    for k, v in node.items():
        if k in NODE_FIELDS:
            if k == "found_via":
                if not isinstance(v, dict) or not all(isinstance(x, str) for x in v.values()):
                    return None
            elif v is not None and not isinstance(v, str):
                return None
        else:
            rest[k] = v
    if "node" in view:
        view["node"] = rest
    gpus = view.get("gpus")
    if isinstance(gpus, dict) and isinstance(gpus.get("gpus"), list):
        cards = []
        for g in gpus["gpus"]:
            if isinstance(g, dict):
                card = {}
                for k, v in g.items():
                    if k in GPU_FIELDS:
                        if v is not None and not isinstance(v, str):
                            return None
                    else:
                        card[k] = v
                g = card
            cards.append(g)
        view["gpus"] = dict(gpus, gpus=cards)
    return view


def problem(data: Dict[str, Any]) -> bool:
    """True when an identity field holds what the schema does not allow there."""
    return _view(data) is None
