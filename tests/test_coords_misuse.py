"""Misuse of the graph and tree coordinate functions: structpos errors, never silent wrong answers.

Every bad option or input raises one of structpos's own exceptions (SpecError, StructureError,
LimitError, ...) with a clear message, and extreme but valid inputs give the answer an
independent numpy computation gives (scale invariance of RWSE and of the normalised Laplacian,
``1/w`` scaling of effective resistance).
"""

from __future__ import annotations

import numpy as np
import pytest

from structpos import Structure, compute_coords
from structpos.coords import tree as tr
from structpos.coords.directed_walk import directed_walk_matrices, directed_walk_pe
from structpos.coords.distance import hop_distances, resistance_distance, resistance_distance_pairs
from structpos.coords.graph_kv import graph_kv_layout, graph_kv_reads
from structpos.coords.laplacian import laplacian_pe, laplacian_pe_batch
from structpos.coords.magnetic import magnetic_laplacian_pe, magnetic_laplacian_pe_batch
from structpos.coords.peg import peg_distances
from structpos.coords.random_walk import random_walk_pe, random_walk_pe_batch
from structpos.exceptions import LimitError, ShapeError, SpecError, StructureError

PATH3 = np.array([[0, 1, 1, 2], [1, 0, 2, 1]])  # the path 0 - 1 - 2, both directions


# ----------------------------------------------------------------------------- references
def dense_adjacency(ei, n, w=None, *, self_loops=False):
    A = np.zeros((n, n))
    w = np.ones(ei.shape[1]) if w is None else np.asarray(w, dtype=np.float64)
    for (u, v), x in zip(ei.T, w):
        if x > 0 and (self_loops or u != v):
            A[u, v] += x
    return np.maximum(A, A.T)


def ref_rwse(A, K):
    """``[P^k]_ii`` for ``P = D^-1 A``, by plain numpy matrix powers."""
    d = A.sum(1)
    P = np.divide(A, d[:, None], out=np.zeros_like(A), where=d[:, None] > 0)
    out, M = [], np.eye(len(A))
    for _ in range(K):
        M = M @ P
        out.append(np.diag(M).copy())
    return np.array(out).T


def ref_lap_eigvals(A, k):
    """The ``k`` smallest non-trivial eigenvalues of ``I - D^-1/2 A D^-1/2`` (connected ``A``)."""
    d = A.sum(1)
    s = 1 / np.sqrt(d)
    return np.linalg.eigvalsh(np.eye(len(A)) - s[:, None] * A * s[None, :])[1 : k + 1]


def ref_resistance(A):
    L = np.diag(A.sum(1)) - A
    Lp = np.linalg.pinv(L)
    d = np.diag(Lp)
    return d[:, None] + d[None, :] - 2 * Lp


def random_connected(n, extra, rng):
    """A random connected undirected graph (a random tree plus ``extra`` edges), both directions."""
    parent = np.array([rng.integers(0, i) for i in range(1, n)])
    src = np.r_[np.arange(1, n), rng.integers(0, n, extra)]
    dst = np.r_[parent, rng.integers(0, n, extra)]
    keep = src != dst
    ei = np.stack([src[keep], dst[keep]])
    return np.concatenate([ei, ei[::-1]], axis=1)


BATCH_FUNCTIONS = [laplacian_pe_batch, random_walk_pe_batch, magnetic_laplacian_pe_batch]


# ----------------------------------------------------------------------------- 1. bucket
@pytest.mark.parametrize("fn", BATCH_FUNCTIONS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("bucket", [0, -1, 2.5, "2", None, True])
def test_bucket_must_be_an_integer_at_least_one(fn, bucket):
    graphs = [(PATH3, 3), (np.array([[0, 1], [1, 0]]), 2)]
    with pytest.raises(SpecError, match="bucket"):
        fn(graphs, 2, bucket=bucket)


@pytest.mark.parametrize("fn", BATCH_FUNCTIONS, ids=lambda f: f.__name__)
def test_a_valid_bucket_changes_nothing(fn):
    """Padding to a multiple of ``bucket`` must not change any value (bucket=0 used to give zeros)."""
    graphs = [(PATH3, 3), (np.array([[0, 1], [1, 0]]), 2), (random_connected(7, 4, np.random.default_rng(0)), 7)]
    one, four = fn(graphs, 2, bucket=1), fn(graphs, 2, bucket=4.0)  # an integral float is an integer
    np.testing.assert_allclose(np.abs(four[0]), np.abs(one[0]), atol=1e-12)
    assert np.abs(one[0]).max() > 0.1  # not the all-zero output of bucket=0


# ----------------------------------------------------------------------------- 2. dtype
BAD_DTYPES = [np.int64, np.float16, np.complex128, "abc", None, bool]


@pytest.mark.parametrize("dtype", BAD_DTYPES, ids=repr)
@pytest.mark.parametrize(
    "call",
    [
        lambda dt: laplacian_pe_batch([(PATH3, 3)], 2, dtype=dt),
        lambda dt: magnetic_laplacian_pe_batch([(PATH3, 3)], 2, dtype=dt),
        lambda dt: random_walk_pe_batch([(PATH3, 3)], 4, dtype=dt),
        lambda dt: random_walk_pe(PATH3, 3, walk_length=4, dtype=dt),
        lambda dt: directed_walk_pe(PATH3, 3, walk_length=4, dtype=dt),
        lambda dt: directed_walk_matrices(PATH3, 3, walk_length=2, dtype=dt),
    ],
    ids=["lap_batch", "maglap_batch", "rw_batch", "rw", "rwdir", "rwdir_pair"],
)
def test_dtype_must_be_float32_or_float64(call, dtype):
    with pytest.raises(SpecError, match="dtype"):
        call(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, "float32", np.dtype("float64")])
def test_float_dtypes_give_the_reference_walks(dtype):
    rng = np.random.default_rng(1)
    ei = random_connected(12, 10, rng)
    ref = ref_rwse(dense_adjacency(ei, 12, self_loops=True), 5)
    pe, _ = random_walk_pe_batch([(ei, 12)], 5, dtype=dtype)
    assert pe.dtype == np.dtype(dtype)
    np.testing.assert_allclose(pe, ref, atol=1e-5 if np.dtype(dtype) == np.float32 else 1e-12)
    out = laplacian_pe_batch([(ei, 12)], 3, dtype=dtype)
    np.testing.assert_allclose(out.eigvals[0], ref_lap_eigvals(dense_adjacency(ei, 12), 3), atol=1e-4)


# ----------------------------------------------------------------------------- 3. weight scales
SCALES = [1e300, 1e-300, 2.0**80, 1e-200]


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_rwse_is_invariant_to_the_scale_of_the_weights(scale, dtype):
    rng = np.random.default_rng(2)
    ei = random_connected(15, 12, rng)
    w = rng.random(ei.shape[1]) + 0.1
    ref = ref_rwse(dense_adjacency(ei, 15, w, self_loops=True), 6)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for dense_max in (2000, 0):  # dense and sparse paths
        got = random_walk_pe(ei, 15, walk_length=6, edge_weight=w * scale, dtype=dtype, dense_max=dense_max)
        assert np.isfinite(got).all()
        np.testing.assert_allclose(got, ref, atol=tol)
    pe, _ = random_walk_pe_batch([(ei, 15, w * scale)] * 40, 6, dtype=dtype)  # >= 32 graphs: compiled kernel
    np.testing.assert_allclose(pe[:15], ref, atol=tol)


@pytest.mark.parametrize("scale", SCALES)
def test_laplacian_pes_are_invariant_to_the_scale_of_the_weights(scale):
    rng = np.random.default_rng(3)
    ei = random_connected(14, 10, rng)
    w = rng.random(ei.shape[1]) + 0.1
    ref = ref_lap_eigvals(dense_adjacency(ei, 14, w), 4)
    base = laplacian_pe(ei, 14, k=4, edge_weight=w)
    for dense_max in (1000, 4):  # dense and sparse paths
        r = laplacian_pe(ei, 14, k=4, edge_weight=w * scale, dense_max=dense_max)
        np.testing.assert_allclose(r.eigvals, ref, atol=1e-9)
        np.testing.assert_allclose(np.abs(r.pe), np.abs(base.pe), atol=1e-7)
    b = laplacian_pe_batch([(ei, 14, w * scale)], 4)
    np.testing.assert_allclose(b.eigvals[0], ref, atol=1e-9)
    mag, mag_ref = (
        magnetic_laplacian_pe(ei, 14, k=3, edge_weight=w * scale),
        magnetic_laplacian_pe(ei, 14, k=3, edge_weight=w),
    )
    np.testing.assert_allclose(mag.eigvals, mag_ref.eigvals, atol=1e-9)
    mb = magnetic_laplacian_pe_batch([(ei, 14, w * scale)], 3)
    np.testing.assert_allclose(mb.eigvals[0], mag_ref.eigvals, atol=1e-9)


def test_rescaling_by_a_power_of_four_keeps_the_exact_bytes():
    """The rescale divides by an even power of two: exact, so the result is bit-identical to the
    unscaled weights' (ordinary weights, which are not rescaled, keep their bytes)."""
    rng = np.random.default_rng(4)
    ei = random_connected(10, 8, rng)
    w = rng.random(ei.shape[1]) * 3
    for f in (4.0**40, 4.0**-45):  # outside [2**-60, 2**60]: rescaled
        for dt in (np.float32, np.float64):
            a = random_walk_pe(ei, 10, walk_length=5, edge_weight=w, dtype=dt)
            assert a.tobytes() == random_walk_pe(ei, 10, walk_length=5, edge_weight=w * f, dtype=dt).tobytes()
        a, b = laplacian_pe(ei, 10, k=3, edge_weight=w), laplacian_pe(ei, 10, k=3, edge_weight=w * f)
        assert a.pe.tobytes() == b.pe.tobytes() and a.eigvals.tobytes() == b.eigvals.tobytes()


def test_probe_cases_of_extreme_weights():
    one = random_walk_pe(PATH3, 3, walk_length=4, dtype=np.float64)
    np.testing.assert_allclose(one, [[0, 0.5, 0, 0.5], [0, 1, 0, 1], [0, 0.5, 0, 0.5]])
    for w, dt in [([1e308] * 4, np.float64), ([1e-320] * 4, np.float32), ([1e-320] * 4, np.float64)]:
        np.testing.assert_allclose(random_walk_pe(PATH3, 3, walk_length=4, edge_weight=w, dtype=dt), one, atol=1e-6)
    # float32: 1e39 does not fit; node 2's only edge is 1e-39 of node 1's weight
    got = random_walk_pe(PATH3, 3, walk_length=4, edge_weight=[1e39, 1e39, 1, 1])
    ref = ref_rwse(dense_adjacency(PATH3, 3, [1.0, 1.0, 1e-39, 1e-39]), 4)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-12)
    for fn in (laplacian_pe, magnetic_laplacian_pe):
        r = fn(PATH3, 3, k=2, edge_weight=[1e308] * 4)
        np.testing.assert_allclose(r.eigvals, fn(PATH3, 3, k=2).eigvals, atol=1e-12)
    np.testing.assert_allclose(laplacian_pe(PATH3, 3, k=2, edge_weight=[1e308] * 4).eigvals, [1.0, 2.0])


# ----------------------------------------------------------------------------- 4. resistance
@pytest.mark.parametrize("scale", [1e-300, 1e-10, 1e5, 1e300])
def test_resistance_scales_as_one_over_the_weights(scale):
    rng = np.random.default_rng(5)
    ei = random_connected(9, 6, rng)
    w = rng.random(ei.shape[1]) + 0.5
    ref = ref_resistance(dense_adjacency(ei, 9, w)) / scale
    np.testing.assert_allclose(resistance_distance(ei, 9, edge_weight=w * scale), ref, rtol=1e-10)
    pairs = [[0, 8], [3, 5], [2, 2]]
    got = resistance_distance_pairs(ei, pairs, num_nodes=9, edge_weight=w * scale)
    np.testing.assert_allclose(got, [ref[0, 8], ref[3, 5], 0.0], rtol=1e-8)


def test_resistance_probe_cases():
    np.testing.assert_allclose(resistance_distance(PATH3, 3, edge_weight=[1e-10] * 4)[0], [0, 1e10, 2e10], rtol=1e-13)
    np.testing.assert_allclose(
        resistance_distance(PATH3, 3, edge_weight=[1e-300] * 4)[0], [0, 1e300, 2e300], rtol=1e-13
    )
    with pytest.raises(StructureError, match="float64 range"):  # 1e320 is not a float64
        resistance_distance(PATH3, 3, edge_weight=[1e-320] * 4)


# ----------------------------------------------------------------------------- 5. integer arrays
@pytest.mark.parametrize(
    "parent", [[-1.0, 0.0, 0.5], [-1, np.nan, 0], [-1, np.inf, 0], ["-1", "0", "0"], [True, False, False]]
)
def test_structure_refuses_parents_that_are_not_integers(parent):
    with pytest.raises(StructureError, match="parent"):
        Structure("tree", list("abc"), parent=parent)


def test_integral_float_parents_are_accepted_as_before():
    s = Structure("tree", list("abc"), parent=[-1.0, 0.0, 0.0])
    assert s.parent.dtype == np.int64 and s.parent.tolist() == [-1, 0, 0]
    with pytest.raises(ShapeError, match="edge_index"):
        Structure("graph", list("abc"), edge_index=np.zeros((3, 2), int))
    with pytest.raises(StructureError, match="edge_index"):
        Structure("graph", list("abc"), edge_index=[[0, 1], [1.5, 2]])


def test_tree_functions_refuse_non_integer_nodes():
    p = [-1, 0, 1, 0]
    with pytest.raises(StructureError, match="parent"):
        tr.depth(["-1", "0"])
    with pytest.raises(StructureError, match="not an integer"):
        tr.lca(p, [2.9], [3])
    with pytest.raises(StructureError, match="not an integer"):
        tr.tree_distance(p, [2.7, 3])
    with pytest.raises(ShapeError, match="same shape"):
        tr.lca(p, [1, 2], [3, 0, 1])
    # integral floats are node ids, as before
    assert tr.lca(p, [2.0], [3.0]).tolist() == tr.lca(p, [2], [3]).tolist() == [0]
    assert tr.tree_distance(p, [2.0, 3.0]).tolist() == [[0, 3], [3, 0]]


# ----------------------------------------------------------------------------- 8. graph inputs
SINGLE = [
    (laplacian_pe, "k"),
    (random_walk_pe, "walk_length"),
    (magnetic_laplacian_pe, "k"),
]


@pytest.mark.parametrize("fn, _", SINGLE, ids=lambda x: getattr(x, "__name__", x))
def test_a_bare_edge_index_needs_num_nodes(fn, _):
    with pytest.raises(StructureError, match="num_nodes is required"):
        fn(PATH3)
    with pytest.raises(StructureError, match="num_nodes is required"):
        random_walk_pe_batch([PATH3], 2)


@pytest.mark.parametrize("fn, _", SINGLE, ids=lambda x: getattr(x, "__name__", x))
@pytest.mark.parametrize("n", ["abc", "3", float("nan"), float("inf"), 2.5, -1, True, None, [3]])
def test_num_nodes_must_be_a_non_negative_integer(fn, _, n):
    with pytest.raises(StructureError, match="num_nodes"):
        fn(PATH3, n) if n is not None else fn((PATH3, None))


@pytest.mark.parametrize("fn, kw", SINGLE, ids=lambda x: getattr(x, "__name__", x))
@pytest.mark.parametrize("value", [None, "abc", float("nan"), float("inf"), 0, -2, 1.5, True, 4097, 10**9])
def test_k_and_walk_length_are_checked_and_capped(fn, kw, value):
    with pytest.raises(SpecError, match=kw):
        fn(PATH3, 3, **{kw: value})


@pytest.mark.parametrize("fn, kw", SINGLE, ids=lambda x: getattr(x, "__name__", x))
def test_integer_arguments_keep_accepting_integers(fn, kw):
    a = fn(PATH3, 3, **{kw: 3})
    for same in (np.int64(3), 3.0, np.float64(3.0)):
        b = fn(PATH3, 3.0, **{kw: same})
        np.testing.assert_array_equal(np.asarray(a[0]), np.asarray(b[0]))


@pytest.mark.parametrize("fn, _", SINGLE, ids=lambda x: getattr(x, "__name__", x))
def test_edge_arrays_must_be_rectangular_and_real(fn, _):
    with pytest.raises(StructureError, match="edge_index"):
        fn([[0, 1], [1]], 2)
    with pytest.raises(StructureError, match="edge_weight"):
        fn(PATH3, 3, edge_weight=["a", "b", "c", "d"])
    with pytest.raises(StructureError, match="edge_weight"):  # no silent cast to the real part
        fn(PATH3, 3, edge_weight=np.ones(4) * 1j)
    with pytest.raises(StructureError, match="edge_weight"):
        fn(PATH3, 3, edge_weight=[[1, 1], [1]])


@pytest.mark.parametrize("fn", BATCH_FUNCTIONS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("workers", [0, -1, "a", 1.5])
def test_workers_must_be_a_positive_integer(fn, workers):
    with pytest.raises(SpecError, match="workers"):
        fn([(PATH3, 3)], 2, workers=workers)


def test_magnetic_potential_must_be_a_number():
    for q in ("abc", None, float("nan"), -0.1):
        with pytest.raises(SpecError, match="potential q"):
            magnetic_laplacian_pe(PATH3, 3, k=2, q=q)


def test_large_edgeless_graph_and_k_close_to_n_on_the_sparse_path():
    """Two raw errors of the sparse eigen path: an edgeless graph (magnetic) and ARPACK refusing
    ``k`` close to ``n`` (now a fallback); the answer is the dense one."""
    r = magnetic_laplacian_pe(np.zeros((2, 0), int), 8, k=2, dense_max=5)
    assert r.pe.shape == (8, 2) and not r.mask.any()
    i = np.arange(8)
    ei = np.stack([i, (i + 1) % 8])
    for fn in (laplacian_pe, magnetic_laplacian_pe):
        np.testing.assert_allclose(fn(ei, 8, k=8, dense_max=5).eigvals, fn(ei, 8, k=8).eigvals, atol=1e-9)


# ----------------------------------------------------------------------------- 9. sizes
def test_k_is_capped_before_any_allocation():
    with pytest.raises(SpecError, match="4096"):
        laplacian_pe(PATH3, 3, k=10**9)
    with pytest.raises(SpecError, match="4096"):
        laplacian_pe_batch([(PATH3, 3)], 10**5)
    with pytest.raises(SpecError, match="4096"):
        random_walk_pe(PATH3, 3, walk_length=10**5)


@pytest.fixture(scope="module")
def long_path():
    n = 100_000
    return Structure("tree", ["n"] * n, parent=np.arange(-1, n - 1))


@pytest.mark.parametrize("spec", ["spd", "peg:2", "graphkv"])
def test_dense_pairwise_families_raise_limit_error_before_allocating(long_path, spec):
    with pytest.raises(LimitError, match="max_memory_bytes"):
        compute_coords(long_path, spec)


def test_pairwise_caps_can_be_raised_or_lowered():
    rng = np.random.default_rng(6)
    ei = random_connected(30, 20, rng)
    with pytest.raises(LimitError):
        hop_distances(ei, 30, max_bytes=1000)
    with pytest.raises(LimitError):
        peg_distances(ei, 30, k=2, max_bytes=1000)
    with pytest.raises(LimitError):
        graph_kv_reads(ei, 30, max_bytes=100)
    with pytest.raises(LimitError):
        tr.tree_distance(np.arange(-1, 29), max_bytes=100)
    d = hop_distances(ei, 30, max_bytes=None)
    import scipy.sparse.csgraph as csg

    A = (dense_adjacency(ei, 30) > 0).astype(float)
    np.testing.assert_array_equal(d, csg.shortest_path(A, unweighted=True).astype(np.int64))
    with pytest.raises(ShapeError, match="edge_index"):
        graph_kv_layout([0, 1], [[0, 1.5], [1, 0]])


# ----------------------------------------------------------------------------- 11. RWSE work
def test_rwse_of_a_huge_star_is_refused_at_once_and_computed_under_a_raised_cap():
    n = 100_000
    star = Structure("tree", ["n"] * (n + 1), parent=np.r_[-1, np.zeros(n, dtype=np.int64)])
    with pytest.raises(LimitError, match="max_work"):
        compute_coords(star, "rw:8")
    # a small star on the sparse path: the hub returns after every even step, a leaf with 1/m
    m = 300
    ei = np.stack([np.zeros(m, int), np.arange(1, m + 1)])
    with pytest.raises(LimitError, match="max_work"):
        random_walk_pe(ei, m + 1, walk_length=8, dense_max=0, max_work=1000)
    got = random_walk_pe(ei, m + 1, walk_length=8, dense_max=0, max_work=None, dtype=np.float64)
    even = np.arange(8) % 2 == 1
    np.testing.assert_allclose(got[0], np.where(even, 1.0, 0.0), atol=1e-12)
    np.testing.assert_allclose(got[1:], np.tile(np.where(even, 1 / m, 0.0), (m, 1)), atol=1e-12)


def test_rwse_blocks_split_under_a_small_entry_budget():
    from structpos.coords._graph_utils import as_graph
    from structpos.coords.random_walk import _sparse_rwse

    rng = np.random.default_rng(7)
    ei = random_connected(60, 60, rng)
    g = as_graph(ei, 60)
    ref = ref_rwse(dense_adjacency(ei, 60, self_loops=True), 7)
    np.testing.assert_allclose(_sparse_rwse(g, 7, True, block_entries=400), ref, atol=1e-12)
    np.testing.assert_allclose(_sparse_rwse(g, 7, False, block_entries=400), ref, atol=1e-12)
    with pytest.raises(LimitError, match="block_entries"):
        _sparse_rwse(g, 7, True, block_entries=3)
