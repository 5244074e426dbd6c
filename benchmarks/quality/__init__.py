"""Quality benchmarks: where structural positions help a small transformer, and where they do not.

``python -m benchmarks.quality --quick | --full`` (see :mod:`benchmarks.quality.__main__`);
one file per task, the shared model in :mod:`benchmarks.quality.model`, results in
``benchmarks/quality/RESULTS.md``.
"""
