"""`cudafix fleet`: one snapshot per node, compared (docs/fleet.md).

inputs  -> snapshot documents from files, a directory, stdin (any transport), or gathered through
           Slurm (slurm.py) / Ray (ray.py);
compare -> per node the facts a distributed job needs to agree on, nodes grouped by them, the
           majority first, every other node named with what differs; each node's findings
           (the same rules as `cudafix check`) aggregated rule x nodes;
checks  -> the fleet-only rules (versions that differ between nodes);
render  -> text and JSON (schema cudafix.fleet/1).
"""
