"""batch_transform= as DataLoader users write a collate_fn: any callable (images, labels) ->
(images, labels) on each whole batch, the same in the DALI loader and its twin, its draws
seeded per batch by the loader (not by the training script's global generators)."""
import numpy as np
import pytest
import torch
from cifar_data import index_images, write_cifar
from torchvision.transforms import v2

from dali_loaders import get_cifar_iter_dali, get_cifar_iter_torch
from dali_loaders.distributed import EpochSampler, Shard
from dali_loaders.transforms.mixing import CallableBatchTransform

CLASSES = 10


class RandomMixUp(torch.nn.Module):
    """torchvision's classification reference v1 mixing, rewritten from its documented
    behaviour: with probability p the batch is mixed with itself rolled by one, with one
    lambda ~ Beta(alpha, alpha); the int64 targets become one-hot and are mixed alike."""

    def __init__(self, num_classes: int, p: float = 0.5, alpha: float = 1.0):
        super().__init__()
        self.num_classes, self.p, self.alpha = num_classes, p, alpha

    def forward(self, batch: torch.Tensor, target: torch.Tensor):
        assert batch.ndim == 4 and batch.is_floating_point(), batch.shape
        assert target.dtype == torch.int64 and target.ndim == 1, target.dtype
        target = torch.nn.functional.one_hot(target, self.num_classes).to(batch.dtype)
        if torch.rand(1).item() >= self.p:
            return batch, target
        lam = float(torch.distributions.Beta(self.alpha, self.alpha).sample())
        return batch * lam + batch.roll(1, 0) * (1.0 - lam), target * lam + target.roll(1, 0) * (1.0 - lam)


def shifted(images, labels):
    """A user's trivial callable: flips the images left-right, counts labels from 1."""
    return images.flip(-1), labels + 1


@pytest.fixture(scope="module")
def indexed_cifar(tmp_path_factory):
    return write_cifar(str(tmp_path_factory.mktemp("callables")), "cifar10", 150, 37, images=index_images)


# the train split's order (shuffled), without per-sample draws, which differ between the backends
UNAUGMENTED = v2.Compose([v2.ToImage(), v2.ToDtype(torch.float32, scale=True)])


def both(root, split, batch_transform, seed=3):
    """(DALI's batches, the twin's), each loader iterated after the same torch seed."""
    out = []
    transform = UNAUGMENTED if split == "train" else None
    for factory, threads in ((get_cifar_iter_dali, 2), (get_cifar_iter_torch, 0)):
        torch.manual_seed(1234)
        out.append(list(factory(split, root, 16, threads, seed=seed, batch_transform=batch_transform,
                                transform=transform)))
    return out


@pytest.mark.parametrize("split", ["val", "train"])
def test_random_mixup_gives_the_same_batches_in_both_loaders(indexed_cifar, split):
    dali, twin = both(indexed_cifar, split, RandomMixUp(CLASSES, p=0.5, alpha=0.8))
    assert len(dali) == len(twin) > 2
    mixed = 0
    for (x, y), (u, v) in zip(dali, twin):
        assert y.shape == (len(x), CLASSES) and y.dtype == torch.float32
        assert torch.allclose(y, v, atol=1e-6) and (x - u).abs().max() < 1e-5
        assert torch.allclose(y.sum(1), torch.ones(len(y)))
        mixed += bool((y.max(1).values < 1).any())
    assert 0 < mixed < len(dali)   # p=0.5: some batches mixed, some not


def test_the_draws_follow_the_loaders_seed_not_the_scripts(indexed_cifar):
    mixing = RandomMixUp(CLASSES, p=1.0, alpha=1.0)
    first, again = (list(get_cifar_iter_dali("val", indexed_cifar, 16, 2, seed=3, batch_transform=mixing))
                    for _ in range(2))
    other = list(get_cifar_iter_dali("val", indexed_cifar, 16, 2, seed=4, batch_transform=mixing))
    assert all(torch.equal(a[1], b[1]) for a, b in zip(first, again))
    assert not all(torch.equal(a[1], b[1]) for a, b in zip(first, other))
    torch.manual_seed(0)
    state = torch.get_rng_state()
    list(get_cifar_iter_dali("val", indexed_cifar, 16, 2, seed=3, batch_transform=mixing))
    assert torch.equal(torch.get_rng_state(), state)   # the script's generator as it was


def test_a_trivial_callable_is_applied_to_each_whole_batch(indexed_cifar):
    dali, twin = both(indexed_cifar, "val", shifted)
    plain = list(get_cifar_iter_dali("val", indexed_cifar, 16, 2, seed=3))
    assert len(dali) == len(twin) == len(plain)
    for (x, y), (u, v), (images, labels) in zip(dali, twin, plain):
        assert torch.equal(x, images.flip(-1)) and torch.equal(y, labels + 1) and y.dtype == torch.int64
        assert (x - u).abs().max() < 1e-5 and torch.equal(y, v)


def hook(function, seed=0):
    return CallableBatchTransform(function, EpochSampler(100, shuffle=True, seed=seed, shard=Shard(0, 1, 0)))


@pytest.mark.parametrize("returned,said", [(lambda x, y: x, "returned a Tensor"),
                                           (lambda x, y: (x, y, y), "returned a tuple of 3"),
                                           (lambda x, y: (x, y.numpy()), "returned a tuple of 2")])
def test_a_callable_returning_something_else_is_named(returned, said):
    images, labels = torch.zeros(4, 3, 8, 8), torch.arange(4, dtype=torch.int32)
    with pytest.raises(TypeError, match=f"batch_transform .*<lambda> {said}; it must return \\(images, labels\\)"):
        hook(returned)(images, labels, 0, 0)


def test_each_batch_draws_from_seed_epoch_rank_and_batch():
    images, labels = torch.zeros(4, 3, 8, 8), torch.arange(4)
    noise = lambda x, y: (x + torch.rand(()) + float(np.random.rand()), y)   # noqa: E731
    draw = lambda seed, epoch, batch: float(hook(noise, seed)(images, labels, epoch, batch)[0][0, 0, 0, 0])  # noqa: E731
    assert draw(1, 2, 3) == draw(1, 2, 3)
    assert len({draw(1, 2, 3), draw(2, 2, 3), draw(1, 3, 3), draw(1, 2, 4)}) == 4


def test_a_batch_transform_that_is_not_callable_is_refused(indexed_cifar):
    for factory in (get_cifar_iter_dali, get_cifar_iter_torch):
        with pytest.raises(TypeError, match="batch_transform must be callable"):
            factory("val", indexed_cifar, 4, 1, batch_transform=42)
