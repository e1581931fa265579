"""The developers' micro-benchmarks, run from the repository's root (not installed with the
package): `python -m benchmarks.stages` (where the image loader's time goes, stage by stage),
`python -m benchmarks.cifar_stages` (the same for the CIFAR-10 train loader),
`python -m benchmarks.augment_kernels` (the augmentation kernels, and their bit-exactness
digest), `python -m benchmarks.first_build` (a fresh process's first batch) and
`python -m benchmarks.screening` (what screening files from strangers costs); on a GPU,
`python -m benchmarks.gpu_probe` and `bash benchmarks/on_gpu.sh` (the GPU work, in two calls).
The user's benchmark is `python -m dali_loaders bench` (dali_loaders/bench/)."""
