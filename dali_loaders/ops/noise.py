"""Seeded noise: a seed per sample drawn by the graph, and the Python face of
DaliLoadersGaussianNoise (csrc/noise_op.cc, in the augmentation library), which adds v2's
GaussianNoise to uint8 or float32 images on the CPU with normals drawn from that seed."""
from .elastic import usable  # noqa: F401  (the operator is in the augmentation library, as elastic's)


def sample_seeds():
    """An int32 seed per sample for an operator that draws its own numbers from it
    (fn.random: checkpoints resume it, and each epoch draws new ones)."""
    from nvidia.dali import fn, types

    return fn.random.uniform(range=[0, 2 ** 31 - 1], dtype=types.INT32)


def gaussian_noise(data, mean: float, sigma: float, clip: bool):
    """fn.dali_loaders_gaussian_noise: mean + sigma * N(0, 1) added to every value of `data`
    (uint8 or float32, CPU), mean and sigma in the data's units (levels for uint8)."""
    from nvidia.dali import fn

    return fn.dali_loaders_gaussian_noise(data, noise_seed=sample_seeds(), mean=float(mean), sigma=float(sigma),
                                          clip=bool(clip))
