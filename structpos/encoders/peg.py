r"""PEG attention bias: a learned function of the positional distance ``‖z_u − z_v‖`` per head.

PEG (Wang et al. 2022) uses positional coordinates only through distances, which makes a layer
equivariant to node permutations and invariant to orthogonal transforms of the coordinates
(sign flips and rotations of Laplacian eigenvectors). As an attention bias:

.. math::  b_h(u, v) = \mathrm{MLP}\big(\lVert z_u - z_v \rVert\big)_h,

added to the attention logits of head ``h``. The distances come from
:func:`structpos.coords.peg.peg_distances` (coordinate family ``peg[:k]``) or from coordinates
through :meth:`PEGBias.distances`.
"""

from __future__ import annotations

import torch
from torch import nn

from ..exceptions import ShapeError
from ._checks import check_count, check_table_size

__all__ = ["PEGBias"]


class PEGBias(nn.Module):
    """Per-head attention bias ``MLP(d_uv)`` of PEG positional distances.

    Parameters
    ----------
    num_heads : int
        Heads (bias channels).
    hidden : int
        Width of the MLP ``1 → hidden → num_heads`` (SiLU).

    Examples
    --------
    >>> torch.manual_seed(0) and None
    >>> z = torch.tensor([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]])
    >>> d = PEGBias.distances(z)
    >>> d[0].tolist()
    [0.0, 5.0, 1.0]
    >>> bias = PEGBias(num_heads=2)(d)
    >>> bias.shape, bool(torch.allclose(bias, bias.transpose(-1, -2)))
    (torch.Size([2, 3, 3]), True)
    """

    def __init__(self, num_heads: int, hidden: int = 16):
        super().__init__()
        self.num_heads, hidden = check_count(num_heads, "PEGBias: num_heads"), check_count(hidden, "PEGBias: hidden")
        check_table_size("PEGBias output layer hidden × num_heads", hidden, self.num_heads)
        self.mlp = nn.Sequential(nn.Linear(1, hidden), nn.SiLU(), nn.Linear(hidden, self.num_heads))

    @staticmethod
    def distances(z: torch.Tensor, keep: torch.Tensor | None = None) -> torch.Tensor:
        """``‖z_u − z_v‖`` ``(..., N, N)`` of coordinates ``z (..., N, k)`` (modes ``keep`` only).

        Differentiable, with zero gradient on the diagonal (no ``sqrt(0)`` singularity).

        Parameters
        ----------
        z : torch.Tensor
            ``(..., N, k)`` coordinates.
        keep : torch.Tensor, optional
            ``(..., k)`` bool: modes to use (e.g. ``mask & ~ambiguous``).

        Returns
        -------
        torch.Tensor
            ``(..., N, N)``.

        Examples
        --------
        >>> PEGBias.distances(torch.tensor([[0.0, 1.0], [1.0, 1.0]]), torch.tensor([True, False]))
        tensor([[0., 1.],
                [1., 0.]])
        """
        if z.dim() < 2:
            raise ShapeError(f"z must be (..., N, k); given {tuple(z.shape)}")
        if keep is not None:
            z = z * keep.to(z.dtype).unsqueeze(-2)
        diff = z.unsqueeze(-2) - z.unsqueeze(-3)
        d2 = (diff * diff).sum(-1)
        pos = d2 > 0
        return torch.where(pos, torch.sqrt(torch.where(pos, d2, torch.ones_like(d2))), torch.zeros_like(d2))

    def forward(self, dist: torch.Tensor) -> torch.Tensor:
        """Bias ``(..., H, N, N)`` from distances ``(..., N, N)``.

        Parameters
        ----------
        dist : torch.Tensor
            ``(..., N, N)`` PEG distances.

        Returns
        -------
        torch.Tensor
            ``(..., H, N, N)``, to add to attention logits.

        Examples
        --------
        >>> PEGBias(num_heads=4)(torch.zeros(2, 5, 5)).shape
        torch.Size([2, 4, 5, 5])
        """
        if dist.dim() < 2 or dist.shape[-1] != dist.shape[-2]:
            raise ShapeError(f"dist must be (..., N, N); given {tuple(dist.shape)}")
        dtype = next(self.mlp.parameters()).dtype
        out = self.mlp(dist.to(dtype).unsqueeze(-1))  # (..., N, N, H)
        return out.movedim(-1, -3)
