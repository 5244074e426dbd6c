"""Learned rotations (LieRE, ComRoPE, GRAPE) at huge coordinates: float32 keeps norms, relativity and gradients.

In float32 the angle ``c · ω`` at ``c ≈ 10⁸`` is off by up to 4 rad, and the float32 exponential of
such an exponent is no rotation (norms grew by 10¹⁰, or became inf/nan). The encoders build the
exponent in float64; these tests hold float32 outputs to an independent float64 reference: the
exponential through the eigendecomposition of the Hermitian ``iM`` (no scaling and squaring).
"""

from __future__ import annotations

import pytest
import torch
from conftest import perturbed as _perturbed

from structpos.encoders import GRAPE, ComRoPE, LieRE

D = 8
HUGE = [1e7, 3e7, 1e8]


def perturbed(enc):
    return _perturbed(enc, std=0.1)


def encoders():
    """name → (encoder, num_axes, relative): ``relative`` where ``R(x)ᵀR(y) = R(y − x)`` holds exactly."""
    torch.manual_seed(0)
    return {
        "liere_rope": (LieRE(D, 2), 2, True),  # block-diagonal generators commute
        "liere_random_1axis": (LieRE(D, 1, init="random", init_std=0.3), 1, True),
        "liere_random_2axes": (LieRE(D, 2, init="random", init_std=0.3), 2, False),
        "comrope_ap_b2": (ComRoPE(D, 2, "ap", block_size=2, init="random", init_std=0.3), 2, True),
        "comrope_ap_b4": (ComRoPE(D, 2, "ap", block_size=4, init="random", init_std=0.3), 2, True),
        "comrope_ld_b2": (perturbed(ComRoPE(D, 2, "ld", block_size=2, init="random", init_std=0.2)), 2, True),
        "comrope_ld_b4": (perturbed(ComRoPE(D, 2, "ld", block_size=4, init="random", init_std=0.2)), 2, True),
        "grape_commuting": (perturbed(GRAPE(D, 2)), 2, True),
        "grape_mixture_r1": (GRAPE(D, 1, "mixture", rank=1, init="random"), 1, True),
        "grape_mixture_r3": (GRAPE(D, 1, "mixture", rank=3, init="random"), 1, True),
        "grape_mixture_rope": (GRAPE(D, 2, "mixture"), 2, True),
    }


def reference_rotation(enc, coords: torch.Tensor) -> torch.Tensor:
    """float64 ``exp(Σ_a c_a G_a)`` from ``iM = V diag(μ) Vᴴ``: ``exp(M) = V diag(e^{−iμ}) Vᴴ`` (unitary)."""
    m = torch.einsum("...a,aij->...ij", coords.double(), enc.generators(torch.float64).detach())
    mu, v = torch.linalg.eigh(1j * m.to(torch.complex128))
    return ((v * torch.exp(-1j * mu)[..., None, :]) @ v.mH).real


def reference_rotate(enc, x: torch.Tensor, coords: torch.Tensor) -> torch.Tensor:
    """``R(c_n) x_n`` in float64 for ``x`` ``(B, L, H, D)`` and ``coords`` ``(B, L, A)``."""
    return torch.einsum("blij,blhj->blhi", reference_rotation(enc, coords), x.double())


def huge_coords(extent: float, num_axes: int, length: int = 5) -> torch.Tensor:
    """``(1, L, A)`` float32 coordinates near ``±extent`` (exact in float32: multiples of 8)."""
    steps = torch.arange(length, dtype=torch.float32)[None, :, None] * 8
    signs = torch.tensor([1.0, -0.5, 0.25][:num_axes])
    return (torch.full((1, length, num_axes), extent) + steps) * signs


def vectors(seed: int = 0, length: int = 5) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(1, length, 2, D, generator=g), torch.randn(1, length, 2, D, generator=g)


@pytest.mark.parametrize("extent", HUGE)
@pytest.mark.parametrize("name", list(encoders()))
def test_float32_keeps_norms_and_matches_float64_at_huge_coordinates(name, extent):
    enc, num_axes, _ = encoders()[name]
    q, k = vectors()
    c = huge_coords(extent, num_axes)
    with torch.no_grad():
        qr, kr = enc(q, k, c)
    assert qr.dtype == kr.dtype == torch.float32
    for x, y in ((q, qr), (k, kr)):
        ratio = y.norm(dim=-1) / x.norm(dim=-1)
        assert (ratio - 1).abs().max() < 2e-6, (ratio - 1).abs().max()
        err = (y.double() - reference_rotate(enc, x, c)).norm(dim=-1) / x.double().norm(dim=-1)
        assert err.max() < 2e-5, err.max()


@pytest.mark.parametrize("name", list(encoders()))
def test_float32_matches_float64_at_ordinary_coordinates(name):
    """Up to ``|c| = 10⁴`` float32 outputs are the float64 rotation to float32 rounding (the float32
    exponent carried ~1e-3 of error here)."""
    enc, num_axes, _ = encoders()[name]
    q, _ = vectors(seed=1, length=6)
    c = torch.rand(1, 6, num_axes, generator=torch.Generator().manual_seed(2)) * 2e4 - 1e4
    with torch.no_grad():
        out = enc.rotate(q, c)
        r = enc.rotation(c)
    assert r.dtype == torch.float32
    torch.testing.assert_close(r.double(), reference_rotation(enc, c), rtol=0, atol=2e-6)
    err = (out.double() - reference_rotate(enc, q, c)).norm(dim=-1) / q.double().norm(dim=-1)
    assert err.max() < 2e-6, err.max()


@pytest.mark.parametrize("base", [10**7, 3 * 10**7 + 1, 10**8 + 3])
@pytest.mark.parametrize("name", [n for n, (_, _, relative) in encoders().items() if relative])
def test_relative_position_property_holds_at_huge_coordinates(name, base):
    """``⟨R(p) q, R(p') k⟩ = ⟨q, R(p' − p) k⟩`` for int64 ``p, p'`` near ``base`` a few units apart
    (``10⁸ + 3`` is no float32 number: the coordinates must reach the exponent exactly)."""
    enc, num_axes, _ = encoders()[name]
    q, k = vectors(seed=3)
    p = torch.full((1, 5, num_axes), base, dtype=torch.int64) + torch.arange(5)[None, :, None] * torch.tensor(
        [1, 2, -1][:num_axes]
    )
    p2 = p.flip(1)
    with torch.no_grad():
        absolute = (enc.rotate(q, p) * enc.rotate(k, p2)).sum(-1)
        relative = (q * enc.rotate(k, p2 - p)).sum(-1)
    scale = (q.norm(dim=-1) * k.norm(dim=-1)).max()
    assert ((absolute - relative).abs().max() / scale) < 1e-5, (absolute - relative).abs().max() / scale


@pytest.mark.parametrize("name", ["liere_random_2axes", "comrope_ld_b4", "grape_commuting", "grape_mixture_r3"])
def test_gradients_reach_the_generators_at_huge_coordinates(name):
    """A float32 backward pass at ``|c| ≈ 10⁸`` gives the float64 gradients of every parameter."""
    enc, num_axes, _ = encoders()[name]
    q, k = vectors(seed=4)
    c = huge_coords(1e8, num_axes)
    probe = torch.randn(q.shape, generator=torch.Generator().manual_seed(5))

    def grads(module, dtype):
        module.zero_grad()
        qr, kr = module(q.to(dtype), k.to(dtype), c)
        ((qr * probe.to(dtype)).sum() + (kr * qr.detach()).sum()).backward()
        return {n: p.grad.double().clone() for n, p in module.named_parameters()}

    g32 = grads(enc.float(), torch.float32)
    g64 = grads(enc.double(), torch.float64)
    assert g32.keys() == g64.keys() and g32
    for pname in g32:
        assert torch.isfinite(g32[pname]).all(), pname
        assert g64[pname].abs().max() > 0, pname
        rel = (g32[pname] - g64[pname]).abs().max() / g64[pname].abs().max()
        assert rel < 1e-4, (pname, rel)


@pytest.mark.parametrize("name", ["liere_rope", "comrope_ap_b4", "grape_mixture_rope"])
def test_half_precision_inputs_keep_their_dtype_at_huge_coordinates(name):
    enc, num_axes, _ = encoders()[name]
    q, k = vectors(seed=6)
    c = huge_coords(1e8, num_axes)
    with torch.no_grad():
        qr, _ = enc(q.bfloat16(), k.bfloat16(), c)
        ref = reference_rotate(enc, q.bfloat16(), c)
    assert qr.dtype == torch.bfloat16
    torch.testing.assert_close(qr.double(), ref, rtol=0.02, atol=0.05)
