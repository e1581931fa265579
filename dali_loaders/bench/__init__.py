"""The benchmark behind `python -m dali_loaders bench` (run.py), and `python -m dali_loaders.bench.stages`
(where the image loader's time goes, stage by stage). It ships inside the package so that an
installed wheel can measure its own machine."""
