"""The PyG transforms inside a real PyG pipeline: dataset transform=, Compose, DataLoader."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("torch_geometric")
from torch_geometric.data import Data
from torch_geometric.loader import DataLoader
from torch_geometric.transforms import AddLaplacianEigenvectorPE, Compose
from torch_geometric.transforms import AddRandomWalkPE as PygRW
from torch_geometric.utils import to_dense_adj, to_undirected

from structpos.coords.distance import hop_distances, resistance_distance
from structpos.coords.magnetic import magnetic_laplacian_pe
from structpos.transforms import (
    AddLaplacianPE,
    AddMagneticLaplacianPE,
    AddRandomWalkPE,
    AddResistanceDistance,
    AddShortestPathDistance,
)


class ListDataset(torch.utils.data.Dataset):
    """The smallest dataset honouring PyG's ``transform=`` contract."""

    def __init__(self, items, transform=None):
        self.items, self.transform = items, transform

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        d = self.items[i].clone()
        return self.transform(d) if self.transform else d


def make_graphs(count=12, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        n = int(rng.integers(6, 20))
        ring = torch.stack([torch.arange(n), (torch.arange(n) + 1) % n])
        chords = torch.from_numpy(rng.integers(0, n, (2, n // 2)))
        ei = torch.cat([ring, chords], 1)
        ei = to_undirected(ei[:, ei[0] != ei[1]], num_nodes=n)
        out.append(Data(x=torch.ones(n, 2), edge_index=ei, num_nodes=n))
    return out


def test_rw_transform_identical_to_pyg():
    for d in make_graphs():
        ours = AddRandomWalkPE(16)(d.clone()).random_walk_pe
        ref = PygRW(16)(d.clone()).random_walk_pe
        assert ours.dtype == torch.float32
        torch.testing.assert_close(ours, ref, atol=2e-6, rtol=0)


def test_lap_transform_spans_pyg_eigenvectors_and_batches():
    graphs = make_graphs()
    ds = ListDataset(graphs, transform=Compose([AddLaplacianPE(4), AddRandomWalkPE(5)]))
    for d, g in zip(ds, graphs):
        ref = AddLaplacianEigenvectorPE(4, is_undirected=True)(g.clone()).laplacian_eigenvector_pe.double()
        ours = d.laplacian_eigenvector_pe.double()
        # same eigenvalues: Rayleigh quotients of PyG's vectors with our normalised Laplacian
        A = to_dense_adj(g.edge_index, max_num_nodes=g.num_nodes)[0].double()
        dinv = A.sum(1).rsqrt()
        L = torch.eye(g.num_nodes, dtype=torch.float64) - dinv[:, None] * A * dinv[None, :]
        ref_ev = torch.einsum("ij,ij->j", ref, L @ ref)
        torch.testing.assert_close(d.laplacian_eigenvalues[0].double(), ref_ev, atol=1e-5, rtol=0)
        # and our vectors are eigenvectors of that Laplacian for those eigenvalues
        our_ev = torch.einsum("ij,ij->j", ours, L @ ours)
        torch.testing.assert_close(our_ev, ref_ev, atol=1e-5, rtol=0)
    batch = next(iter(DataLoader(ds, batch_size=5)))
    assert batch.laplacian_eigenvector_pe.shape == (batch.num_nodes, 4)
    assert batch.laplacian_eigenvalues.shape == (5, 4) and batch.laplacian_mask.all()
    assert batch.random_walk_pe.shape == (batch.num_nodes, 5)


def test_lap_transform_small_graph_pads_where_pyg_raises():
    d = Data(edge_index=torch.tensor([[0, 1], [1, 0]]), num_nodes=2)
    with pytest.raises(Exception):
        AddLaplacianEigenvectorPE(3)(d.clone())
    out = AddLaplacianPE(3)(d.clone())
    assert out.laplacian_mask.tolist() == [[True, False, False]]


def test_attr_name_none_appends_to_x():
    d = make_graphs(1)[0]
    out = AddLaplacianPE(3, attr_name=None)(d.clone())
    assert out.x.shape == (d.num_nodes, 2 + 3)
    out = AddRandomWalkPE(4, attr_name=None)(d.clone())
    assert out.x.shape == (d.num_nodes, 2 + 4)


def test_magnetic_transform():
    d = Data(edge_index=torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]]), num_nodes=4)
    out = AddMagneticLaplacianPE(2, q=0.1)(d.clone())
    pe, ev, _ = magnetic_laplacian_pe(d.edge_index, 4, 2, 0.1)
    torch.testing.assert_close(out.magnetic_laplacian_pe, torch.cat([pe.real, pe.imag], 1).float())
    torch.testing.assert_close(out.magnetic_eigenvalues, ev.float().view(1, -1))


def test_pairwise_transforms_rebuild_dense_biases_after_batching():
    graphs = make_graphs(4, seed=1)
    ds = ListDataset(graphs, transform=Compose([AddShortestPathDistance(3), AddResistanceDistance()]))
    batch = next(iter(DataLoader(ds, batch_size=4)))
    spd = to_dense_adj(batch.spd_index, batch.batch, batch.spd)
    res = to_dense_adj(batch.resistance_index, batch.batch, batch.resistance)
    for b, g in enumerate(graphs):
        n = g.num_nodes
        torch.testing.assert_close(spd[b, :n, :n].long(), hop_distances(g.edge_index, n, 3))
        torch.testing.assert_close(res[b, :n, :n], resistance_distance(g.edge_index, n).float())


def test_as_graphs_reads_plain_data_like_the_general_path():
    """``as_graphs`` reads a plain PyG ``Data`` (CPU int64 ``edge_index``, int ``num_nodes``, no
    weights) in a few attribute reads; the result equals the general path's, and every other
    form (weights, int32 indices, a tensor that requires grad, a ``num_nodes`` left to PyG) goes
    the general way with the same checks: a bad index still names the graph and the edge."""
    from structpos import StructureError
    from structpos.coords._graph_utils import _unchecked, as_graphs

    ei = to_undirected(torch.tensor([[0, 1, 2], [1, 2, 3]]))
    forms = [
        Data(edge_index=ei, num_nodes=4),
        Data(edge_index=ei, num_nodes=4, edge_weight=torch.rand(ei.shape[1])),
        Data(edge_index=ei.int(), num_nodes=4),
        Data(edge_index=ei.float().requires_grad_().long(), num_nodes=4),
        Data(edge_index=ei, x=torch.zeros(5, 1)),  # num_nodes from x
        Data(edge_index=torch.zeros((2, 0), dtype=torch.long), num_nodes=2),
    ]
    for directed in (None, True):
        got = as_graphs(forms, directed=directed)
        want = [_unchecked(d, None, None, directed, f"graph[{i}]") for i, d in enumerate(forms)]
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a.edge_index, b.edge_index)
            assert a.edge_index.dtype == np.int64 and (a.num_nodes, a.directed, a.name) == (
                b.num_nodes,
                b.directed,
                b.name,
            )
            assert (a.edge_weight is None) == (b.edge_weight is None)
    bad = Data(edge_index=torch.tensor([[0, 1], [1, 7]]), num_nodes=3)
    with pytest.raises(StructureError, match=r"graph\[1\].*edge 1.*outside 0..2"):
        as_graphs([forms[0], bad])
