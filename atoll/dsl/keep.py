"""Keep, as the DSL offers it; defined in :mod:`atoll.materializer.keep`, where the builders recognise it."""
from ..materializer.keep import Keep

__all__ = ["Keep"]
