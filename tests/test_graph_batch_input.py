"""Batched graph input (``as_graphs``): the PyG fast path and the one-pass index check."""

from __future__ import annotations

import numpy as np
import pytest
import torch

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
