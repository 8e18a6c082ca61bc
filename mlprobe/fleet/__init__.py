"""Fleets: many machines' reports in one document.

    reports (one per node: `mlprobe report` files, or Ray tasks, one per node)
      -> summary.py   each report read once, at this edge, into a NodeSummary: the facts a fleet
                      compares (small; the full report is dropped)
      -> group.py     nodes grouped by hardware; inside a group, the majority's driver, CUDA/ROCm and
                      framework builds, and the nodes that drifted from it
      -> document.py  the fleet report, a FleetDocument (fleet_version 1, fleet.schema.json); its
                      to_json is what `fleet merge|scan` write
      -> render.py (terminal table), html.py (one self-contained page): a fleet report's JSON read
         back into a FleetDocument and drawn from it; labels.py (Kubernetes node-feature-discovery
         labels of one machine, from its Facts and Plan)

model.py holds the typed values (contracts, model/contract.py) every step above hands on.
`load.py` reads report files a person hands over (hostile input is a clear error naming the file);
`ray_scan.py` runs one scan task per Ray node (Ray is imported only there, from `mlprobe[ray]`);
`task.py` is what runs on each node: the same report as `mlprobe report` (pipeline.node_report).
"""
