"""The compiled LapPE helpers (native/laplacian.c, native/components.c): byte-identical to the pure path."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import random_graphs

from structpos import native
from structpos.coords._graph_utils import SENTINEL, as_graphs, edge_ptr, packed_edges
from structpos.coords.laplacian import _component_counts, _laplacian_stack, laplacian_pe_batch

lap = native.native_module("laplacian")
comp = native.native_module("components")
pytestmark = pytest.mark.skipif(lap is None or comp is None, reason="native LapPE helpers not built")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("bucket", [1, 8])
@pytest.mark.parametrize("weighted", [False, True])
def test_batch_is_byte_identical_to_the_pure_path(dtype, bucket, weighted):
    gs = random_graphs(np.random.default_rng(bucket), weighted=weighted)
    got = laplacian_pe_batch(gs, 6, dtype=dtype, bucket=bucket, workers=1)
    with native.pure_python():
        want = laplacian_pe_batch(gs, 6, dtype=dtype, bucket=bucket, workers=1)
    for a, b in zip(got, want):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert a.tobytes() == b.tobytes()


def test_component_counts_equal_csgraph():
    gs = as_graphs(random_graphs(np.random.default_rng(5), 120))
    sizes = np.array([g.num_nodes for g in gs])
    row, col, _, gid = packed_edges(gs)
    got = _component_counts(row, col, gid, sizes)
    with native.pure_python():
        want = _component_counts(row, col, gid, sizes)
    np.testing.assert_array_equal(got, want)


def test_entry_points_check_their_buffers():
    one, two = np.zeros(1, dtype=np.int64), np.array([0, 2], dtype=np.int64)
    with pytest.raises(TypeError, match="float64"):
        lap.graphs(np.array([0, 1]), np.array([1, 0]), two, one, np.empty((1, 2, 2), np.float32), SENTINEL, one.copy())
    counts = np.zeros(1, dtype=np.int64)
    two = np.array([0, 2], dtype=np.int64)
    comp.nontrivial(np.array([0, 1]), np.array([1, 0]), two, two, counts)
    assert counts.tolist() == [1]
    with pytest.raises(ValueError, match="graph 0, edge 1"):
        comp.nontrivial(np.array([0, 2]), np.array([1, 0]), two, two, counts)
    with pytest.raises(ValueError, match="offsets"):
        comp.nontrivial(np.array([0, 1]), np.array([1, 0]), np.array([0, 3]), two, counts)
    with pytest.raises(ValueError, match="lengths"):
        comp.nontrivial(np.array([0, 1]), np.array([1, 0]), two, two, np.zeros(2, dtype=np.int64))
    with pytest.raises(TypeError, match="int64"):
        comp.nontrivial(np.array([0, 1], dtype=np.int32), np.array([1, 0]), two, two, counts)


def test_mode_rows_equal_the_numpy_sign_rule():
    from structpos.coords._graph_utils import TIE_RTOL, canonical_sign_rows

    modes = native.native_module("lapmodes")
    if modes is None:
        pytest.skip("native lapmodes not built")
    rng = np.random.default_rng(7)
    G, S, k, c0 = 6, 9, 4, 2
    U = rng.standard_normal((G, S, S))
    U[0, :, c0] = 0.0  # an all-zero column
    U[1, :, c0] = -0.0
    U[2, 3, c0 + 1] = np.nan  # NaN anywhere: the pivot is the first entry
    U[3, :, c0] = [0.5, -0.5 * (1 - 1e-7), 0.1, 0, 0, 0, 0, 0, 0]  # a tie within TIE_RTOL: the first wins
    U[4, :, c0] = [0.5, -0.5 * (1 - 1e-5), 0.1, 0, 0, 0, 0, 0, 0]
    U[5, :, c0 + 2] = [-0.3, 0.3, 0, 0, 0, 0, 0, 0, 0]
    valid = rng.random((G, k)) < 0.7
    Vt = np.empty((G, k, S))
    modes.rows(U, c0, valid.astype(np.float64), 1 - TIE_RTOL, Vt)
    ref = np.ascontiguousarray(U[:, :, c0 : c0 + k].transpose(0, 2, 1))
    ref = canonical_sign_rows(ref) * valid[:, :, None] + 0.0
    assert Vt.tobytes() == ref.tobytes()
    with pytest.raises(ValueError, match="disagree"):
        modes.rows(U, S - k + 1, valid.astype(np.float64), 1 - TIE_RTOL, Vt)  # columns past the end
    with pytest.raises(ValueError, match="disagree"):
        modes.rows(U, -1, valid.astype(np.float64), 1 - TIE_RTOL, Vt)
    with pytest.raises(ValueError, match="disagree"):
        modes.rows(U, c0, np.ones((G, k + 1)), 1 - TIE_RTOL, Vt)
    with pytest.raises(TypeError, match="float64"):
        modes.rows(U.astype(np.float32), c0, valid.astype(np.float64), 1 - TIE_RTOL, Vt)
    with pytest.raises(TypeError, match="3D"):
        modes.rows(U[0], c0, valid.astype(np.float64), 1 - TIE_RTOL, Vt)


def test_place_equals_rows_and_scatter():
    from structpos.coords._graph_utils import TIE_RTOL, scatter_rows

    modes = native.native_module("lapmodes")
    if modes is None:
        pytest.skip("native lapmodes not built")
    rng = np.random.default_rng(11)
    G, S, k, c0 = 5, 7, 3, 1
    U = rng.standard_normal((G, S, S))
    U[0, :, c0] = -0.0
    U[1, 2, c0 + 1] = np.nan
    U[2, :, c0] = [0.5, -0.5 * (1 - 1e-7), 0.1, 0, 0, 0, 0]
    valid = (rng.random((G, k)) < 0.7).astype(np.float64)
    n = np.array([7, 5, 7, 3, 6], dtype=np.int64)  # padded graphs keep their first n rows
    ptr = np.concatenate([[0], np.cumsum(n)]).astype(np.int64)
    idx = np.array([0, 1, 2, 3, 4])
    Vt_ref = np.empty((G, k, S))
    modes.rows(U, c0, valid, 1 - TIE_RTOL, Vt_ref)
    pe_ref = np.zeros((int(ptr[-1]), k))
    scatter_rows(pe_ref, ptr, idx, n, Vt_ref.transpose(0, 2, 1))
    Vt, pe = np.empty((G, k, S)), np.zeros((int(ptr[-1]), k))
    modes.place(U, c0, valid, 1 - TIE_RTOL, n, ptr[:-1].copy(), Vt, pe)
    assert Vt.tobytes() == Vt_ref.tobytes() and pe.tobytes() == pe_ref.tobytes()
    with pytest.raises(ValueError, match="graph 4"):  # rows past the end of pe
        modes.place(U, c0, valid, 1 - TIE_RTOL, n, ptr[:-1] + 1, Vt, pe)
    with pytest.raises(ValueError, match="graph 0"):
        modes.place(U, c0, valid, 1 - TIE_RTOL, n + 1, ptr[:-1].copy(), Vt, pe)  # n > S
    with pytest.raises(ValueError, match="disagree"):
        modes.place(U, S - k + 1, valid, 1 - TIE_RTOL, n, ptr[:-1].copy(), Vt, pe)
    with pytest.raises(TypeError, match="int64"):
        modes.place(U, c0, valid, 1 - TIE_RTOL, n.astype(np.int32), ptr[:-1].copy(), Vt, pe)


def test_graphs_equals_numpy_laplacians():
    """The compiled build equals _laplacian_stack of the adjacencies run_dense_groups builds
    (np.bincount of the group's flat edge indices), signed zeros included."""
    gs = as_graphs(random_graphs(np.random.default_rng(13), 60))
    row, col, _, gid = packed_edges(gs)
    B = len(gs)
    eptr = edge_ptr(gid, B)
    S = 40
    members = np.array([i for i, g in enumerate(gs) if g.num_nodes > 0][::2], dtype=np.int64)
    G = len(members)
    pos = np.full(B, -1)
    pos[members] = np.arange(G)
    keep = pos[gid] >= 0
    flat = (pos[gid][keep] * S + row[keep]) * S + col[keep]
    L_ref, iso_ref = _laplacian_stack(np.bincount(flat, minlength=G * S * S).astype(np.float64).reshape(G, S, S))
    L, iso = np.empty((G, S, S)), np.empty(G, dtype=np.int64)
    lap.graphs(row, col, eptr, members, L, SENTINEL, iso)
    assert L.tobytes() == L_ref.tobytes()
    np.testing.assert_array_equal(iso, iso_ref)
    with pytest.raises(ValueError, match="leaves the 3-node block"):
        lap.graphs(row, col, eptr, members, np.empty((G, 3, 3)), SENTINEL, iso)
    with pytest.raises(ValueError, match="member 0"):
        lap.graphs(row, col, eptr, np.full(G, B, dtype=np.int64), L, SENTINEL, iso)
    bad = eptr.copy()
    bad[-1] = row.size + 1
    with pytest.raises(ValueError, match="eptr"):
        lap.graphs(row, col, bad, members, L, SENTINEL, iso)
    with pytest.raises(ValueError, match="disagree"):
        lap.graphs(row, col, eptr, members, L, SENTINEL, np.empty(G + 1, dtype=np.int64))
