"""The parallel mesh of a model: ParallelConfig(dp, cfg, ring, ulysses, pp, tp), as TeleFuser's device mesh.

    from dtorch.parallel import ParallelConfig
    config = ParallelConfig(ring=2, ulysses=2)
    mesh = config.device_mesh("cpu")          # dims ("dp", "cfg", "ring", "ulysses", "pp", "tp"), shape (1, 1, 2, 2, 1, 1)
    mesh["ulysses"]                           # the Ulysses sub-mesh of the first device
    config.ulysses_group(3)                   # [2, 3]: the ranks device 3 runs its Ulysses all-to-alls with

The mesh keeps every dimension, a degree of 1 included, so code written for one configuration finds every name in
any other (org.dtorch.core.distributed.ParallelConfig does the work)."""

from __future__ import annotations

from .. import _bridge
from ..distributed_spec import DeviceMesh, _is_int

_NAMES = ("dp", "cfg", "ring", "ulysses", "pp", "tp")


class ParallelConfig:
    """The degrees of data, classifier-free-guidance, ring, Ulysses, pipeline and tensor parallelism (each >= 1).

    device_mesh() lays them out over the runtime's devices in that order, outermost first; their product must be the
    runtime's device count (a ValueError names each factor otherwise)."""

    def __init__(self, dp: int = 1, cfg: int = 1, ring: int = 1, ulysses: int = 1, pp: int = 1, tp: int = 1) -> None:
        for name, degree in zip(_NAMES, (dp, cfg, ring, ulysses, pp, tp)):
            if not _is_int(degree):
                raise TypeError("ParallelConfig: %s must be an int, got %r" % (name, degree))
            if degree < 1:
                raise ValueError("ParallelConfig: %s must be >= 1, got %d" % (name, degree))
        self.dp, self.cfg, self.ring, self.ulysses, self.pp, self.tp = dp, cfg, ring, ulysses, pp, tp

    @property
    def degrees(self) -> tuple[int, int, int, int, int, int]:
        """The degrees in mesh order: (dp, cfg, ring, ulysses, pp, tp)."""
        return (self.dp, self.cfg, self.ring, self.ulysses, self.pp, self.tp)

    @property
    def world_size(self) -> int:
        n = 1
        for d in self.degrees:
            n *= d
        return n

    def device_mesh(self, device_type: str | None = None) -> DeviceMesh:
        """The runtime's mesh with dimensions ("dp", "cfg", "ring", "ulysses", "pp", "tp"), of the runtime's device type
        unless device_type says otherwise ("cpu" on a CUDA runtime is its workers' host memory, as for DeviceMesh)."""
        if device_type is None:
            device_type = _bridge.bridge().deviceType()
        return DeviceMesh._wrap(_bridge.call(_bridge.bridge().parallelMesh, device_type, list(self.degrees)))

    def dp_group(self, rank: int) -> list[int]:
        """The data-parallel replicas rank belongs to, one rank each."""
        return self._group(rank, "dp")

    def cfg_group(self, rank: int) -> list[int]:
        """The ranks computing rank's other guidance branches, rank included."""
        return self._group(rank, "cfg")

    def ring_group(self, rank: int) -> list[int]:
        """The ranks rank's ring attention rotates K and V between."""
        return self._group(rank, "ring")

    def ulysses_group(self, rank: int) -> list[int]:
        """The ranks of rank's Ulysses all-to-alls."""
        return self._group(rank, "ulysses")

    def sp_group(self, rank: int) -> list[int]:
        """rank's whole sequence-parallel group: its ring and Ulysses dimensions, ring-major."""
        return self._group(rank, "ring", "ulysses")

    def pp_group(self, rank: int) -> list[int]:
        """rank's pipeline: one rank per stage, first stage first."""
        return self._group(rank, "pp")

    def tp_group(self, rank: int) -> list[int]:
        """rank's tensor-parallel group."""
        return self._group(rank, "tp")

    def _group(self, rank, *names):
        mesh = self.device_mesh()
        return list(_bridge.bridge().meshIds(_bridge.call(_bridge.bridge().subMesh, mesh._java, rank, list(names))))

    def __repr__(self):
        return "ParallelConfig(%s)" % ", ".join("%s=%r" % (n, d) for n, d in zip(_NAMES, self.degrees))


__all__ = ["ParallelConfig"]
