"""The benchmark behind `python -m dali_loaders bench` (run.py), `python -m dali_loaders.bench.stages`
(where the image loader's time goes, stage by stage) and `python -m dali_loaders.bench.cifar_stages`
(the same for the CIFAR-10 train loader). It ships inside the package so that an installed wheel
can measure its own machine."""
