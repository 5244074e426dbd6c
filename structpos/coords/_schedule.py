"""One scheduler for batched per-size-group work (LapPE, magnetic LapPE, RWSE).

Graphs of a batch are grouped by size (:func:`._graph_utils.group_by_size`); each group is one
dense batched kernel call (a stacked ``eigh`` or matrix product). Groups are independent and
their kernels release the GIL, so light groups (``S <= SMALL`` nodes) run concurrently on a
thread pool with BLAS limited to one thread (OpenBLAS's limit is process-wide, so it is set once
around the pool), while heavy groups run one after another with BLAS's own threads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from ._eigen import SMALL, single_blas_thread
from ._graph_utils import auto_workers

__all__ = ["run_size_groups"]

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
