"""The keys only a ``kind = "slurm"`` cluster takes, as :class:`SlurmSettings` (its
``Cluster.settings``): the allocation it takes or asks for, what each step asks for, Pyxis, the
login node, and what happens at the allocation's limit. cluster/slurm.py and
cluster/kind_slurm.py read them (``SlurmSettings.of(cluster)``).

Its nodes are not here: ``nodes = N`` sizes the placeholders of ``Cluster.hosts`` until the
allocation is held (matrix/kinds.py: the kind's nodes are "count").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Self

from pytest_ppsweep.matrix.kindsettings import KindSettings
from pytest_ppsweep.matrix.model import Cluster
from pytest_ppsweep.matrix.schema import HOSTNAME, USER_NAME, Reader, optional_matching

__all__ = ["SlurmSettings", "with_slurm"]

_JOBID = re.compile(r"[0-9]+")
_TIME = re.compile(r"[0-9]+(-[0-9]{1,2})?(:[0-9]{1,2}){0,2}")
_MEM = re.compile(r"[0-9]+[KMGT]?")
_GRES_ONE = r"[A-Za-z][A-Za-z0-9_]*(:[A-Za-z0-9_.-]+)*"
_GRES = re.compile(rf"{_GRES_ONE}(,{_GRES_ONE})*")
_ABS_PATH = re.compile(r"/[A-Za-z0-9_./-]*")


@dataclass(frozen=True)
class SlurmSettings(KindSettings):
    """A slurm cluster's own settings. Its hosts are placeholders until the allocation is taken
    (``jobid``) or made (salloc with these settings), then its nodes."""

    KEYS: ClassVar[tuple[str, ...]] = (
        "jobid", "partition", "account", "time", "request_gpus", "salloc_options",
        "srun_options", "container_image", "login", "exclusive", "cpus_per_task", "mem", "gres",
        "on_limit", "time_margin_s", "container_cache")

    jobid: str = ""  # the allocation taken as it is ("": one is made with salloc)
    partition: str = ""
    account: str = ""
    time: str = ""
    request_gpus: bool = True  # salloc --gpus-per-node <gpus_per_node>
    salloc_options: tuple[str, ...] = ()
    srun_options: tuple[str, ...] = ()
    # Pyxis: srun --container-image (the cluster's mounts: --container-mounts)
    container_image: str = ""
    # the login node the Slurm commands run on, over SSH with the ssh_* keys ("": this host)
    login: str = ""
    # what the allocation and each step ask for (cluster/slurm.py: salloc_argv, step_resources)
    exclusive: bool = True  # salloc --exclusive
    cpus_per_task: int = 0  # 0: every CPU the allocation has on the node
    mem: str = "0"  # salloc/srun --mem ("0": all of the node's memory)
    gres: str = ""  # salloc/srun --gres instead of --gpus-per-node
    # before each layout: the allocation's time left vs the layout's ETA + margin, and after a
    # node failure: "renew" (a new allocation without the failed nodes) or "stop" (resumable)
    on_limit: str = "renew"
    time_margin_s: int = 120
    # Pyxis: where each node keeps the image imported once as a squashfs (enroot import)
    container_cache: str = "/tmp/ppsweep-containers"
    # learnt from the allocation (cluster/slurm.resolve), never read from the file: the CPUs it
    # holds on each node (the fewest of any node), what a step's task asks for when
    # cpus_per_task is 0
    node_cpus: int = 0

    @classmethod
    def read(cls, table: Reader) -> Self:
        c = table
        return cls(
            jobid=optional_matching(c, "jobid", _JOBID, "a Slurm job id (digits)"),
            partition=optional_matching(c, "partition", USER_NAME, "a partition name"),
            account=optional_matching(c, "account", USER_NAME, "an account name"),
            time=optional_matching(c, "time", _TIME,
                                   "a Slurm time limit ([D-]HH:MM:SS or minutes)"),
            request_gpus=c.flag("request_gpus", default=True),
            salloc_options=tuple(c.str_list("salloc_options", default=[])),
            srun_options=tuple(c.str_list("srun_options", default=[])),
            container_image=c.text("container_image", default=""),
            login=optional_matching(c, "login", HOSTNAME, "a login node's host name or address"),
            exclusive=c.flag("exclusive", default=True),
            cpus_per_task=c.integer("cpus_per_task", default=0, minimum=0),
            mem=optional_matching(c, "mem", _MEM, "a Slurm memory size (digits, then K, M, G or "
                                  "T; 0: all of the node's)") or "0",
            gres=optional_matching(c, "gres", _GRES,
                                   "a Slurm gres list (e.g. gpu:8 or gpu:h200:8)"),
            on_limit=c.choice("on_limit", ("renew", "stop"), default="renew"),
            time_margin_s=c.integer("time_margin_s", default=120, minimum=0),
            container_cache=optional_matching(c, "container_cache", _ABS_PATH,
                                              "an absolute directory path on the nodes")
            or "/tmp/ppsweep-containers",
        )


def with_slurm(cluster: Cluster, **changes: Any) -> Cluster:
    """``cluster`` with its Slurm settings changed (``changes``: fields of SlurmSettings), as
    the allocation it takes (cluster/slurm.py) or a test's cluster."""
    return replace(cluster, settings=replace(SlurmSettings.of(cluster), **changes))
