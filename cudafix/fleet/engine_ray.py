"""Gather snapshots through Ray: one task pinned to each alive node.

Each task runs with NodeAffinitySchedulingStrategy(node_id, soft=False) — it runs on that node or
fails, never elsewhere (https://docs.ray.io/en/latest/ray-core/scheduling/index.html) — and
probes the worker's own interpreter and environment (what the job's tasks get there), naming its
node with Ray's node id.  Ray is imported only here: it is not a dependency of cudafix.
"""

from __future__ import annotations

import os
import socket
from typing import List, Optional, Tuple

from cudafix.fleet.inputs import Document, EngineError, InputError, Item, node_document



def snapshot_task(node_id: str) -> str:
    """Runs on the node: its snapshot as JSON (module-level, so workers import it by name)."""
    from cudafix.probes import take_snapshot

    env = dict(os.environ, CUDAFIX_NODE_ENGINE="ray", CUDAFIX_NODE_ID=node_id)
    return take_snapshot(env=env).to_json(indent=None)


def _reachable(address: str, timeout: float = 5.0) -> Optional[str]:
    """Why host:port takes no connection (None: it does).  ray.init itself retries for minutes."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        return None  # a ray:// URL or a name ray resolves itself
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def gather(address: Optional[str] = None, timeout: float = 600) -> Tuple[List[Document], List[InputError]]:
    if address:
        why = _reachable(address)
        if why:
            raise EngineError("cannot connect to a Ray cluster at %s: %s" % (address, why))
    try:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    except ImportError as exc:
        raise EngineError("Ray is not installed in this environment (%s): pip install ray" % exc) from None
    try:
        ray.init(address=address or "auto", logging_level="ERROR", log_to_driver=False, ignore_reinit_error=True)
    except Exception as exc:  # ConnectionError, RuntimeError: no cluster at that address
        raise EngineError("cannot connect to a Ray cluster at %s: %s" % (address or "auto", str(exc).splitlines()[0])) from None
    try:
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        task = ray.remote(num_cpus=0, max_retries=0)(snapshot_task)
        refs = [(n["NodeID"], task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote(n["NodeID"]))
                for n in nodes]
        docs: List[Document] = []
        errors: List[InputError] = []
        ready, _ = ray.wait([r for _, r in refs], num_returns=len(refs), timeout=timeout)
        done = set(ready)
        for node_id, ref in refs:
            name = "ray node %s" % node_id[:12]
            if ref not in done:
                errors.append(InputError(name, "no snapshot within %d s" % timeout))
                continue
            try:
                text = ray.get(ref)
            except Exception as exc:  # the task failed on that node
                errors.append(InputError(name, str(exc).strip().splitlines()[-1]))
                continue
            item = node_output(node_id, text)
            (errors if isinstance(item, InputError) else docs).append(item)  # type: ignore[arg-type]
        return docs, errors
    finally:
        ray.shutdown()


def node_output(node_id: str, text: str) -> Item:
    """One Ray node's task output: exactly one document, named by the node Ray ran it on (its
    first 12 hex digits, as the report names Ray nodes): a node's output can neither pass for
    another node nor bring more nodes with it."""
    item = node_document("ray node %s" % node_id[:12], text.encode("utf-8", "replace"))
    if isinstance(item, Document):
        item.name = node_id[:12]
    return item
