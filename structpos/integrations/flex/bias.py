"""Distances to biases: ALiBi-style or learned tables, token distance, FIRE's learned bias per score.

A distance ``d`` (``-1``: unreachable) becomes a bias as in :mod:`structpos.encoders.attention_bias`:
``−slope_h·d`` or a learned ``table[bucket(d), h]`` (:func:`distance_to_bias`);
:func:`fire_score_mod` turns any distance function (:func:`token_distance_fn`,
:func:`~structpos.integrations.flex.tree_distance_fn`, :func:`~structpos.integrations.flex.spd_distance_fn`)
into FIRE's bias ``f_θ(ψ(d)/ψ(max(L_q, L_thr)))``.

Examples
--------
>>> i = torch.arange(3)
>>> d = token_distance_fn()(0, i[:, None], i[None, :])
>>> distance_to_bias(d, torch.tensor(0), slopes=torch.tensor([1.0]))
tensor([[-0., -inf, -inf],
        [-1., -0., -inf],
        [-2., -1., -0.]])
"""

from __future__ import annotations

import torch

from ...exceptions import InputError, ShapeError, SpecError
from ._common import DistanceFn, ScoreMod, _built_for, _int_arg, _token_sizes


def distance_to_bias(
    d: torch.Tensor,
    h: torch.Tensor,
    slopes: torch.Tensor | None = None,
    table: torch.Tensor | None = None,
    unreachable: float = float("-inf"),
) -> torch.Tensor:
    """Bias of integer distance(s) ``d`` for head(s) ``h``; ``d < 0`` means unreachable.

    With ``slopes`` (``(H,)``): ``−slopes[h]·d`` and ``unreachable`` where ``d < 0``, as
    :func:`~structpos.encoders.alibi_distance_bias`. With ``table`` (``(M + 2, H)``, e.g.
    ``SPDBias.table.weight``): ``table[min(d, M), h]`` and row ``M + 1`` where ``d < 0``, as
    :class:`~structpos.encoders.SPDBias`.

    Parameters
    ----------
    d : torch.Tensor
        Integer distances (any shape); negative: unreachable.
    h : torch.Tensor
        Head index (broadcast with ``d``).
    slopes : torch.Tensor, optional
        ``(H,)`` ALiBi-style slopes.
    table : torch.Tensor, optional
        ``(M + 2, H)`` learned biases: rows ``0..M`` by distance (clamped to ``M``), row
        ``M + 1`` for unreachable.
    unreachable : float
        The bias of unreachable pairs with ``slopes``.

    Returns
    -------
    torch.Tensor
        The bias, shaped like ``d`` broadcast with ``h``.

    Raises
    ------
    SpecError
        Neither or both of ``slopes`` and ``table`` given.

    Examples
    --------
    >>> distance_to_bias(torch.tensor([0, 2, -1]), torch.tensor(0), slopes=torch.tensor([0.5]))
    tensor([-0., -1., -inf])
    >>> table = torch.arange(8.0).reshape(4, 2)  # M = 2; row 3 is "unreachable"
    >>> distance_to_bias(torch.tensor([0, 1, 5, -1]), torch.tensor(0), table=table)
    tensor([0., 2., 4., 6.])
    """
    if (slopes is None) == (table is None):
        raise SpecError("give exactly one of slopes (ALiBi-style) or table (learned, SPDBias-style)")
    if slopes is not None:
        bias = -slopes[h] * d.to(slopes.dtype)
        return torch.where(d < 0, torch.full_like(bias, unreachable), bias)
    assert table is not None  # exactly one of slopes / table is given (checked above)
    top = table.shape[0] - 2
    bucket = torch.where(d < 0, torch.full_like(d, top + 1), d.clamp(max=top))
    return table[bucket, h]


def _check_bias_params(slopes, table) -> tuple[torch.Tensor | None, torch.Tensor | None, dict]:
    """``(slopes, table, sizes)`` after checking that exactly one is given, ``slopes`` ``(H,)`` or
    ``table`` ``(M + 2, H)`` with ``H ≥ 1``; ``sizes`` records ``H`` (see :func:`._common._built_for`)."""
    if (slopes is None) == (table is None):
        raise SpecError("give exactly one of slopes (ALiBi-style) or table (learned, SPDBias-style)")
    if slopes is not None:
        slopes = torch.as_tensor(slopes)
        if slopes.dim() != 1 or not slopes.numel() or slopes.is_complex() or slopes.dtype == torch.bool:
            raise ShapeError(
                f"slopes must be a real tensor of shape (H,), H ≥ 1; given {slopes.dtype} {tuple(slopes.shape)}"
            )
        slopes = slopes.to(torch.float32)
        return slopes, None, {"heads": (slopes.shape[0], f"slopes has H = {slopes.shape[0]}")}
    table = torch.as_tensor(table)
    if table.dim() != 2 or table.shape[0] < 2 or table.shape[1] < 1 or table.is_complex() or table.dtype == torch.bool:
        raise ShapeError(
            f"table must be a real tensor of shape (max_distance + 2, H); given {table.dtype} {tuple(table.shape)}"
        )
    return None, table, {"heads": (table.shape[1], f"table is (max_distance + 2, H) = {tuple(table.shape)}")}


def distance_score_mod(
    distance: DistanceFn,
    *,
    slopes: torch.Tensor | None = None,
    table: torch.Tensor | None = None,
    unreachable: float = float("-inf"),
) -> ScoreMod:
    """``score + bias(d(b, q_idx, kv_idx), h)`` for any distance function (:func:`distance_to_bias` per score).

    The score_mod behind :func:`~structpos.integrations.flex.tree_distance_score_mod` and
    :func:`~structpos.integrations.flex.spd_score_mod`; give it any other distance the same way.

    Parameters
    ----------
    distance : callable
        ``dist(b, q_idx, kv_idx)`` → integer distance, negative when unreachable
        (:func:`token_distance_fn`, :func:`~structpos.integrations.flex.tree_distance_fn`, ...).
    slopes, table, unreachable
        See :func:`distance_to_bias`.

    Returns
    -------
    callable
        ``score_mod(score, b, h, q_idx, kv_idx)``.

    Raises
    ------
    SpecError
        Neither or both of ``slopes`` and ``table`` given.
    ShapeError
        ``slopes`` not ``(H,)`` or ``table`` not ``(M + 2, H)`` (real, ``H ≥ 1``).

    Notes
    -----
    The score_mod reads ``slopes[h]`` / ``table[:, h]`` and whatever ``distance`` reads: it
    records ``H`` and the sizes ``distance`` was built for, and
    :func:`~structpos.integrations.flex.flex` refuses more heads, batch rows or positions with a
    :class:`~structpos.exceptions.ShapeError`.

    Examples
    --------
    Causal ALiBi as a score_mod (keys after the query are unreachable):

    >>> mod = distance_score_mod(token_distance_fn(), slopes=torch.tensor([0.5]))
    >>> i = torch.arange(3)
    >>> mod(torch.zeros(3, 3), 0, torch.tensor(0), i[:, None], i[None, :])
    tensor([[ 0.0000,    -inf,    -inf],
            [-0.5000,  0.0000,    -inf],
            [-1.0000, -0.5000,  0.0000]])
    """
    if not callable(distance):
        raise InputError(f"distance must be a callable dist(b, q_idx, kv_idx); given {type(distance).__name__}")
    slopes, table, heads = _check_bias_params(slopes, table)

    def score_mod(score, b, h, q_idx, kv_idx):
        d = distance(b, q_idx, kv_idx)
        return score + distance_to_bias(d, h, slopes, table, unreachable).to(score.dtype)

    return _built_for(score_mod, distance, **heads)


def token_distance_fn(causal: bool = True, offset: int = 0) -> DistanceFn:
    """``d(b, q_idx, kv_idx)``: token distance, ``q − kv`` (``-1`` for future keys) or ``|q − kv|``.

    Parameters
    ----------
    causal : bool
        ``q + offset − kv`` with keys after the query unreachable (``-1``); else ``|q + offset − kv|``.
    offset : int
        Cached tokens before the first query (``≥ 0``).

    Returns
    -------
    callable

    Raises
    ------
    SpecError
        ``offset`` not an integer ``≥ 0``.

    Examples
    --------
    >>> i = torch.arange(3)
    >>> token_distance_fn()(0, i[:, None], i[None, :]).tolist()
    [[0, -1, -1], [1, 0, -1], [2, 1, 0]]
    """
    offset = _int_arg(offset, "offset", 0)

    def dist(b, q_idx, kv_idx):
        d = q_idx + offset - kv_idx
        if causal:
            return torch.where(d < 0, torch.full_like(d, -1), d)
        return d.abs()

    return dist


def fire_score_mod(fire, distance: DistanceFn, query_scale: torch.Tensor) -> ScoreMod:
    """``score + FIRE bias`` of a structural distance, computed per score (no ``L × L`` tensor).

    The bias is :class:`~structpos.encoders.FIRE`'s ``f_θ(ψ(d)/ψ(max(L_q, L_thr)))_h`` with the
    same parameters (``c``, ``threshold``, the MLP) and ``unreachable`` for ``d < 0``; gradients
    reach them through FlexAttention.

    Parameters
    ----------
    fire : FIRE
        The module whose parameters are used.
    distance : callable
        ``dist(b, q_idx, kv_idx)`` (:func:`token_distance_fn`, :func:`tree_distance_fn`,
        :func:`spd_distance_fn`, or any function of those indices).
    query_scale : torch.Tensor
        ``(B, L)`` per-query ``L_q`` (for causal token distance: the query position;
        :func:`~structpos.encoders.row_max_distance` of a dense distance matrix gives FIRE's default).

    Returns
    -------
    callable
        ``score_mod(score, b, h, q_idx, kv_idx)``.

    Raises
    ------
    ShapeError
        ``query_scale`` not 2-D.
    InputError
        ``distance`` not callable.

    Notes
    -----
    The score_mod records the sizes it reads (``B, L`` of ``query_scale``, the FIRE module's
    ``num_heads``, and those ``distance`` was built for); :func:`~structpos.integrations.flex.flex`
    refuses larger inputs with a :class:`~structpos.exceptions.ShapeError`.

    Examples
    --------
    The score_mod on index grids is the dense bias :class:`~structpos.encoders.FIRE` computes:

    >>> from structpos.encoders import FIRE
    >>> fire = FIRE(num_heads=2)
    >>> i = torch.arange(4)
    >>> mod = fire_score_mod(fire, token_distance_fn(), i[None].float())
    >>> dense = fire(token_distance_fn()(0, i[:, None], i[None, :]), i.float())
    >>> torch.allclose(mod(torch.zeros(4, 4), 0, torch.tensor(1), i[:, None], i[None, :]), dense[1], atol=1e-6)
    True
    """
    if not callable(distance):
        raise InputError(f"distance must be a callable dist(b, q_idx, kv_idx); given {type(distance).__name__}")
    scale = torch.as_tensor(query_scale)
    if scale.dim() != 2:
        raise ShapeError(f"query_scale must be (B, L); given {tuple(scale.shape)}")
    sizes = _token_sizes(scale, "query_scale", "fire_score_mod")
    del sizes["kv"]  # query_scale is read at the query only
    scale = scale.to(fire.c.dtype).to(fire.c.device)
    # a 1-element tensor, not a Python float (dynamo would make it an unbacked symbol under dynamic shapes)
    unreachable = torch.tensor([fire.unreachable], dtype=fire.c.dtype, device=fire.c.device)

    def score_mod(score, b, h, q_idx, kv_idx):
        d = distance(b, q_idx, kv_idx)
        x = fire.normalize(d, scale[b, q_idx])
        bias = fire.head_bias(x, h)
        bias = torch.where(d < 0, unreachable[0], bias)
        return score + bias.to(score.dtype)

    heads = int(fire.num_heads)
    return _built_for(score_mod, distance, heads=(heads, f"FIRE(num_heads={heads})"), **sizes)
