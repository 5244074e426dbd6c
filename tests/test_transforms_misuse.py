"""Misuse of the PyG transforms: bad options fail at construction, bad data with one structpos error."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("torch_geometric")
from torch_geometric.data import Data, HeteroData

from structpos.exceptions import InputError, ShapeError, SpecError
from structpos.transforms import (
    AddLaplacianPE,
    AddMagneticLaplacianPE,
    AddRandomWalkPE,
    AddResistanceDistance,
    AddShortestPathDistance,
)

PATH = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
TRANSFORMS = {
    "lap": lambda: AddLaplacianPE(2),
    "rw": lambda: AddRandomWalkPE(3),
    "spd": lambda: AddShortestPathDistance(),
    "res": lambda: AddResistanceDistance(),
    "mag": lambda: AddMagneticLaplacianPE(2),
}


def hetero() -> HeteroData:
    h = HeteroData()
    h["a"].x = torch.zeros(3, 1)
    h["a", "to", "a"].edge_index = PATH
    return h


@pytest.mark.parametrize("name", list(TRANSFORMS))
def test_hetero_data_is_refused_with_what_is_needed(name):
    transform = TRANSFORMS[name]()
    with pytest.raises(InputError, match=r"needs a homogeneous torch_geometric.data.Data, got HeteroData"):
        transform(hetero())
    with pytest.raises(InputError, match="got dict"):
        transform({"edge_index": PATH, "num_nodes": 3})
    transform(Data(edge_index=PATH, num_nodes=3))  # the homogeneous graph still goes through


@pytest.mark.parametrize(
    "make", [lambda: AddLaplacianPE(2, attr_name=None), lambda: AddRandomWalkPE(2, attr_name=None)]
)
def test_x_with_another_row_count_is_a_shape_error(make):
    with pytest.raises(ShapeError, match=r"data.x must have one row per node, \(3, F\).*given \(5, 4\)"):
        make()(Data(edge_index=PATH, num_nodes=3, x=torch.zeros(5, 4)))
    out = make()(Data(edge_index=PATH, num_nodes=3, x=torch.zeros(3, 4)))
    assert out.x.shape == (3, 6)


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: AddLaplacianPE(k=-1), "k must be an integer ≥ 1, got -1"),
        (lambda: AddLaplacianPE(k=0), "k must be an integer"),
        (lambda: AddLaplacianPE(k=2.5), "k must be an integer"),
        (lambda: AddLaplacianPE(2, bogus=1), "unknown option 'bogus'"),
        (lambda: AddLaplacianPE(2, tol=-1.0), "tol"),
        (lambda: AddLaplacianPE(2, dtype="float32"), "dtype"),
        (lambda: AddLaplacianPE(2, attr_name=3), "attr_name"),
        (lambda: AddRandomWalkPE(walk_length=-2), "walk_length must be an integer ≥ 1, got -2"),
        (lambda: AddRandomWalkPE(walk_length=0), "walk_length"),
        (lambda: AddRandomWalkPE(3, dtype=torch.int64), "dtype"),
        (lambda: AddRandomWalkPE(3, symmetrize="no"), "symmetrize"),
        (lambda: AddShortestPathDistance(max_dist=-1), "max_dist"),
        (lambda: AddShortestPathDistance(attr_name=None), "attr_name"),
        (lambda: AddResistanceDistance(dtype=None), "dtype"),
        (lambda: AddMagneticLaplacianPE(k=-1), "k must be an integer"),
        (lambda: AddMagneticLaplacianPE(2, q=float("nan")), "q must be a finite number"),
        (lambda: AddMagneticLaplacianPE(2, q=-0.1), "q must be a finite number"),
    ],
)
def test_bad_options_fail_at_construction(make, match):
    with pytest.raises(SpecError, match=match):
        make()


def test_good_options_still_construct_and_run():
    d = Data(edge_index=PATH, num_nodes=3)
    assert AddShortestPathDistance(max_dist=0)(d.clone()).spd.view(3, 3).diagonal().tolist() == [0, 0, 0]
    out = AddLaplacianPE(2, method="dense", tol=1e-8, attr_name="pe", eigvals_attr=None)(d.clone())
    assert out.pe.shape == (3, 2) and "laplacian_eigenvalues" not in out
    assert AddRandomWalkPE(2, dtype=torch.float64)(d.clone()).random_walk_pe.dtype == torch.float64
