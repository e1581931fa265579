"""Code written for the seed systems: the original DataLoaders_DALI README loops and DALI's
DALIGenericIterator loops (output="dict", reset(), size), its dali_cpu= switch, and the
device variants (device=), which fail at construction where they cannot run."""
import os

import numpy as np
import pytest
import torch
from cifar_data import index_images, write_cifar
from image_data import image_id, write_solid_folder
from torchvision.datasets import ImageFolder
from torchvision.transforms import v2

from dali_loaders import (
    get_cifar_iter_dali,
    get_cifar_iter_torch,
    get_imagefolder_iter_dali,
    get_imagenet_iter_dali,
    get_imagenet_iter_torch,
)
from dali_loaders.loader import serialized_gpu_graph
from dali_loaders.recipes import IMAGENET_MEAN, IMAGENET_STD
from dali_loaders.sources.image_files import ImageFiles

NO_CUDA = not torch.cuda.is_available()
N_TRAIN, N_TEST = 70, 30


@pytest.fixture(scope="module")
def cifar_dir(tmp_path_factory):
    return write_cifar(str(tmp_path_factory.mktemp("cifar")), n_train=N_TRAIN, n_test=N_TEST, images=index_images)


@pytest.fixture(scope="module")
def imagenet_dir(tmp_path_factory):
    """train/ and val/ of flat-colour images: each output says which image it came from."""
    root = str(tmp_path_factory.mktemp("imagenet"))
    write_solid_folder(os.path.join(root, "train"), {"cat": 7, "dog": 6, "eel": 4})
    write_solid_folder(os.path.join(root, "val"), {"cat": 3, "dog": 3, "eel": 3})
    return root


@pytest.fixture
def cuda_where_absent(monkeypatch):
    """The README loops call .cuda(): without CUDA (only then) it hands back the tensor."""
    if NO_CUDA:
        monkeypatch.setattr(torch.Tensor, "cuda", lambda self, *args, **kwargs: self)


def cifar_index(images: torch.Tensor) -> list:
    """The index a CIFAR test image carries in its bytes, read back through Normalize."""
    mean = torch.tensor([0.4914, 0.4822, 0.4465]).view(1, 3, 1, 1)
    std = torch.tensor([0.2470, 0.2435, 0.2616]).view(1, 3, 1, 1)
    rgb = ((images.cpu() * std + mean) * 255).round().long().amax(dim=(2, 3))
    return (rgb[:, 0] * 65536 + rgb[:, 1] * 256 + rgb[:, 2]).tolist()


def solid_ids(images: torch.Tensor) -> list:
    mean, std = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1), torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
    pixels = (images.cpu() * std + mean) * 255
    return [image_id(image.mean(dim=(1, 2)).tolist()) for image in pixels]


def test_original_cifar_readme_loop(cifar_dir, cuda_where_absent):
    train_loader = get_cifar_iter_dali(type='train', image_dir=cifar_dir, batch_size=16, num_threads=2,
                                       local_rank=0, world_size=1, output="dict", seed=1)
    seen, labels_seen = [], []
    for epoch in range(2):
        for i, data in enumerate(train_loader):
            images = data[0]["data"].cuda(non_blocking=True)
            labels = data[0]["label"].squeeze().long().cuda(non_blocking=True)
            seen += cifar_index(images)
            labels_seen += labels.cpu().tolist()
        train_loader.reset()
    assert train_loader.size == train_loader._size == N_TRAIN
    for epoch in range(2):   # every image once per epoch, each with its own label
        ids = seen[epoch * N_TRAIN:(epoch + 1) * N_TRAIN]
        assert sorted(ids) == list(range(N_TRAIN))
        assert labels_seen[epoch * N_TRAIN:(epoch + 1) * N_TRAIN] == [i % 10 for i in ids]
    assert seen[:N_TRAIN] != seen[N_TRAIN:]   # a fresh shuffle per epoch


def test_original_imagenet_readme_loop(imagenet_dir, cuda_where_absent):
    train_loader = get_imagenet_iter_dali(type='train', image_dir=imagenet_dir, batch_size=5, num_threads=2,
                                          crop=32, device_id=0, num_gpus=1, dali_cpu=NO_CUDA, output="dict")
    targets = ImageFolder(os.path.join(imagenet_dir, "train")).targets
    ids, labels_seen = [], []
    for i, data in enumerate(train_loader):
        images = data[0]["data"].cuda(non_blocking=True)
        labels = data[0]["label"].squeeze().long().cuda(non_blocking=True)
        assert data[0]["label"].shape == (len(images), 1)   # DALIGenericIterator's label shape
        ids += solid_ids(images)
        labels_seen += labels.cpu().tolist()
    train_loader.reset()
    assert sorted(ids) == list(range(17)) and labels_seen == [targets[k] for k in ids]
    assert len(train_loader) == 4 and train_loader.size == 17


def test_dict_output_keeps_the_loaders_manners(cifar_dir):
    """set_epoch, state_dict and the order are the wrapped loader's: the dict loader serves
    exactly the tuple loader's batches, and resumes mid-epoch."""
    plain = get_cifar_iter_dali("train", cifar_dir, 16, 1, seed=4)
    wrapped = get_cifar_iter_dali("train", cifar_dir, 16, 1, seed=4, output="dict")
    for loader in (plain, wrapped):
        loader.set_epoch(3)
    for (images, labels), [batch] in zip(plain, wrapped, strict=True):
        assert torch.equal(images, batch["data"]) and torch.equal(labels, batch["label"].view(-1))
    epoch = iter(wrapped)
    next(epoch)
    state = wrapped.state_dict()
    rest = [cifar_index(batch["data"]) for [batch] in epoch]
    again = get_cifar_iter_dali("train", cifar_dir, 16, 1, seed=77, output="dict")
    again.load_state_dict(state)
    assert [cifar_index(batch["data"]) for [batch] in again] == rest


def test_the_twin_takes_output_dict_too(cifar_dir):
    twin = get_cifar_iter_torch("val", cifar_dir, 8, 0, output="dict")
    batches = list(twin)
    twin.reset()
    assert cifar_index(torch.cat([b[0]["data"] for b in batches])) == list(range(N_TRAIN, N_TRAIN + N_TEST))
    assert twin.size == N_TEST and batches[0][0]["label"].shape == (8, 1)


@pytest.mark.parametrize("kwargs, match", [
    (dict(output="list"), "output must be"),
    (dict(dali_cpu="yes"), "dali_cpu must be"),
    (dict(device="tpu"), "device must be one of"),
    (dict(device="cpu", dali_cpu=False), "pass one of them"),
    (dict(target_transform=3), "target_transform must be"),
])
def test_bad_options_are_named(cifar_dir, kwargs, match):
    with pytest.raises(ValueError, match=match):
        get_cifar_iter_dali("train", cifar_dir, 8, 1, **kwargs)


@pytest.mark.skipif(not NO_CUDA, reason="checks the machine without a GPU")
@pytest.mark.parametrize("kwargs, match", [
    (dict(device="gpu"), "device='gpu' needs a CUDA GPU"),
    (dict(device="cpu-decode"), "device='cpu-decode' needs a CUDA GPU"),
    (dict(dali_cpu=False), "device='gpu' needs a CUDA GPU"),
    (dict(device_id=0), "device_id=0 needs a CUDA GPU"),
])
def test_gpu_variants_without_a_gpu_fail_at_construction(imagenet_dir, cifar_dir, kwargs, match):
    for make in (lambda: get_imagenet_iter_dali("val", imagenet_dir, 4, 1, **kwargs),
                 lambda: get_cifar_iter_dali("val", cifar_dir, 4, 1, **kwargs)):
        with pytest.raises(RuntimeError, match=match):
            make()
    if "device" in kwargs:   # the twin refuses what it would be told to mimic, too
        with pytest.raises(RuntimeError, match=match):
            get_imagenet_iter_torch("val", imagenet_dir, 4, 0, **kwargs)


@pytest.mark.gpu
def test_a_device_id_that_does_not_exist_fails(imagenet_dir):
    with pytest.raises(RuntimeError, match="names no GPU"):
        get_imagenet_iter_dali("val", imagenet_dir, 4, 1, device_id=torch.cuda.device_count())


def test_cpu_variant_runs_on_the_cpu_whatever_the_machine(imagenet_dir):
    for kwargs in (dict(device="cpu"), dict(dali_cpu=True), dict(device="cpu", device_id=0)):
        images, labels = next(iter(get_imagenet_iter_dali("val", imagenet_dir, 4, 1, crop=32, **kwargs)))
        assert not images.is_cuda and not labels.is_cuda and images.shape == (4, 3, 32, 32)


@pytest.mark.parametrize("train", [True, False])
def test_the_gpu_variants_are_one_graph_in_other_device_names(imagenet_dir, train):
    """Both GPU variants pass DALI's GPU schemas; they differ from each other only in where
    the decoder runs and one copy to the GPU after it."""
    from dali_loaders import recipes

    source = ImageFiles(os.path.join(imagenet_dir, "train"))
    recipe = recipes.imagenet(train, 32, 40)
    graphs = {variant: serialized_gpu_graph(source, recipe, variant=variant) for variant in ("gpu", "cpu-decode")}
    assert graphs["gpu"] != graphs["cpu-decode"]
    # the mixed (GPU) decoder in one, none in the other; CropMirrorNormalize on the GPU in both
    assert b"mixed" in graphs["gpu"] and b"mixed" not in graphs["cpu-decode"]
    cpu = serialized_cpu_graph(source, recipe)
    assert b"gpu" in graphs["cpu-decode"] and b"gpu" not in cpu
    assert graphs["cpu-decode"].count(b"CropMirrorNormalize") == graphs["gpu"].count(b"CropMirrorNormalize")


def serialized_cpu_graph(source, recipe) -> bytes:
    """The CPU variant's graph, serialized as serialized_gpu_graph serializes the others."""
    from nvidia.dali import pipeline_def

    from dali_loaders import transforms
    from dali_loaders.loader.build import graph

    plan = transforms.plan(recipe, False)
    return pipeline_def(graph, enable_conditionals=transforms.needs_conditionals(plan))(
        source, np.arange(4), 4, plan, "CHW", "cpu", batch_size=4, num_threads=1, device_id=None, seed=1).serialize()


def test_dali_cpu_maps_onto_device(imagenet_dir):
    """dali_cpu=True is device="cpu": the same batches."""
    a = get_imagefolder_iter_dali(os.path.join(imagenet_dir, "val"), 4, False, 1, crop=32, dali_cpu=True)
    b = get_imagefolder_iter_dali(os.path.join(imagenet_dir, "val"), 4, False, 1, crop=32, device="cpu")
    for (x, y), (u, v) in zip(a, b, strict=True):
        assert torch.equal(x, u) and torch.equal(y, v)


def test_factories_show_the_new_keywords():
    import inspect

    from dali_loaders import DaliLoader, TorchLoader

    for factory, loader in ((get_cifar_iter_dali, DaliLoader), (get_imagenet_iter_torch, TorchLoader)):
        params = inspect.signature(factory).parameters
        assert any(p.kind == inspect.Parameter.VAR_KEYWORD for p in params.values())   # handed to the loader
        assert {"device", "dali_cpu", "output", "target_transform"} <= set(inspect.signature(loader).parameters)


def test_pil_to_tensor_output_unchanged_by_the_wrapper(imagenet_dir):
    """The dict holds the very tensor the tuple loader yields (no copy, no cast)."""
    kwargs = dict(transform=v2.Compose([v2.Resize((8, 8)), v2.PILToTensor()]))
    tuple_batch = next(iter(get_imagefolder_iter_dali(os.path.join(imagenet_dir, "val"), 3, False, 1, **kwargs)))
    [dict_batch] = next(iter(get_imagefolder_iter_dali(os.path.join(imagenet_dir, "val"), 3, False, 1,
                                                       output="dict", **kwargs)))
    assert dict_batch["data"].dtype == torch.uint8 and torch.equal(dict_batch["data"], tuple_batch[0])
    assert np.array_equal(dict_batch["label"].view(-1).numpy(), tuple_batch[1].numpy())


@pytest.mark.gpu
@pytest.mark.parametrize("variant", ["cpu-decode", "gpu"])
def test_gpu_variants_serve_every_image_once_on_the_gpu(imagenet_dir, variant):
    root = os.path.join(imagenet_dir, "train")
    targets = ImageFolder(root).targets
    ids, labels = [], []
    for images, y in get_imagefolder_iter_dali(root, 4, True, 2, crop=32, seed=2, device=variant):
        assert images.is_cuda and y.is_cuda
        ids += solid_ids(images)
        labels += y.tolist()
    assert sorted(ids) == list(range(17)) and labels == [targets[i] for i in ids]
