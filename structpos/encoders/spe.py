r"""SPE: stable and expressive positional encoding from Laplacian eigenpairs (Huang et al. 2024).

Eigenvectors ``V (N, k)`` and eigenvalues ``λ (k,)`` (e.g. coordinate family ``lap[:k]``) are first
turned into ``m`` basis-invariant node-pair matrices by learned eigenvalue filters
``φ_ℓ: ℝ → ℝ`` (one small MLP ``1 → hidden → m``, applied to every eigenvalue):

.. math::  Q_\ell = V \,\mathrm{diag}\big(\varphi_\ell(\lambda_1), \dots, \varphi_\ell(\lambda_k)\big)\, V^\top
           \in \mathbb{R}^{N \times N}, \qquad \ell = 1..m,

then a permutation-equivariant network ``ρ`` maps the stacked ``Q (N, N, m)`` to per-node features
(here DeepSets over each node's row, with its diagonal entry kept apart):

.. math::  \mathrm{SPE}(u) = \psi_{\mathrm{out}}\Big(\big[\,\psi_{\mathrm{diag}}(Q_{uu}),\;
           \tfrac{1}{N}\textstyle\sum_v \psi_{\mathrm{pair}}(Q_{uv})\,\big]\Big).

Because ``φ_ℓ`` acts on each eigenvalue alone, equal eigenvalues get equal weights, so
``Q_ℓ`` depends on each eigenspace only through its projector ``V_S V_Sᵀ``: the output is
unchanged by sign flips of eigenvectors and by any rotation of the basis inside an eigenspace,
and permuting the nodes permutes the output rows. SPE's stability comes from ``φ_ℓ`` being smooth
in ``λ`` (Lipschitz MLPs). Invariance needs whole eigenspaces: pass ``mask = lap_mask &
~lap_ambiguous`` to leave out the modes of an eigenspace split by the ``k``-th cut.
"""

from __future__ import annotations

import torch
from torch import nn

from ..exceptions import ShapeError
from ._checks import check_count, check_table_size

__all__ = ["SPE"]


def _mlp(d_in: int, hidden: int, d_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(d_in, hidden), nn.SiLU(), nn.Linear(hidden, d_out))


class SPE(nn.Module):
    """Stable and expressive positional encoding: ``ρ(V φ_1(Λ) Vᵀ, …, V φ_m(Λ) Vᵀ)`` → ``(N, out_dim)``.

    Parameters
    ----------
    out_dim : int
        Features per node.
    num_filters : int
        ``m``, the number of eigenvalue filters ``φ_ℓ`` (channels of ``Q``).
    hidden : int
        Width of ``φ`` and of the DeepSets MLPs ``ψ``.

    Examples
    --------
    Eigenpairs of a 6-cycle from ``lap:4``; flipping the sign of every eigenvector changes nothing:

    >>> import numpy as np
    >>> from structpos.coords.laplacian import laplacian_pe
    >>> i = np.arange(6)
    >>> r = laplacian_pe(np.stack([i, (i + 1) % 6]), 6, k=4)
    >>> V, lam = torch.from_numpy(r.pe).float(), torch.from_numpy(r.eigvals).float()
    >>> torch.manual_seed(0) and None
    >>> spe = SPE(out_dim=8)
    >>> out = spe(V, lam)
    >>> out.shape, bool(torch.allclose(spe(-V, lam), out, atol=1e-6))
    (torch.Size([6, 8]), True)
    """

    def __init__(self, out_dim: int, num_filters: int = 8, hidden: int = 32):
        super().__init__()
        self.out_dim, self.num_filters = (
            check_count(out_dim, "SPE: out_dim"),
            check_count(num_filters, "SPE: num_filters"),
        )
        hidden = check_count(hidden, "SPE: hidden")
        for what, n in (("num_filters", self.num_filters), ("out_dim", self.out_dim)):
            check_table_size(f"SPE layer hidden × {what}", 2 * hidden, n)
        check_table_size("SPE layer hidden × hidden", 2 * hidden, hidden)
        self.phi = _mlp(1, hidden, self.num_filters)
        self.psi_diag = _mlp(self.num_filters, hidden, hidden)
        self.psi_pair = _mlp(self.num_filters, hidden, hidden)
        self.psi_out = _mlp(2 * hidden, hidden, self.out_dim)

    def filters(self, eigvals: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """``φ(λ)`` ``(..., k, m)``; modes with ``mask`` False get 0.

        Parameters
        ----------
        eigvals : torch.Tensor
            ``(..., k)``.
        mask : torch.Tensor, optional
            ``(..., k)`` bool.

        Returns
        -------
        torch.Tensor
            ``(..., k, m)``.

        Examples
        --------
        >>> with torch.no_grad():
        ...     phi = SPE(out_dim=2, num_filters=3).filters(torch.zeros(4), torch.tensor([True, True, False, False]))
        >>> phi.shape, phi[2:].abs().sum().item()
        (torch.Size([4, 3]), 0.0)
        """
        phi = self.phi(eigvals.unsqueeze(-1))
        if mask is not None:
            phi = phi * mask.to(phi.dtype).unsqueeze(-1)
        return phi

    def projections(self, eigvecs: torch.Tensor, eigvals: torch.Tensor, mask: torch.Tensor | None = None):
        """The stacked ``Q (..., N, N, m)``, ``Q[..., u, v, ℓ] = Σ_j V_uj φ_ℓ(λ_j) V_vj``.

        Parameters
        ----------
        eigvecs : torch.Tensor
            ``(..., N, k)``.
        eigvals : torch.Tensor
            ``(..., k)``.
        mask : torch.Tensor, optional
            ``(..., k)`` bool: modes to use.

        Returns
        -------
        torch.Tensor
            ``(..., N, N, m)``.

        Examples
        --------
        >>> spe = SPE(out_dim=2, num_filters=3)
        >>> spe.projections(torch.eye(4)[:, :2], torch.tensor([0.5, 1.0])).shape
        torch.Size([4, 4, 3])
        """
        phi = self.filters(eigvals, mask)
        return torch.einsum("...uj,...jl,...vj->...uvl", eigvecs, phi, eigvecs)

    def forward(
        self,
        eigvecs: torch.Tensor,
        eigvals: torch.Tensor,
        mask: torch.Tensor | None = None,
        node_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Per-node SPE features.

        Parameters
        ----------
        eigvecs : torch.Tensor
            ``(N, k)`` or ``(B, N, k)`` eigenvectors (padded nodes: zero rows).
        eigvals : torch.Tensor
            ``(k,)`` or ``(B, k)`` eigenvalues (``lap_eigvals`` of any node).
        mask : torch.Tensor, optional
            ``(k,)`` or ``(B, k)`` bool, modes to use (``lap_mask & ~lap_ambiguous``).
        node_mask : torch.Tensor, optional
            ``(N,)`` or ``(B, N)`` bool, real nodes of a padded batch (the sum over ``v`` runs over
            these and is divided by their number; padded rows are zero in the output).

        Returns
        -------
        torch.Tensor
            ``(N, out_dim)`` or ``(B, N, out_dim)``.

        Raises
        ------
        ShapeError
            Inconsistent shapes.

        Examples
        --------
        >>> SPE(out_dim=3)(torch.randn(2, 5, 4), torch.rand(2, 4)).shape
        torch.Size([2, 5, 3])
        """
        if eigvecs.dim() not in (2, 3):
            raise ShapeError(f"eigvecs must be (N, k) or (B, N, k); given {tuple(eigvecs.shape)}")
        lead = eigvecs.shape[:-2]
        N, k = eigvecs.shape[-2:]
        if tuple(eigvals.shape) != (*lead, k):
            raise ShapeError(
                f"eigvals must be {(*lead, k)} for eigvecs {tuple(eigvecs.shape)}; given {tuple(eigvals.shape)}"
            )
        if mask is not None and tuple(mask.shape) != (*lead, k):
            raise ShapeError(f"mask must be {(*lead, k)}; given {tuple(mask.shape)}")
        if node_mask is not None and tuple(node_mask.shape) != (*lead, N):
            raise ShapeError(f"node_mask must be {(*lead, N)}; given {tuple(node_mask.shape)}")
        Q = self.projections(eigvecs, eigvals, mask)  # (..., N, N, m)
        diag = Q.diagonal(dim1=-3, dim2=-2).transpose(-1, -2)  # (..., N, m)
        pair = self.psi_pair(Q)  # (..., N, N, hidden)
        if node_mask is None:
            pooled = pair.mean(dim=-2)
        else:
            w = node_mask.to(pair.dtype)
            count = w.sum(-1).clamp(min=1)[..., None, None]
            pooled = (pair * w[..., None, :, None]).sum(dim=-2) / count
        out = self.psi_out(torch.cat([self.psi_diag(diag), pooled], dim=-1))
        if node_mask is not None:
            out = out * node_mask.to(out.dtype).unsqueeze(-1)
        return out
