"""structpos: a structured-position compiler for trees, tables, documents and graphs.

parsers -> :class:`Structure` -> coordinates -> token alignment -> encoders.

Examples
--------
Parse, compute coordinates per node, and give each token (character offsets from any
tokenizer) the node that covers it:

>>> import structpos
>>> s = structpos.parse('{"a": [1, 2]}', "json")
>>> [str(label) for label in s.labels]
['object', 'member:a', 'array', 'number', 'number']
>>> structpos.compute_coords(s, "tree")["depth"].tolist()
[0, 1, 2, 3, 3]
>>> structpos.align(s, [[1, 4], [7, 8], [10, 11]]).node.tolist()  # '"a"', '1', '2'
[1, 3, 4]

Every error a user can cause is a :class:`StructposError`, naming the input and the position:

>>> structpos.parse('{"a": [1, 2', "json", name="r.json")
Traceback (most recent call last):
...
structpos.exceptions.ParseError: r.json at line:col 1:12: expected ',' or ']' after an array element, found end of input
>>> issubclass(structpos.ParseError, structpos.StructposError)
True
"""

from . import exceptions
from .align import align  # after this the name is the function, not the submodule of the same name
from .coords import compute as compute_coords
from .exceptions import *  # noqa: F403  (the error hierarchy, re-exported at top level)
from .parsers import parse
from .structure import Structure

__version__ = "0.1.0"
__all__ = ["Structure", "parse", "compute_coords", "align", "exceptions", "__version__", *exceptions.__all__]
