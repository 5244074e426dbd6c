"""The large-graph eigensolver layer on graph families with known spectra.

Every family is run through the *sparse* path (``dense_max`` lowered below the graph size), by
``auto`` and by each sparse method, and checked against the closed-form spectrum (or dense
``eigh`` where none exists): eigenvalues to 1e-8, residuals ‖Lu − λu‖ <= 1e-6 against a
Laplacian built independently (networkx), orthonormality, orthogonality to the trivial modes,
and the ambiguous-mode flags against the multiplicities of the reference spectrum. The same for
the magnetic Laplacian against dense ``eigh`` of the Hermitian matrix built from the formula.
"""

from __future__ import annotations

import itertools
from math import comb

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

from structpos.coords._sparse_eigen import smallest_eigenpairs
from structpos.coords.laplacian import laplacian_pe, laplacian_pe_batch
from structpos.coords.magnetic import magnetic_laplacian_pe, magnetic_laplacian_pe_batch
from structpos.exceptions import EigenConvergenceError


def edges_of(G: nx.Graph) -> np.ndarray:
    e = np.array(list(G.edges()), dtype=np.int64).reshape(-1, 2).T
    return np.concatenate([e, e[::-1]], axis=1)


def cos_sum(*sides, periodic=True):
    """Spectrum of the normalised Laplacian of a torus (regular: the Kronecker sum of cycles)."""
    parts = [np.cos(2 * np.pi * np.arange(s) / s) for s in sides]
    tot = sum(np.meshgrid(*parts, indexing="ij"))
    return np.sort((1 - tot / len(sides)).ravel())


def hypercube_spectrum(d):
    return np.sort(np.concatenate([np.full(comb(d, j), 2 * j / d) for j in range(d + 1)]))


def with_components(spectrum, copies):
    return np.sort(np.tile(spectrum, copies))


# name -> (graph, full closed-form spectrum or None for dense eigh, number of components)
FAMILIES = {
    "cycle": lambda: (nx.cycle_graph(400), np.sort(1 - np.cos(2 * np.pi * np.arange(400) / 400))),
    "path": lambda: (nx.path_graph(500), 1 - np.cos(np.pi * np.arange(500) / 499)),
    "torus": lambda: (nx.grid_2d_graph(20, 24, periodic=True), cos_sum(20, 24)),
    "hypercube": lambda: (nx.hypercube_graph(9), hypercube_spectrum(9)),
    "complete": lambda: (nx.complete_graph(150), np.r_[0.0, np.full(149, 150 / 149)]),
    "complete_bipartite": lambda: (nx.complete_bipartite_graph(60, 90), np.r_[0.0, np.ones(148), 2.0]),
    "star": lambda: (nx.star_graph(300), np.r_[0.0, np.ones(299), 2.0]),
    "identical_components": lambda: (
        nx.disjoint_union_all([nx.cycle_graph(90)] * 3),
        with_components(1 - np.cos(2 * np.pi * np.arange(90) / 90), 3),
    ),
    "random_regular": lambda: (nx.random_regular_graph(4, 600, seed=3), None),
}
K = 6


def reference(name):
    G, spectrum = FAMILIES[name]()
    G = nx.convert_node_labels_to_integers(G)
    n = G.number_of_nodes()
    L = nx.normalized_laplacian_matrix(G, nodelist=range(n)).astype(float)
    c = nx.number_connected_components(G)
    if spectrum is None:
        spectrum = np.linalg.eigvalsh(L.toarray())
    return edges_of(G), n, sp.csr_matrix(L), np.asarray(spectrum), c


def check_modes(L, pe, ev, mask, ambiguous, want, next_value, trivial=None, tol_ev=1e-8):
    """Eigenvalues equal the reference; residuals, orthonormality, ambiguity flags."""
    assert mask.all()
    np.testing.assert_allclose(ev, want, atol=tol_ev, rtol=0)
    res = np.linalg.norm(L @ pe - pe * ev, axis=0)
    assert res.max() <= 1e-6, res
    np.testing.assert_allclose(pe.conj().T @ pe, np.eye(len(ev)), atol=1e-8)
    if trivial is not None:
        assert np.abs(trivial.T @ pe).max() <= 1e-8
    expected = np.abs(want - next_value) <= 1e-9
    np.testing.assert_array_equal(np.asarray(ambiguous), expected)


@pytest.mark.parametrize("name", list(FAMILIES))
@pytest.mark.parametrize("method", ["auto", "shift-invert", "lanczos", "amg"])
def test_lappe_on_families_with_known_spectra(name, method):
    if method == "lanczos" and name == "path":
        pytest.skip("Lanczos on a 500-node path is slow (gaps ~1/N²); auto does not pick it there")
    ei, n, L, spectrum, c = reference(name)
    r = laplacian_pe(ei, n, K, method=method, dense_max=50)
    assert r.report.methods and "dense" not in r.report.methods  # the large-graph path ran
    if method != "auto":
        assert set(r.report.methods) == {method}
    A = nx.to_scipy_sparse_array(nx.Graph([tuple(e) for e in ei.T]), nodelist=range(n))
    d = np.asarray(A.sum(1)).ravel()
    comps = [list(cc) for cc in nx.connected_components(nx.Graph([tuple(e) for e in ei.T]))]
    trivial = np.zeros((n, len(comps)))
    for j, cc in enumerate(comps):
        trivial[cc, j] = np.sqrt(d[cc] / d[cc].sum())
    check_modes(
        L,
        np.asarray(r.pe),
        np.asarray(r.eigvals),
        np.asarray(r.mask),
        r.ambiguous,
        spectrum[c : c + K],
        spectrum[c + K],
        trivial=trivial,
    )
    assert r.report.max_residual <= 1e-6 and r.report.orthogonality <= 1e-8


def test_ambiguous_flags_when_the_cut_splits_an_eigenspace():
    """k = 5 on a hypercube Q_9 (eigenvalue 2/9 has multiplicity 9): every kept mode is ambiguous;
    on the 20 x 24 torus with k = 4 (two complete pairs) none is, with k = 5 the fifth is (a
    4-fold eigenvalue is cut); the batched dense path flags the same."""
    ei, n, _, spectrum, _ = reference("hypercube")
    for method in ("auto", "dense"):
        r = laplacian_pe(ei, n, 5, method=method, dense_max=50)
        assert np.asarray(r.ambiguous).all()
    ei, n, _, spectrum, _ = reference("torus")
    r = laplacian_pe(ei, n, 4, dense_max=50)
    assert not np.asarray(r.ambiguous).any()
    assert np.abs(spectrum[5] - spectrum[4]) > 1e-3 and np.abs(spectrum[5] - spectrum[6]) < 1e-12
    sparse5 = laplacian_pe(ei, n, 5, dense_max=50)
    batch = laplacian_pe_batch(
        [(ei, n), (edges_of(nx.convert_node_labels_to_integers(nx.hypercube_graph(4))), 16)], 5, dense_max=1000
    )
    for flags in (sparse5.ambiguous, batch.ambiguous[0], batch.ambiguous[1]):  # Q_4: 1/2 (x4), then 1 (x6)
        assert np.asarray(flags).tolist() == [False, False, False, False, True]
    np.testing.assert_allclose(batch.eigvals[1], [0.5] * 4 + [1.0], atol=1e-12)


def test_identical_components_give_whole_eigenspaces_across_components():
    """Three identical cycles: each eigenvalue's multiplicity triples; the sparse path (large
    components) keeps every copy and the projector onto each kept cluster is the reference one."""
    ei, n, L, spectrum, _ = reference("identical_components")
    r = laplacian_pe(ei, n, 7, dense_max=50)  # λ_1 has multiplicity 6: modes 1-6 whole, mode 7 cut
    np.testing.assert_allclose(r.eigvals[:6], spectrum[3:9], atol=1e-12)
    assert not np.asarray(r.ambiguous)[:6].any() and r.ambiguous[6]
    _, U = np.linalg.eigh(L.toarray())
    P_ref = U[:, 3:9] @ U[:, 3:9].T
    np.testing.assert_allclose(r.pe[:, :6] @ r.pe[:, :6].T, P_ref, atol=1e-8)


# ------------------------------------------------------------------ magnetic Laplacian
def magnetic_dense(ei: np.ndarray, n: int, q: float) -> np.ndarray:
    """``L^(q)`` from the formula, dense, with isolated nodes left out (their rows zero)."""
    A = np.zeros((n, n))
    np.add.at(A, (ei[0], ei[1]), 1.0)
    np.fill_diagonal(A, 0)
    B = (A > 0).astype(float)
    As = np.maximum(A, A.T)
    d = As.sum(1)
    dinv = np.where(d > 0, 1 / np.sqrt(np.where(d > 0, d, 1)), 0)
    H = dinv[:, None] * As * dinv[None, :] * np.exp(2j * np.pi * q * (B - B.T))
    return np.diag((d > 0).astype(float)) - H


def directed_families():
    rng = np.random.default_rng(0)
    cyc = np.stack([np.arange(300), (np.arange(300) + 1) % 300])
    three = np.concatenate(
        [cyc[:, :0]] + [np.stack([np.arange(80), (np.arange(80) + 1) % 80]) + 80 * i for i in range(3)], axis=1
    )
    side = 15
    idx = np.arange(side * side).reshape(side, side)
    torus = np.concatenate(
        [np.stack([idx.ravel(), np.roll(idx, -1, 1).ravel()]), np.stack([idx.ravel(), np.roll(idx, -1, 0).ravel()])],
        axis=1,
    )
    rand = rng.integers(0, 400, (2, 1200))
    rand = rand[:, rand[0] != rand[1]]
    tree = np.stack([rng.integers(0, np.arange(1, 300)), np.arange(1, 300)])
    return {
        "directed_cycle": (cyc, 300),
        "three_directed_cycles": (three, 240),
        "directed_torus": (torus, side**2),
        "random_digraph": (rand, 400),
        "directed_tree": (tree, 300),
    }


@pytest.mark.parametrize("name", list(directed_families()))
@pytest.mark.parametrize("method", ["auto", "shift-invert", "amg"])
def test_magnetic_against_dense_hermitian_eigh(name, method):
    ei, n = directed_families()[name]
    q = 0.1
    H = magnetic_dense(ei, n, q)
    live = np.flatnonzero(np.abs(H).sum(1) > 0)
    w = np.linalg.eigvalsh(H[np.ix_(live, live)])
    r = magnetic_laplacian_pe(ei, n, K, q=q, method=method, dense_max=50)
    assert "dense" not in r.report.methods
    check_modes(H, np.asarray(r.pe), np.asarray(r.eigvals), np.asarray(r.mask), r.ambiguous, w[:K], w[K])


def test_directed_cycle_closed_form_and_batch_flags():
    n, q = 300, 0.1
    ei = np.stack([np.arange(n), (np.arange(n) + 1) % n])
    closed = np.sort(1 - np.cos(2 * np.pi * (np.arange(n) / n + q)))
    r = magnetic_laplacian_pe(ei, n, K, q=q, dense_max=50)
    np.testing.assert_allclose(r.eigvals, closed[:K], atol=1e-10)
    out = magnetic_laplacian_pe_batch([(ei, n)] * 2, K, q=q, dense_max=1000)
    np.testing.assert_allclose(out.eigvals[0], closed[:K], atol=1e-10)
    np.testing.assert_array_equal(out.ambiguous[0], np.abs(closed[:K] - closed[K]) <= 1e-9)


# ------------------------------------------------------------------ the solver layer itself
def test_completeness_check_recovers_missed_degenerate_copies():
    """A complex Hermitian matrix with a 6-fold smallest eigenvalue (six identical magnetic
    cycles beside a longer one, as one matrix): single-vector Krylov sees one vector per
    eigenspace in exact arithmetic and can miss copies; the layer returns all of them."""

    def cyc(m):
        return np.stack([np.arange(m), (np.arange(m) + 1) % m])

    path = np.stack([np.arange(149), np.arange(1, 150)])
    blocks = [magnetic_dense(cyc(97), 97, 0.1)] * 6 + [magnetic_dense(path, 150, 0.1)]
    L = sp.block_diag(blocks, format="csr")
    w = np.linalg.eigvalsh(L.toarray())
    assert abs(w[0]) < 1e-12 and np.sum(np.abs(w[:9] - w[1]) < 1e-9) == 6  # 0, then a 6-fold eigenvalue
    mult = 7
    for method in ("shift-invert", "lanczos"):
        r = smallest_eigenpairs(L, mult + 2, method=method)
        np.testing.assert_allclose(r.eigvals, w[: mult + 2], atol=1e-8)
        assert r.max_residual <= 1e-8 and r.orthogonality <= 1e-8


def test_non_convergence_raises_with_residuals_and_auto_falls_back():
    ei, n, L, spectrum, c = reference("path")
    with pytest.raises(EigenConvergenceError) as info:
        laplacian_pe(ei, n, K, method="lobpcg", dense_max=50, maxiter=2)
    assert info.value.residuals is not None and np.max(info.value.residuals) > 1e-6
    ei, n, _, spectrum, _ = reference("random_regular")
    r = laplacian_pe(ei, n, K, dense_max=50, maxiter=1)  # Lanczos and AMG-LOBPCG stop at once: dense
    assert r.report.methods == ("dense",) and any("fallback" in note for note in r.report.notes)
    np.testing.assert_allclose(r.eigvals, spectrum[1 : K + 1], atol=1e-10)


def test_progress_reports_the_method_and_a_memory_estimate():
    ei, n, *_ = reference("torus")
    lines = []
    laplacian_pe(ei, n, K, dense_max=50, progress=lines.append)
    text = "\n".join(lines)
    assert "memory estimate" in text and "shift-invert" in text and "done in" in text


def test_method_choice_per_graph():
    """auto: Lanczos on an expander, shift-invert on a path (tiny eigenvalues, banded factor)."""
    for name, want in (("random_regular", "lanczos"), ("path", "shift-invert")):
        ei, n, *_ = reference(name)
        assert laplacian_pe(ei, n, K, dense_max=50).report.methods == (want,)
    with pytest.raises(ValueError, match="unknown"):
        laplacian_pe(ei, n, K, method="arnoldi")


@pytest.mark.parametrize("combo", list(itertools.product([1, 3], [0.0, 0.25])))
def test_magnetic_q_zero_is_the_laplacian_on_the_sparse_path(combo):
    copies, q = combo
    ei = edges_of(nx.disjoint_union_all([nx.cycle_graph(70)] * copies))
    n = 70 * copies
    a = magnetic_laplacian_pe(ei, n, 4, q=q, dense_max=50)
    b = magnetic_laplacian_pe(ei, n, 4, q=q, method="dense")
    np.testing.assert_allclose(a.eigvals, b.eigvals, atol=1e-10)
    np.testing.assert_array_equal(a.ambiguous, b.ambiguous)


# ------------------------------------------------------------------ at scale
@pytest.mark.slow
def test_magnetic_at_scale_matches_the_directed_torus_closed_form():
    """90,000 nodes on the large-graph path: a directed 300×300 torus (edges right and down) has
    the magnetic spectrum ``1 − (cos 2π(a/s + q) + cos 2π(b/s + q)) / 2`` over ``a, b < s``, with
    twofold eigenvalues (``a ↔ b``) that the ambiguity flags must track. Residuals are taken
    against ``L = I − H`` built here from the formula (every node has symmetrised degree 4, so
    ``H[u, v] = e^{2πiq} / 4`` along an edge ``u → v`` and its conjugate back)."""
    side, q = 300, 0.1234
    n = side * side
    idx = np.arange(n).reshape(side, side)
    src = np.r_[idx.ravel(), idx.ravel()]
    dst = np.r_[np.roll(idx, -1, 1).ravel(), np.roll(idx, -1, 0).ravel()]
    phase = np.exp(2j * np.pi * q) / 4
    H = sp.coo_matrix((np.full(src.size, phase), (src, dst)), shape=(n, n)).tocsr()
    L = sp.identity(n, dtype=complex, format="csr") - H - H.conj().T
    c = np.cos(2 * np.pi * (np.arange(side) / side + q))
    closed = np.sort((1 - (c[:, None] + c[None, :]) / 2).ravel())

    k = 7  # the cut splits the twofold closed[6] = closed[7]: the last mode is ambiguous
    assert closed[k] - closed[k - 1] < 1e-12 < closed[k - 1] - closed[k - 2]
    r = magnetic_laplacian_pe(np.stack([src, dst]), n, k, q=q)
    assert "dense" not in r.report.methods
    check_modes(
        L, np.asarray(r.pe), np.asarray(r.eigvals), np.asarray(r.mask), r.ambiguous, closed[:k], closed[k], tol_ev=1e-12
    )
