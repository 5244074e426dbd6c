"""One scheduler for batched per-size-group work (LapPE, magnetic LapPE, RWSE).

Graphs of a batch are grouped by size (:func:`._graph_utils.group_by_size`); each group is one
dense batched kernel call (a stacked ``eigh`` or matrix product) on the group's zero-padded
dense adjacencies, which :func:`run_dense_groups` builds from the packed edges of the batch. Groups are independent and
their kernels release the GIL, so light groups (``S <= SMALL`` nodes) run concurrently on a
thread pool with BLAS limited to one thread (OpenBLAS's limit is process-wide, so it is set once
around the pool), while heavy groups run one after another with BLAS's own threads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import numpy as np

from ._eigen import SMALL, single_blas_thread
from ._graph_utils import auto_workers, bucket_edges, group_by_size

__all__ = ["run_dense_groups", "run_size_groups"]

T = TypeVar("T")


def run_size_groups(
    tasks: Sequence[T],
    run: Callable[[T], None],
    size_of: Callable[[T], int],
    cost_of: Callable[[T], float],
    *,
    workers: int | None,
    num_graphs: int,
    small: int = SMALL,
) -> None:
    """Run ``run(task)`` for every size-group task, light ones concurrently.

    Parameters
    ----------
    tasks : sequence
        One task per size group; ``run`` must write disjoint outputs (it is called from threads).
    run : callable
        The group kernel.
    size_of, cost_of : callable
        A task's padded size ``S`` and its relative cost (e.g. ``len(group) * S**3``); the
        costliest tasks start first.
    workers : int or None
        Thread count (``None``: :func:`._graph_utils.auto_workers` decides from the batch size).
    num_graphs : int
        Graphs in the whole batch (for the ``workers=None`` rule).
    small : int
        Groups with ``S <= small`` are light: one BLAS thread each, run on the pool.

    Examples
    --------
    >>> done = []
    >>> run_size_groups([3, 500, 10], done.append, size_of=lambda s: s, cost_of=lambda s: s**3,
    ...                 workers=1, num_graphs=3)
    >>> done  # light groups (costliest first), then heavy ones
    [10, 3, 500]
    """
    ordered = sorted(tasks, key=cost_of, reverse=True)
    light = [t for t in ordered if size_of(t) <= small]
    heavy = [t for t in ordered if size_of(t) > small]
    nw = min(auto_workers(workers, num_graphs, len(light)), max(len(light), 1))
    with single_blas_thread():  # OpenBLAS's limit is process-wide: set once, around the pool
        if nw <= 1:
            for t in light:
                run(t)
        else:
            with ThreadPoolExecutor(nw) as ex:  # LAPACK / BLAS release the GIL
                for _ in ex.map(run, light):
                    pass
    for t in heavy:
        run(t)


def run_dense_groups(
    sizes: np.ndarray,
    packed: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    run: Callable[[np.ndarray, np.ndarray], None],
    *,
    bucket: int = 1,
    workers: int | None = None,
    build: Callable[[np.ndarray, np.ndarray, int, int], Any] | None = None,
    build_members: Callable[[np.ndarray, int], Any] | None = None,
) -> None:
    """Call ``run(members, A)`` once per size group of a batch of graphs, light groups concurrently.

    Parameters
    ----------
    sizes : numpy.ndarray
        ``(B,)`` node counts of the graphs.
    packed : tuple of numpy.ndarray
        ``(row, col, weight, gid)``: their edges from :func:`._graph_utils.packed_edges`.
    run : callable
        ``run(members, A)`` with ``members`` the indices (into ``sizes``) of one group's ``G``
        graphs and ``A`` their ``(G, S, S)`` float64 adjacencies, zero-padded to the group's
        size ``S`` (duplicate edges summed, not symmetrised). Called from threads: it must
        write disjoint outputs. Empty graphs are skipped.
    bucket : int
        Sizes are rounded up to a multiple of ``bucket`` (fewer, more padded groups).
    workers : int or None
        As :func:`run_size_groups`.
    build : callable, optional
        ``build(flat, weights, G, S)`` makes what ``run`` receives instead of ``A`` from the
        group's edges (``A.ravel()[flat] += weights`` in edge order gives ``A``), e.g. a
        compiled kernel that goes straight to the group's Laplacians.
    build_members : callable, optional
        ``build_members(members, S)`` makes what ``run`` receives from the group's graph indices
        alone (it reads the packed edges itself): the edges are then not sorted into groups.

    Examples
    --------
    >>> from structpos.coords._graph_utils import Graph, packed_edges
    >>> gs = [Graph(np.array([[0], [1]]), n, None, False, "g") for n in (2, 3, 2)]
    >>> seen = []
    >>> run_dense_groups(np.array([2, 3, 2]), packed_edges(gs), lambda m, A: seen.append((m.tolist(), A.shape)),
    ...                  workers=1)
    >>> sorted(seen)  # graphs 0 and 2 padded to 2 nodes, graph 1 to 3
    [([0, 2], (2, 2, 2)), ([1], (1, 3, 3))]
    """
    row, col, weight, gid = packed
    groups = {S: members for S, members in group_by_size(sizes, bucket).items() if S > 0}
    if build_members is not None:
        run_size_groups(
            list(groups.items()),
            lambda t: run(t[1], build_members(t[1], t[0])),
            size_of=lambda t: t[0],
            cost_of=lambda t: len(t[1]) * t[0] ** 3,
            workers=workers,
            num_graphs=len(sizes),
        )
        return
    edges = bucket_edges(groups, len(sizes), row, col, gid)

    def task(t) -> None:
        (S, members), (sel, flat) = t
        G = len(members)
        if build is not None:
            run(members, build(flat, weight[sel], G, S))
            return
        A = np.bincount(flat, weights=weight[sel], minlength=G * S * S).astype(np.float64, copy=False)
        run(members, A.reshape(G, S, S))

    run_size_groups(
        list(zip(groups.items(), edges)),
        task,
        size_of=lambda t: t[0][0],
        cost_of=lambda t: len(t[0][1]) * t[0][0] ** 3,
        workers=workers,
        num_graphs=len(sizes),
    )
