"""CIFAR on DALI: parity with torchvision, exact-once epochs, augmentation statistics,
DataLoader semantics and bad input."""
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
import torch
from cifar_data import index_images, write_cifar
from scipy import stats

from dali_loaders import get_cifar_iter_dali, get_cifar_iter_torch
from dali_loaders.recipes import CIFAR_MEAN, CIFAR_STD

N_TRAIN, N_TEST = 300, 70


@pytest.fixture(scope="module")
def cifar10(tmp_path_factory):
    return write_cifar(str(tmp_path_factory.mktemp("c10")), "cifar10", N_TRAIN, N_TEST)


@pytest.fixture(scope="module")
def cifar100(tmp_path_factory):
    return write_cifar(str(tmp_path_factory.mktemp("c100")), "cifar100", N_TRAIN, N_TEST)


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    return write_cifar(str(tmp_path_factory.mktemp("idx")), "cifar10", 203, 10, images=index_images)


def to_pixels(images, dataset="cifar10"):
    """Normalized float NCHW back to the uint8 NHWC the recipe started from."""
    mean = torch.tensor(CIFAR_MEAN[dataset]).view(1, 3, 1, 1)
    std = torch.tensor(CIFAR_STD[dataset]).view(1, 3, 1, 1)
    return ((images * std + mean) * 255).round().clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 1).numpy()


def centre_indices(images):
    """The index that index_images wrote into each image, read at the centre pixel, which
    every 32x32 crop of the 4-px padded image keeps."""
    rgb = to_pixels(images)[:, 16, 16].astype(np.int64)
    return (rgb[:, 0] << 16) | (rgb[:, 1] << 8) | rgb[:, 2]


def epoch_of(loader):
    seen, labels, sizes = [], [], []
    for images, y in loader:
        seen.append(centre_indices(images))
        labels.append(y.numpy())
        sizes.append(len(y))
    return np.concatenate(seen), np.concatenate(labels), sizes


# 1. val parity ------------------------------------------------------------------------


@pytest.mark.parametrize("dataset,batch_size", [("cifar10", 16), ("cifar100", 16), ("cifar10", 70)])
def test_val_matches_torchvision(request, dataset, batch_size):
    root = request.getfixturevalue(dataset)
    dali = get_cifar_iter_dali("val", root, batch_size, 2, dataset=dataset)
    twin = get_cifar_iter_torch("val", root, batch_size, 0, dataset=dataset)
    assert len(dali) == len(twin) == -(-N_TEST // batch_size)
    labels, worst = [], 0.0
    for (x, y), (u, v) in zip(dali, twin, strict=True):
        assert x.dtype == torch.float32 and x.shape == u.shape and x.shape[1:] == (3, 32, 32)
        assert y.dtype == torch.int64 and y.shape == (len(x),)
        assert torch.equal(y, v)
        worst = max(worst, (x - u).abs().max().item())
        labels.append(y)
    assert worst <= 1e-5
    classes = 10 if dataset == "cifar10" else 100
    expected = np.arange(N_TRAIN, N_TRAIN + N_TEST) % classes  # the file's own order
    assert np.array_equal(torch.cat(labels).numpy(), expected)


def test_cifar100_coarse_labels(cifar100):
    loader = get_cifar_iter_dali("val", cifar100, 32, 1, dataset="cifar100", label_type="coarse")
    labels = torch.cat([y for _, y in loader]).numpy()
    assert np.array_equal(labels, np.arange(N_TRAIN, N_TRAIN + N_TEST) % 20)


def test_folder_itself_is_accepted(cifar10):
    loader = get_cifar_iter_dali("test", os.path.join(cifar10, "cifar-10-batches-py"), 32, 1)
    assert len(loader.dataset) == N_TEST


# 2. exact-once under train augmentation ---------------------------------------------------


@pytest.mark.parametrize("drop_last", [False, True])
def test_every_sample_once_per_epoch_with_its_label(indexed, drop_last):
    loader = get_cifar_iter_dali("train", indexed, 16, 2, seed=3, drop_last=drop_last)
    n = len(loader.dataset)
    orders = []
    for _ in range(2):
        seen, labels, sizes = epoch_of(loader)
        assert np.array_equal(labels, seen % 10)           # each image keeps its own label
        assert len(np.unique(seen)) == len(seen)            # nothing served twice
        if drop_last:
            assert len(seen) == n // 16 * 16 and set(sizes) == {16}
        else:
            assert np.array_equal(np.sort(seen), np.arange(n))  # nothing skipped
            assert sizes[-1] == n % 16
        orders.append(seen)
    assert not np.array_equal(orders[0], orders[1])


def test_drop_last_drops_only_the_tail_of_the_epoch_order(indexed):
    full = get_cifar_iter_dali("train", indexed, 16, 1, seed=9)
    dropped = get_cifar_iter_dali("train", indexed, 16, 1, seed=9, drop_last=True)
    everything, _, _ = epoch_of(full)
    kept, _, _ = epoch_of(dropped)
    assert np.array_equal(kept, everything[:len(kept)])


def test_torch_twin_serves_the_same_order(indexed):
    dali = get_cifar_iter_dali("train", indexed, 16, 1, seed=4)
    twin = get_cifar_iter_torch("train", indexed, 16, 0, seed=4)
    for _ in range(2):
        assert np.array_equal(epoch_of(dali)[0], epoch_of(twin)[0])


@pytest.mark.parametrize("factory", [get_cifar_iter_dali, get_cifar_iter_torch])
def test_a_train_factory_takes_a_sampler_or_a_batch_sampler_as_documented(indexed, factory):
    """The training split shuffles unless a sampler chooses the order: DataLoader's rule refused
    the factory's own shuffle=True beside sampler= the user passed."""
    from torch.utils.data import BatchSampler, DistributedSampler, SequentialSampler

    threads = 1 if factory is get_cifar_iter_dali else 0
    halves = []
    for rank in (0, 1):
        sampler = DistributedSampler(range(203), num_replicas=2, rank=rank, shuffle=True, seed=0)
        seen, labels, _ = epoch_of(factory("train", indexed, 16, threads, sampler=sampler))
        assert np.array_equal(labels, seen % 10) and np.array_equal(seen, np.array(list(sampler)))
        halves.append(seen)
    assert set(np.concatenate(halves).tolist()) == set(range(203))   # the two shards cover the set (one pads)
    batches = BatchSampler(SequentialSampler(range(203)), 30, drop_last=False)
    seen, _, sizes = epoch_of(factory("train", indexed, 16, threads, batch_sampler=batches))
    assert np.array_equal(seen, np.arange(203)) and sizes == [30] * 6 + [23]


# 3. augmentation distribution ---------------------------------------------------------------


def coordinate_images(n, offset):
    """R = 8 * row, G = 8 * column, B = 255: the crop offset and flip are readable."""
    rows, cols = np.meshgrid(np.arange(32), np.arange(32), indexing="ij")
    image = np.stack([rows * 8, cols * 8, np.full_like(rows, 255)], axis=-1).astype(np.uint8)
    return np.broadcast_to(image, (n, 32, 32, 3)).copy()


def crop_offsets_and_flips(loader, epochs):
    dy, dx, flips = [], [], []
    for _ in range(epochs):
        for images, _ in loader:
            pixels = to_pixels(images).astype(np.int64)
            row, col, next_col = pixels[:, 16, 16, 0] // 8, pixels[:, 16, 16, 1] // 8, pixels[:, 16, 17, 1] // 8
            flipped = next_col < col
            dy.append(row - 16)
            dx.append(np.where(flipped, col - 15, col - 16))
            flips.append(flipped)
    return np.concatenate(dy), np.concatenate(dx), np.concatenate(flips)


@pytest.mark.parametrize("backend", [get_cifar_iter_dali, get_cifar_iter_torch])
def test_crop_offsets_uniform_over_9x9_and_flip_half(tmp_path, backend):
    root = write_cifar(str(tmp_path), "cifar10", 2025, 10, images=coordinate_images)
    loader = backend("train", root, 256, 2 if backend is get_cifar_iter_dali else 0, seed=11)
    dy, dx, flips = crop_offsets_and_flips(loader, epochs=4)   # 8100 samples: 100 per cell
    assert dy.min() >= -4 and dy.max() <= 4 and dx.min() >= -4 and dx.max() <= 4
    cells = np.bincount((dy + 4) * 9 + (dx + 4), minlength=81)
    assert stats.chisquare(cells).pvalue > 1e-3, cells.reshape(9, 9)
    assert stats.binomtest(int(flips.sum()), len(flips), 0.5).pvalue > 1e-3


def test_cutout_square_matches_torchvision(tmp_path):
    flat = lambda n, offset: np.full((n, 32, 32, 3), 200, np.uint8)  # noqa: E731
    root = write_cifar(str(tmp_path), "cifar10", 1500, 10, images=flat)
    areas = {}
    for backend in (get_cifar_iter_dali, get_cifar_iter_torch):
        loader = backend("train", root, 250, 1 if backend is get_cifar_iter_dali else 0, cutout=8, seed=2)
        zero = torch.cat([(x[:, 0] == 0) for x, _ in loader]).numpy()
        for mask in zero:   # one axis-aligned rectangle, at most 8 x 8
            rows, cols = np.flatnonzero(mask.any(1)), np.flatnonzero(mask.any(0))
            assert len(rows) <= 8 and len(cols) <= 8 and mask.sum() == len(rows) * len(cols)
        areas[backend.__name__] = zero.sum(axis=(1, 2))
    dali, twin = areas.values()
    assert dali.max() == 64 and dali.min() < 64
    assert stats.ks_2samp(dali, twin).pvalue > 1e-3


# 4. fresh epochs and len() ------------------------------------------------------------------


@pytest.mark.parametrize("type_", ["train", "val"])
@pytest.mark.parametrize("batch_size", [1, 7, 64, 203, 256])
@pytest.mark.parametrize("drop_last", [False, True])
def test_len_counts_the_batches_served(indexed, type_, batch_size, drop_last):
    loader = get_cifar_iter_dali(type_, indexed, batch_size, 1, drop_last=drop_last)
    n = len(loader.dataset)
    sizes = [len(y) for _, y in loader]
    assert len(loader) == len(sizes) == (n // batch_size if drop_last else -(-n // batch_size))
    assert sum(sizes) == (n // batch_size * batch_size if drop_last else n)
    assert len(get_cifar_iter_torch(type_, indexed, batch_size, 0, drop_last=drop_last)) == len(loader)


def test_a_break_does_not_leak_into_the_next_loop(indexed):
    loader = get_cifar_iter_dali("train", indexed, 16, 2, seed=1)
    first = []
    for k, (images, _) in enumerate(loader):
        first.append(centre_indices(images))
        if k == 2:
            break
    seen, _, _ = epoch_of(loader)
    assert np.array_equal(np.sort(seen), np.arange(len(loader.dataset)))
    assert not np.array_equal(seen[:48], np.concatenate(first))
    # Two loops over val after a break are both complete and identical.
    val = get_cifar_iter_dali("val", indexed, 4, 1)
    next(iter(val))
    assert np.array_equal(epoch_of(val)[0], np.arange(203, 213))


# 5. seeds and epochs ------------------------------------------------------------------------


def all_batches(loader):
    return [(x.clone(), y.clone()) for x, y in loader]


def test_same_seed_same_batches_and_epochs_differ(cifar10):
    a = get_cifar_iter_dali("train", cifar10, 32, 2, seed=7, cutout=6)
    b = get_cifar_iter_dali("train", cifar10, 32, 1, seed=7, cutout=6)
    a0, a1 = all_batches(a), all_batches(a)
    b0 = all_batches(b)
    assert all(torch.equal(x, u) and torch.equal(y, v) for (x, y), (u, v) in zip(a0, b0, strict=True))
    assert not torch.equal(torch.cat([y for _, y in a0]), torch.cat([y for _, y in a1]))
    b.set_epoch(1)    # as DistributedSampler: chooses the epoch of the next loop
    assert all(torch.equal(x, u) for (x, _), (u, _) in zip(a1, all_batches(b), strict=True))
    c = get_cifar_iter_dali("train", cifar10, 32, 1, seed=8, cutout=6)
    assert not torch.equal(torch.cat([y for _, y in a0]), torch.cat([y for _, y in all_batches(c)]))


# 6. bad input ------------------------------------------------------------------------------


def test_missing_folder_names_the_path_and_layout(tmp_path):
    missing = str(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match="nowhere.*cifar-10-batches-py"):
        get_cifar_iter_dali("train", missing, 8)
    with pytest.raises(FileNotFoundError, match="cifar-100-python"):
        get_cifar_iter_dali("val", str(tmp_path), 8, dataset="cifar100")


def test_missing_batch_file_is_named(tmp_path):
    root = write_cifar(str(tmp_path), "cifar10", 50, 10)
    os.remove(os.path.join(root, "cifar-10-batches-py", "data_batch_3"))
    with pytest.raises(FileNotFoundError, match="data_batch_3"):
        get_cifar_iter_dali("train", root, 8)


def test_file_that_is_not_a_cifar_pickle_is_named(tmp_path):
    root = write_cifar(str(tmp_path), "cifar10", 50, 10)
    folder = os.path.join(root, "cifar-10-batches-py")
    with open(os.path.join(folder, "data_batch_2"), "wb") as f:
        f.write(b"this is not a pickle at all")
    with pytest.raises(ValueError, match="data_batch_2.*not a CIFAR python pickle"):
        get_cifar_iter_dali("train", root, 8)
    with open(os.path.join(folder, "test_batch"), "wb") as f:
        pickle.dump({"data": np.zeros((5, 1024), np.uint8), "labels": [0] * 5}, f, protocol=2)
    with pytest.raises(ValueError, match="test_batch.*3072"):
        get_cifar_iter_torch("val", root, 8)
    with open(os.path.join(folder, "test_batch"), "wb") as f:
        pickle.dump({"data": np.zeros((5, 3072), np.uint8), "labels": [0] * 4}, f, protocol=2)
    with pytest.raises(ValueError, match="test_batch.*5 labels"):
        get_cifar_iter_dali("val", root, 8)
    with open(os.path.join(folder, "test_batch"), "wb") as f:   # re-saved after pickle.load(encoding="bytes")
        pickle.dump({b"data": np.zeros((5, 3072), np.uint8), b"labels": [0] * 5}, f, protocol=2)
    with pytest.raises(ValueError, match="test_batch.*a 'data' entry.*found the keys b'data', b'labels'"):
        get_cifar_iter_dali("val", root, 8)


@pytest.mark.parametrize("kwargs,culprit", [
    (dict(type="training"), "type"), (dict(batch_size=0), "batch_size"), (dict(batch_size=2.5), "batch_size"),
    (dict(dataset="cifar1000"), "dataset"), (dict(dataset="cifar10", label_type="coarse"), "label_type"),
    (dict(cutout=-1), "cutout"), (dict(val_size=224), "val_size"), (dict(world_size=0), "world_size"),
    (dict(rank=3, world_size=2), "rank"),
])
@pytest.mark.parametrize("backend", [get_cifar_iter_dali, get_cifar_iter_torch])
def test_bad_arguments_are_named(cifar10, backend, kwargs, culprit):
    arguments = {**dict(type="train", image_dir=cifar10, batch_size=8), **kwargs}
    with pytest.raises(ValueError, match=culprit):
        backend(**arguments)


# fallback and GPU ----------------------------------------------------------------------------

NO_DALI = "import sys; sys.modules['nvidia.dali'] = None\n"


def test_zero_threads_runs_one_as_dataloader_runs_in_this_process(cifar10):
    loader = get_cifar_iter_dali("val", cifar10, 8, 0, device="cpu")
    twin = get_cifar_iter_torch("val", cifar10, 8, 0)
    images, labels = next(iter(loader))
    assert torch.equal(labels, next(iter(twin))[1]) and loader.pipeline.num_threads == 1
    with pytest.raises(ValueError, match="num_workers"):
        get_cifar_iter_dali("train", cifar10, 8, -1)


@pytest.mark.subprocess
def test_without_dali_warns_once_and_returns_the_twin(cifar10):
    script = NO_DALI + f"""
import warnings
from dali_loaders import get_cifar_iter_dali
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    a = get_cifar_iter_dali("val", {cifar10!r}, 8, 0)
    b = get_cifar_iter_dali("val", {cifar10!r}, 8, 0)
print(type(a).__name__, len(a), sum(len(y) for _, y in a), len([w for w in caught if "DALI" in str(w.message)]))
try:
    get_cifar_iter_dali("val", {cifar10!r}, 8, fallback=False)
except ImportError as e:
    print("ImportError:", e)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[0] == f"TorchLoader {-(-N_TEST // 8)} {N_TEST} 1"
    assert "pip install nvidia-dali" in out.splitlines()[1]


@pytest.mark.gpu
def test_gpu_outputs_live_on_the_gpu_and_match_the_cpu(cifar10):
    gpu = get_cifar_iter_dali("val", cifar10, 16, 2)
    cpu = get_cifar_iter_torch("val", cifar10, 16, 0)
    for (x, y), (u, v) in zip(gpu, cpu, strict=True):
        assert x.is_cuda and y.is_cuda
        assert torch.equal(y.cpu(), v) and (x.cpu() - u).abs().max().item() <= 1e-5


@pytest.mark.parametrize("train", [True, False])
def test_gpu_graph_is_well_formed_without_a_gpu(train):
    """Runs everywhere: the GPU variant of the one CIFAR graph serializes, which checks every
    operator and argument against DALI's schemas for the GPU backend."""
    from dali_loaders import recipes
    from dali_loaders.loader.build import serialized_gpu_graph
    from dali_loaders.sources.arrays import ArraySource

    source = ArraySource(np.zeros((8, 32, 32, 3), np.uint8), np.arange(8), "zeros")
    serialized = serialized_gpu_graph(source, recipes.cifar(train, "cifar10", cutout=8))
    assert b"gpu" in serialized  # the CPU variant names no GPU device at all
    assert b"CropMirrorNormalize" in serialized and (b"Erase" in serialized) == train
