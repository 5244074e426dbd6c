"""Registry of the quality tasks, in the order the issue lists them."""

from __future__ import annotations

from .addition import Addition
from .code_mlm import CodeMLM
from .dag_reachability import DAGReachability
from .doc_retrieval import DocRetrieval
from .graph_distance import GraphDistance
from .grid_copy import GridCopy
from .segment_graph import SegmentGraph
from .sorting_network import SortingNetwork
from .table_lookup import TableLookup
from .tree_root import TreeRoot
from .ud_relations import UDRelations
from .unit_lookup import UnitLookup

TASKS = {
    "table_lookup": TableLookup,
    "code_mlm": CodeMLM,
    "ud_relations": UDRelations,
    "graph_distance": GraphDistance,
    "dag_reachability": DAGReachability,
    "addition": Addition,
    "doc_retrieval": DocRetrieval,
    "tree_root": TreeRoot,
    "grid_copy": GridCopy,
    "sorting_network": SortingNetwork,
    "unit_lookup": UnitLookup,
    "segment_graph": SegmentGraph,
}
