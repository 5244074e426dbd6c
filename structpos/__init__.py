"""structpos: a structured-position compiler for trees, tables, documents and graphs.

parsers -> :class:`Structure` -> coordinates -> token alignment -> encoders.
"""

from .structure import Structure, StructureError
from .parsers import parse
from .coords import compute as compute_coords

__version__ = "0.1.0"
__all__ = ["Structure", "StructureError", "parse", "compute_coords", "align", "__version__"]


def __getattr__(name):
    if name == "align":
        from .align import align

        return align
    raise AttributeError(name)
