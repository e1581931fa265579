"""The benchmark harness behind `python -m dali_loaders bench` (see run.py).

It ships inside the package so that an installed wheel can measure its own machine;
`benchmarks/` in the repository keeps the research scripts (stages.py) that build on it.
"""
