"""The all-reduce microbenchmark per TP domain (seeds §9.2): which TP groups a layout has and how
far each spans (cluster description, ``nvidia-smi topo -m``), a self-contained torch worker
shipped to the nodes (``allreduce_worker.py``, never imported here) or nccl-tests'
``all_reduce_perf``, their output parsed, failures named by node and rank, results in the run
folder (``comm.csv``, ``comm_summary.csv``) and the §9.2 table.
"""

from __future__ import annotations
