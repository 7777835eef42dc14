"""What one kind of cluster reads of its ``[clusters.<name>]`` table beyond the keys every kind
takes: the base type of each kind's own settings (``Cluster.settings``).

A kind with keys of its own (Slurm: matrix/slurmsettings.py) subclasses :class:`KindSettings`
as a frozen dataclass, names its keys in ``KEYS`` and reads them in ``read``; its row of the
table of kinds (matrix/kinds.py) names the type. :class:`~pytest_ppsweep.matrix.model.Cluster`
holds the object and knows nothing of its fields, so a new kind's keys never touch the model
every kind shares. Its code (cluster/kind_*.py) takes them back with ``<Type>.of(cluster)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Protocol, Self

from pytest_ppsweep.matrix.schema import Reader

__all__ = ["KindSettings"]


class _HasSettings(Protocol):
    """A cluster, as far as its settings go (matrix/model.py's Cluster; not imported here, since
    the model imports this module)."""

    @property
    def name(self) -> str: ...

    @property
    def settings(self) -> KindSettings | None: ...


@dataclass(frozen=True)
class KindSettings:
    """One kind's own settings: every field has the default the kind uses when its key is
    absent, so ``Type()`` is a cluster of that kind that sets none of them."""

    # the keys of the cluster's table it reads, in the order the parser reads them
    KEYS: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def read(cls, table: Reader) -> Self:
        """The settings of one ``[clusters.<name>]`` table (``table``), each key checked as it
        is read: a bad value is a MatrixError naming file, key, expected and found."""
        raise NotImplementedError

    @classmethod
    def of(cls, cluster: _HasSettings) -> Self:
        """``cluster``'s settings of this type; the defaults when it has none (a cluster built
        in code rather than parsed from a file)."""
        settings = cluster.settings
        if settings is None:
            return cls()
        if not isinstance(settings, cls):
            raise TypeError(f"cluster {cluster.name!r}: expected {cls.__name__}, found "
                            f"{type(settings).__name__}")
        return settings
