"""Fleets: many machines' reports in one document.

    reports (one per node: `mlprobe report` files, or Ray tasks, one per node)
      -> summary.py   each report boiled down to the facts a fleet compares (small, JSON-ready)
      -> group.py     nodes grouped by hardware; inside a group, the majority's driver, CUDA/ROCm and
                      framework builds, and the nodes that drifted from it
      -> document.py  the fleet report (fleet_version 1, fleet.schema.json)
      -> render.py (terminal table), html.py (one self-contained page), labels.py (Kubernetes
         node-feature-discovery labels of one machine)

`load.py` reads report files a person hands over (hostile input is a clear error naming the file);
`ray_scan.py` runs one scan task per Ray node (Ray is imported only there, from `mlprobe[ray]`);
`task.py` is what runs on each node: the same report builder as `mlprobe report`.
"""
