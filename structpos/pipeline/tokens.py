"""Token-level rows for ``structpos encode --tokenizer``: input ids and per-token coordinates.

A local tokenizer — a HF ``tokenizers`` ``tokenizer.json`` file, or a directory holding one or a
``transformers`` tokenizer — splits each structure's source text; tokens are aligned to nodes
by character offsets (:func:`structpos.align.align`: deepest covering node, flags for
special / outside / straddling / whitespace tokens) and every per-node coordinate is gathered
per token (``-1`` where a token has no node). Nothing is downloaded: directories are opened
with ``local_files_only=True``.

Columns added to each row (one list per row, ``T`` tokens):

* ``input_ids`` (T,), ``token_start`` / ``token_end`` (T,) character offsets,
  ``token_node`` (T,) and ``token_flags`` (T,) (the alignment);
* ``tok_<name>`` (T, …) for every per-node coordinate column ``<name>`` of the row.

So a training job reads tokens and positions directly; ``tok_<name>`` equals
:func:`structpos.align.token_coords` of the same structure and offsets.

Examples
--------
>>> from tokenizers import Tokenizer, models, pre_tokenizers
>>> tok = Tokenizer(models.WordLevel({"[UNK]": 0, "a": 1, ":": 2, "1": 3}, unk_token="[UNK]"))
>>> tok.pre_tokenizer = pre_tokenizers.Whitespace()
>>> import structpos
>>> s = structpos.parse('{"a": 1}', "json")
>>> cols = token_columns(s, {"depth": structpos.compute_coords(s, "tree")["depth"]}, tok)
>>> sorted(cols)
['input_ids', 'tok_depth', 'token_end', 'token_flags', 'token_node', 'token_start']
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..exceptions import InputError, SpecError

__all__ = ["add_token_columns", "load_tokenizer", "token_columns", "tokenize"]

_LOADED: dict[str, Any] = {}


def load_tokenizer(path: str | os.PathLike) -> Any:
    """A ``tokenizers.Tokenizer`` (``tokenizer.json``) or a local ``transformers`` fast tokenizer, cached per process.

    Parameters
    ----------
    path : str or path
        A ``tokenizer.json`` file, or a directory with one (or with a transformers tokenizer).

    Returns
    -------
    object
        The tokenizer.

    Raises
    ------
    SpecError
        The path does not exist or holds no tokenizer (a file that is not a ``tokenizer.json``
        included, named in the message).

    Examples
    --------
    >>> load_tokenizer("/nonexistent/tokenizer.json")
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: /nonexistent/tokenizer.json: no tokenizer file or directory here
    """
    key = str(Path(path).resolve())
    if key in _LOADED:
        return _LOADED[key]
    p = Path(path)
    if not p.exists():
        raise SpecError("no tokenizer file or directory here", name=str(path))
    if p.is_dir() and (p / "tokenizer.json").is_file():
        p = p / "tokenizer.json"
    if p.is_file():
        tok = _tokenizer_file(p, str(path))
    elif not p.is_dir():
        raise SpecError("not a tokenizer.json file or a tokenizer directory", name=str(path))
    else:
        try:
            from transformers import AutoTokenizer

            tok = AutoTokenizer.from_pretrained(str(p), local_files_only=True, use_fast=True)  # type: ignore[assignment]  # a fast HF tokenizer, used through the same calls
        except Exception as e:  # any failure to load: one clear error naming the path
            raise SpecError(f"cannot load a local tokenizer: {e}", name=str(path)) from e
        if not getattr(tok, "is_fast", False):
            raise SpecError("a fast tokenizer (with offsets) is needed", name=str(path))
    _LOADED[key] = tok
    return tok


def _tokenizer_file(p: Path, name: str) -> Any:
    """``tokenizers.Tokenizer.from_file``, its failures one :class:`SpecError` naming the file."""
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise SpecError(
            "reading a tokenizer.json needs the 'tokenizers' package (pip install tokenizers)", name=name
        ) from None
    try:
        return Tokenizer.from_file(str(p))
    except Exception as e:  # tokenizers raises a bare Exception for any unreadable file
        reason = " ".join(str(e).split())[:200] or type(e).__name__
        raise SpecError(f"not a tokenizer.json of the tokenizers library ({reason})", name=name) from None


def tokenize(tokenizer: Any, text: str) -> tuple[np.ndarray, np.ndarray]:
    """``(input_ids (T,), offsets (T, 2))`` with special tokens, for either tokenizer type.

    Parameters
    ----------
    tokenizer : tokenizers.Tokenizer or transformers fast tokenizer
        As :func:`load_tokenizer` returns.
    text : str
        The text to split.

    Returns
    -------
    input_ids : numpy.ndarray
        ``int64`` of shape ``(T,)``, special tokens included.
    offsets : numpy.ndarray
        ``int64`` of shape ``(T, 2)``: each token's ``[start, end)`` character offsets.

    Examples
    --------
    >>> from tokenizers import Tokenizer, models, pre_tokenizers
    >>> tok = Tokenizer(models.WordLevel({"[UNK]": 0, "hi": 1}, unk_token="[UNK]"))
    >>> tok.pre_tokenizer = pre_tokenizers.Whitespace()
    >>> ids, off = tokenize(tok, "hi there")
    >>> ids.tolist(), off.tolist()
    ([1, 0], [[0, 2], [3, 8]])
    """
    if hasattr(tokenizer, "encode") and hasattr(tokenizer, "get_vocab_size"):  # tokenizers.Tokenizer
        enc = tokenizer.encode(text)
        ids, offsets = enc.ids, enc.offsets
    else:
        enc = tokenizer(text, return_offsets_mapping=True, add_special_tokens=True)
        ids, offsets = enc["input_ids"], enc["offset_mapping"]
    return np.asarray(ids, dtype=np.int64), np.asarray(offsets, dtype=np.int64).reshape(-1, 2)


def token_columns(structure, coords: Mapping[str, np.ndarray], tokenizer: Any) -> dict[str, np.ndarray]:
    """The token columns of one structure (see the module docstring).

    Parameters
    ----------
    structure : Structure
        A structure with ``source`` text.
    coords : mapping of str to numpy.ndarray
        Coordinate columns; those with one entry per node (first axis ``num_nodes``) are
        gathered per token as ``tok_<name>``, the others ignored.
    tokenizer : tokenizers.Tokenizer or transformers fast tokenizer
        As :func:`load_tokenizer` returns.

    Returns
    -------
    dict of str to numpy.ndarray
        ``input_ids``, ``token_start``, ``token_end``, ``token_node`` (``-1``: no node),
        ``token_flags`` (the flags of :func:`structpos.align.align`) and ``tok_<name>`` per node column
        (``-1`` where a token has no node).

    Raises
    ------
    InputError
        The structure has no source text to tokenize (e.g. a graph).

    Examples
    --------
    Each token takes the coordinates of the deepest node covering it: in ``{"a": 1}`` the
    tokens ``"`` and ``a"`` lie in the member (depth 1), ``1`` in the number (depth 2):

    >>> from tokenizers import Tokenizer, models, pre_tokenizers
    >>> import structpos
    >>> tok = Tokenizer(models.WordLevel({"[UNK]": 0, "a": 1, "1": 2}, unk_token="[UNK]"))
    >>> tok.pre_tokenizer = pre_tokenizers.Whitespace()
    >>> s = structpos.parse('{"a": 1}', "json")
    >>> cols = token_columns(s, {"depth": structpos.compute_coords(s, "tree")["depth"]}, tok)
    >>> cols["token_start"].tolist(), cols["token_node"].tolist(), cols["tok_depth"].tolist()
    ([0, 2, 3, 6, 7], [0, 1, 1, 2, 0], [0, 1, 1, 2, 0])
    >>> token_columns(structpos.parse([[0], [1]], "graph"), {}, tok)
    Traceback (most recent call last):
    ...
    structpos.exceptions.InputError: <edge_index>: --tokenizer needs a structure with source text (not a graph)
    """
    from ..align import align

    text = getattr(structure, "source", None)
    if not isinstance(text, str):
        raise InputError("--tokenizer needs a structure with source text (not a graph)", name=structure.name)
    ids, offsets = tokenize(tokenizer, text)
    al = align(structure, offsets)
    per_node = {k: v for k, v in coords.items() if np.ndim(v) >= 1 and len(v) == structure.num_nodes}
    out = {
        "input_ids": ids,
        "token_start": offsets[:, 0],
        "token_end": offsets[:, 1],
        "token_node": al.node.astype(np.int64),
        "token_flags": al.flags.astype(np.int64),
    }
    for name, vals in al.take(per_node, fill=-1).items():
        out[f"tok_{name}"] = vals
    return out


def add_token_columns(row: dict, structure, tokenizer: str | os.PathLike | None) -> None:
    """Add the token columns to an encoded ``row`` in place when a ``tokenizer`` path is given.

    Parameters
    ----------
    row : dict
        An encoded row with a ``coords`` dict (and optionally ``parent``, gathered as
        ``tok_parent``); its ``coords`` gains the columns of :func:`token_columns`.
    structure : Structure
        The row's structure.
    tokenizer : str, os.PathLike or None
        The tokenizer path (:func:`load_tokenizer`); ``None`` adds nothing.

    Returns
    -------
    None
        ``row`` is changed in place; unchanged when no tokenizer is named.

    Raises
    ------
    SpecError
        The tokenizer path holds no tokenizer.
    InputError
        The structure has no source text.

    Examples
    --------
    >>> import structpos, tempfile, os
    >>> from tokenizers import Tokenizer, models, pre_tokenizers
    >>> tok = Tokenizer(models.WordLevel({"[UNK]": 0, "7": 1}, unk_token="[UNK]"))
    >>> tok.pre_tokenizer = pre_tokenizers.Whitespace()
    >>> path = os.path.join(tempfile.mkdtemp(), "tokenizer.json")
    >>> tok.save(path)
    >>> s = structpos.parse("[7]", "json")
    >>> row = {"coords": {}, "parent": s.parent}
    >>> add_token_columns(row, s, None)  # no tokenizer: nothing to do
    >>> row["coords"]
    {}
    >>> add_token_columns(row, s, path)
    >>> row["coords"]["input_ids"].tolist(), row["coords"]["tok_parent"].tolist()
    ([0, 1, 0], [-1, 0, -1])
    """
    if not tokenizer:
        return
    coords = dict(row["coords"])
    for base in ("parent",):
        if row.get(base) is not None and base not in coords:
            coords[base] = np.asarray(row[base])
    row["coords"].update(token_columns(structure, coords, load_tokenizer(tokenizer)))
