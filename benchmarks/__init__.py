"""`make bench`: the memory and agent benchmarks (outside the installed package).

Run from the repository root: ``python -m benchmarks.memory`` and ``python -m benchmarks.agent``.
"""
