"""Batched graph input (``as_graphs``): the PyG fast path and the one-pass index check."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import random_graphs

from structpos import StructureError
from structpos.coords._graph_utils import _unchecked, as_graphs


def test_plain_data_fast_path_equals_the_general_path():
    from torch_geometric.data import Data

    d = Data(edge_index=torch.tensor([[0, 1], [1, 2]]), num_nodes=3)
    (fast,) = as_graphs([d])
    slow = _unchecked(d, None, None, False, "graph[0]")
    assert type(fast) is type(slow) and vars(fast).keys() == vars(slow).keys()
    for field in vars(slow):
        np.testing.assert_array_equal(getattr(fast, field), getattr(slow, field))
    assert fast.edge_index.dtype == slow.edge_index.dtype and fast.name == "graph[0]"
    with pytest.raises(AttributeError):  # still frozen
        fast.num_nodes = 4


@pytest.mark.parametrize("bad, where", [(3, "graph[3]"), (0, "graph[0]"), (5, "graph[5]")])
def test_out_of_range_edge_named_in_a_batch_with_empty_graphs(bad, where):
    ok = np.array([[0, 1], [1, 0]])
    gs = [(ok, 2), (np.zeros((2, 0), np.int64), 0), (np.zeros((2, 0), np.int64), 4), (ok, 2), (ok, 3), (ok, 2)]
    as_graphs(gs)  # all valid
    gs[bad] = (np.array([[0, 1, 1], [1, 0, gs[bad][1]]]), gs[bad][1])  # node N of an N-node graph
    with pytest.raises(StructureError, match=r"refers to a node outside") as e:
        as_graphs(gs)
    assert where in str(e.value) and "edge 2" in str(e.value)
    gs[bad] = (np.array([[0, -1], [1, 0]]), 2)
    with pytest.raises(StructureError, match="edge 1"):
        as_graphs(gs)


def _data_batch(count=60, seed=0):
    from torch_geometric.data import Data

    graphs = random_graphs(np.random.default_rng(seed), count, max_nodes=30)
    return [Data(edge_index=torch.from_numpy(ei), num_nodes=n) for ei, n in graphs]


@pytest.mark.parametrize("family", ["lap", "rw", "maglap"])
def test_a_pyg_batch_read_column_wise_gives_the_bytes_of_the_general_path(family):
    """A batch of plain ``Data`` skips the per-graph ``Graph`` objects (``GraphBatch`` columns); the
    same graphs as ``(edge_index, num_nodes)`` tuples go the general way: the outputs are the same bytes."""
    from structpos.coords.laplacian import laplacian_pe_batch
    from structpos.coords.magnetic import magnetic_laplacian_pe_batch
    from structpos.coords.random_walk import random_walk_pe_batch

    fn = {"lap": laplacian_pe_batch, "rw": random_walk_pe_batch, "maglap": magnetic_laplacian_pe_batch}[family]
    data = _data_batch()
    tuples = [(d.edge_index.numpy(), d.num_nodes) for d in data]
    assert as_graphs(data).graphs is None and as_graphs(tuples).graphs is not None  # the two paths
    got, want = fn(data, 4), fn(tuples, 4)
    for a, b in zip(got, want):
        a = a.numpy() if isinstance(a, torch.Tensor) else a
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def test_graph_batch_items_and_subsets_equal_the_graphs():
    data = _data_batch(seed=1)
    batch = as_graphs(data)
    for i in (0, 7, len(data) - 1, -1):
        g = batch[i]
        np.testing.assert_array_equal(g.edge_index, data[i].edge_index.numpy())
        assert g.num_nodes == data[i].num_nodes and g.name == f"graph[{i % len(data)}]"
    with pytest.raises(IndexError):
        batch[len(data)]
    idx = np.array([5, 2, 40])
    sub = batch.take(idx)
    assert sub.sizes.tolist() == [data[i].num_nodes for i in idx]
    np.testing.assert_array_equal(sub.edge_index, np.concatenate([data[i].edge_index.numpy() for i in idx], 1))
    assert [g.num_nodes for g in batch[3:6]] == [d.num_nodes for d in data[3:6]]


def test_batches_read_an_iterator_once_and_refuse_one_graph():
    from structpos import InputError
    from structpos.coords.laplacian import laplacian_pe_batch
    from structpos.coords.random_walk import random_walk_pe_batch

    data = _data_batch(count=8, seed=2)
    for fn in (laplacian_pe_batch, random_walk_pe_batch):
        want = fn(data, 3)
        got = fn(iter(data), 3)
        assert all(torch.equal(a, b) for a, b in zip(got, want))  # torch in, torch out, from a generator too
        for one in (data[0], data[0].edge_index, data[0].edge_index.numpy()):
            with pytest.raises(InputError, match=r"sequence of graphs, got one .*: pass \[graph\]"):
                fn(one, 3)
        with pytest.raises(InputError, match="sequence of graphs, got int"):
            fn(5, 3)
