"""The stage of a record's failure travels in a wrapper, not on the error: ``coords`` failures are
reported as such, and :func:`encode_payload` raises the family's own error."""

from __future__ import annotations

import numpy as np
import pytest

from structpos.coords import COORDS, CoordFamily
from structpos.pipeline import EncodeOptions
from structpos.pipeline.encode import encode_one, encode_payload
from structpos.pipeline.records import Record


class FamilyBroke(ValueError):
    pass


def _broken(s, arg):
    raise FamilyBroke(f"no coordinates for {s.num_nodes} nodes")


def _wrong_shape(s, arg):
    return {"w": np.zeros(s.num_nodes + 1)}


@pytest.fixture
def families():
    COORDS.add(CoordFamily("broken", _broken))
    COORDS.add(CoordFamily("wrongshape", _wrong_shape))
    try:
        yield
    finally:
        COORDS.remove("broken")
        COORDS.remove("wrongshape")


@pytest.mark.parametrize("family, error_type", [("broken", "FamilyBroke"), ("wrongshape", "ValueError")])
def test_a_coordinate_failure_is_stage_coords_and_a_parse_failure_stage_parse(families, family, error_type):
    _, err = encode_one(Record("r", "[1, 2]", "r"), EncodeOptions("json", family))
    assert (err["stage"], err["error_type"]) == ("coords", error_type)
    _, err = encode_one(Record("r", "[1,", "r"), EncodeOptions("json", family))
    assert (err["stage"], err["error_type"]) == ("parse", "ParseError")


def test_encode_payload_raises_the_familys_own_error_without_a_stage_attribute(families):
    with pytest.raises(FamilyBroke, match="no coordinates for 3 nodes") as info:
        encode_payload("r", "[1, 2]", "json", "broken")
    assert not [k for k in vars(info.value) if "stage" in k]
