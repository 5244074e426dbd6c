"""structpos: a structured-position compiler for trees, tables, documents and graphs.

parsers -> :class:`Structure` -> coordinates -> token alignment -> encoders.
"""

from . import exceptions
from .coords import compute as compute_coords
from .exceptions import *  # noqa: F403  (the error hierarchy, re-exported at top level)
from .parsers import parse
from .structure import Structure

__version__ = "0.1.0"
__all__ = ["Structure", "parse", "compute_coords", "align", "exceptions", "__version__", *exceptions.__all__]


def __getattr__(name):
    if name == "align":
        from .align import align

        return align
    raise AttributeError(name)
