"""Additive positional encodings: tree paths (Shiv & Quirk 2019) and Laplacian-eigenvector features.

**Tree path PE.** A node's position is the path of child indices from the root. With at most
``n`` children per node and ``k`` levels kept, the encoding of node ``i`` is ``k`` stacked
one-hot blocks of size ``n``: block ``l`` is ``e_{b_l} · γ^l`` where ``b_l`` is the sibling index
of the ancestor ``l`` steps above ``i`` (``l = 0``: ``i`` itself). Roots are all zeros; paths
longer than ``k`` keep their ``k`` most recent steps. The encoding of a child is its parent's,
shifted one block and prefixed with the child's own step — the stack structure that lets a
linear map move between parent and child positions.

**LapPE features.** :class:`LapPEEmbedding` maps ``k`` Laplacian eigenvectors (NaN-padded
columns allowed, as GraphGPS pads) and optionally their eigenvalues to a ``dim``-vector per
node; in training it flips each eigenvector's sign at random (the eigenvector sign is
arbitrary).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ..coords.tree import depth, root_path, sibling_index
from ..exceptions import ShapeError, SpecError
from ..structure import StructureError
from ._checks import as_real_tensor, check_count, check_flag, check_real, check_table_size
from ._tree import as_parent

__all__ = ["tree_path_pe", "tree_depth_sibling", "LapPEEmbedding"]


def tree_depth_sibling(tree) -> tuple[np.ndarray, np.ndarray]:
    """Depth and sibling index of every node of a tree.

    See :func:`structpos.coords.tree.depth` and :func:`~structpos.coords.tree.sibling_index`.

    Parameters
    ----------
    tree : Structure or array_like of int
        A tree :class:`~structpos.Structure` or a preorder parent array (``-1`` for roots,
        ``parent[i] < i``).

    Returns
    -------
    depth : numpy.ndarray
        ``(N,)`` int64 number of edges from the root.
    sibling : numpy.ndarray
        ``(N,)`` int64 index of the node among its parent's children (roots: 0).

    Raises
    ------
    StructureError
        ``tree`` is not a valid preorder parent array, or a structure without a parent array.

    Examples
    --------
    Root 0 with children 1 and 2; node 3 is the first child of node 2:

    >>> depth, sibling = tree_depth_sibling([-1, 0, 0, 2])
    >>> depth.tolist(), sibling.tolist()
    ([0, 1, 1, 2], [0, 0, 1, 0])
    """
    parent, _ = as_parent(tree)
    return depth(parent), sibling_index(parent)


def tree_path_pe(tree, max_depth: int, max_branch: int, decay: float = 1.0, clip: bool = False) -> np.ndarray:
    """Stacked one-hot root-path encoding (Shiv & Quirk 2019; see the module docstring).

    Built from :func:`structpos.coords.tree.root_path` (``keep="bottom"``).

    Parameters
    ----------
    tree : Structure or array_like of int
        A tree :class:`~structpos.Structure` or a preorder parent array.
    max_depth : int
        Levels ``k`` kept (the most recent steps of longer paths).
    max_branch : int
        Children per node ``n`` (size of each one-hot block).
    decay : float
        Per-level weight ``γ`` (finite): block ``l`` (``l`` steps above the node) is scaled by
        ``γ^l``, which must stay within float32 range for the deepest level used.
    clip : bool
        Map sibling indices ``≥ max_branch`` to ``max_branch − 1`` instead of raising.

    Returns
    -------
    numpy.ndarray
        ``(N, max_depth · max_branch)`` float32; roots are all zeros.

    Raises
    ------
    SpecError
        ``max_depth`` or ``max_branch`` not an integer ``≥ 1`` (or above 2²⁰), an output of more
        than 2²⁸ entries, ``decay`` not finite or ``|γ|^l`` past float32's range.
    StructureError
        A node's sibling index reaches ``max_branch`` and ``clip`` is False (names the node).

    Examples
    --------
    Node 3 is child 0 of node 2, itself child 1 of the root: block 0 is ``e_0``, block 1 is
    ``γ·e_1``. A child's encoding is its parent's shifted one block (times ``γ``):

    >>> pe = tree_path_pe([-1, 0, 0, 2], max_depth=2, max_branch=2, decay=0.5)
    >>> pe.tolist()
    [[0.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.5]]
    >>> bool((pe[3, 2:] == 0.5 * pe[2, :2]).all())
    True
    >>> tree_path_pe([-1, 0, 0, 0], max_depth=2, max_branch=2)
    Traceback (most recent call last):
    ...
    structpos.exceptions.ParseError: <parent array> at node 3: node 3 is child number 2 of node 0, beyond max_branch = 2 (pass clip=True)
    """
    max_depth = check_count(max_depth, "max_depth")
    max_branch = check_count(max_branch, "max_branch")
    decay = check_real(decay, "decay")
    parent, name = as_parent(tree)
    n = parent.size
    check_table_size("tree_path_pe output N × max_depth × max_branch", n, max_depth, max_branch)
    sib = sibling_index(parent)
    over = np.flatnonzero((sib >= max_branch) & (parent >= 0))
    if over.size and not clip:
        i = int(over[0])
        raise StructureError(
            f"node {i} is child number {sib[i]} of node {parent[i]}, beyond max_branch = {max_branch} (pass clip=True)",
            name=name,
            position=f"node {i}",
        )
    # Rows of root_path(keep="bottom") hold the last min(depth, k) steps, root side first
    # (sibling indices already clipped), so block l (l steps up) is column (steps − 1 − l).
    path, _ = root_path(parent, max_depth, max_branch, keep="bottom")
    rows, cols = np.nonzero(path >= 0)
    levels = (path >= 0).sum(axis=1)[rows] - 1 - cols
    _check_decay_range(decay, int(levels.max(initial=0)))
    out = np.zeros((n, max_depth, max_branch), dtype=np.float32)
    out[rows, levels, path[rows, cols]] = np.float32(decay) ** levels
    return out.reshape(n, max_depth * max_branch)


_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _check_decay_range(decay: float, top_level: int) -> None:
    """:class:`SpecError` when ``|decay| ** top_level`` overflows float32 (an ``inf`` block)."""
    try:
        ok = abs(decay) ** top_level <= _FLOAT32_MAX
    except OverflowError:
        ok = False
    if not ok:
        raise SpecError(
            f"decay={decay!r} overflows float32 at level {top_level} (decay**{top_level}); use |decay| ≤ 1 "
            "or a smaller max_depth"
        )


class LapPEEmbedding(nn.Module):
    """Linear map of Laplacian eigenvectors (plus eigenvalues) to ``dim`` additive features.

    Parameters
    ----------
    k : int
        Number of eigenvectors per node.
    dim : int
        Output feature size.
    use_eigvals : bool
        Also feed each eigenvector's eigenvalue (``forward`` then needs ``eigvals``).
    sign_flip : bool
        In training mode, multiply each eigenvector column by a random ±1 (one draw per graph).

    Notes
    -----
    ``forward(eigvecs, eigvals=None)``: ``eigvecs`` ``(…, N, k)``, NaN columns for missing modes
    (as :func:`structpos.coords.laplacian_pe` and GraphGPS pad); ``eigvals`` ``(…, k)`` or
    ``(…, N, k)``. Missing entries contribute zero. Returns ``(…, N, dim)``.

    Examples
    --------
    Two eigenvectors of which the second is missing (NaN): it contributes exactly what zeros do.

    >>> _ = torch.manual_seed(0)
    >>> emb = LapPEEmbedding(k=2, dim=4).eval()
    >>> nan = float("nan")
    >>> vecs, vals = torch.tensor([[0.5, nan], [-0.5, nan]]), torch.tensor([2.0, nan])
    >>> out = emb(vecs, vals)
    >>> out.shape
    torch.Size([2, 4])
    >>> torch.equal(out, emb(torch.tensor([[0.5, 0.0], [-0.5, 0.0]]), torch.tensor([2.0, 0.0])))
    True
    """

    def __init__(self, k: int, dim: int, use_eigvals: bool = True, sign_flip: bool = True):
        super().__init__()
        self.k, self.dim = check_count(k, "k"), check_count(dim, "dim")
        self.use_eigvals, self.sign_flip = check_flag(use_eigvals, "use_eigvals"), check_flag(sign_flip, "sign_flip")
        width = 2 * self.k if self.use_eigvals else self.k
        check_table_size("LapPEEmbedding projection (k or 2k) × dim", width, self.dim)
        self.proj = nn.Linear(width, self.dim)

    def forward(self, eigvecs: torch.Tensor, eigvals: torch.Tensor | None = None) -> torch.Tensor:
        """Features ``(…, N, dim)`` of ``eigvecs`` ``(…, N, k)`` (and ``eigvals``); see the class.

        Raises
        ------
        ShapeError
            ``eigvecs`` is not a real tensor ``(…, N, k)``, or ``eigvals`` is neither ``(…, k)`` nor ``(…, N, k)``.
        SpecError
            ``eigvals`` is missing while ``use_eigvals``.
        """
        if not isinstance(eigvecs, torch.Tensor):
            eigvecs = as_real_tensor(eigvecs, "eigvecs")
        if eigvecs.dim() < 2 or eigvecs.shape[-1] != self.k or not eigvecs.is_floating_point():
            raise ShapeError(
                f"eigvecs must be a floating tensor (…, N, k = {self.k}), got {eigvecs.dtype} {tuple(eigvecs.shape)}"
            )
        missing = torch.isnan(eigvecs)
        vecs = eigvecs.nan_to_num(0.0)
        if self.training and self.sign_flip:
            shape = (*vecs.shape[:-2], 1, self.k)
            vecs = vecs * (torch.randint(0, 2, shape, device=vecs.device) * 2 - 1).to(vecs.dtype)
        feats = [vecs]
        if self.use_eigvals:
            if eigvals is None:
                raise SpecError("LapPEEmbedding(use_eigvals=True) needs eigvals")
            vals = torch.as_tensor(eigvals).to(vecs.dtype)
            if vals.dim() == vecs.dim() - 1:
                vals = vals.unsqueeze(-2)
            if vals.shape[-1] != self.k or vals.dim() != vecs.dim():
                raise ShapeError(
                    f"eigvals must have shape (…, k = {self.k}) or (…, N, k) for eigvecs {tuple(eigvecs.shape)}, "
                    f"got {tuple(torch.as_tensor(eigvals).shape)}"
                )
            try:
                vals = vals.expand_as(vecs)
            except RuntimeError:
                raise ShapeError(
                    f"eigvals of shape {tuple(eigvals.shape)} do not broadcast to eigvecs {tuple(eigvecs.shape)}"
                ) from None
            feats.append(torch.where(missing | torch.isnan(vals), torch.zeros_like(vals), vals))
        return self.proj(torch.cat(feats, dim=-1).to(self.proj.weight.dtype))
