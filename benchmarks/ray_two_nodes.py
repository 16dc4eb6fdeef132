"""Benchmark: `grade batch --executor ray` on a local cluster of two nodes, against `--jobs 2`.

    python benchmarks/ray_two_nodes.py [--counts 10 50 200] [--cpus-per-node 1]

Two raylets on this machine (Ray's own ``ray.cluster_utils.Cluster``, which starts a head and
a second node as separate processes, as two machines would run them), each with
``--cpus-per-node`` CPUs, against the local executor with as many jobs in all. Both grade the
same generated class of 03 (benchmarks/batch_03.py's mix); the difference is what Ray costs:
starting its workers (each imports torch and the grader once), shipping each submission and
its report, and scheduling.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from batch_03 import make_submissions
from common import timed


def grade(folder: Path, out: Path, executor_args: list[str]) -> float:
    seconds, result = timed([sys.executable, "-m", "grader.cli", "batch", "assignments/03", str(folder),
                             "--out", str(out), "--device", "cpu", "--force", *executor_args])
    if result.returncode != 0:
        sys.exit(f"grade batch failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", type=int, nargs="+", default=[10, 50, 200])
    parser.add_argument("--cpus-per-node", type=int, default=1)
    args = parser.parse_args()

    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": args.cpus_per_node,
                                                            "include_dashboard": False})
    cluster.add_node(num_cpus=args.cpus_per_node)
    cluster.wait_for_nodes()
    jobs = 2 * args.cpus_per_node
    print(f"two raylets of {args.cpus_per_node} CPU each at {cluster.address}, against --jobs {jobs}")
    print(f"{'submissions':>11}  {'--jobs ' + str(jobs):>12}  {'ray, 2 nodes':>12}  ray / local")
    try:
        for count in args.counts:
            with tempfile.TemporaryDirectory() as tmp:
                folder = Path(tmp, "submissions")
                make_submissions(folder, count)
                local_s = grade(folder, Path(tmp, "local"), ["--jobs", str(jobs)])
                ray_s = grade(folder, Path(tmp, "ray"), ["--executor", "ray", "--ray-address", cluster.address])
            print(f"{count:>11}  {local_s:>11.1f}s  {ray_s:>11.1f}s  {ray_s / local_s:>10.2f}", flush=True)
    finally:
        cluster.shutdown()


if __name__ == "__main__":
    main()
