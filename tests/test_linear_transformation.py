"""LinearTransformation (v1 and v2) translated into DALI: a ZCA whitening matrix made from the
data, against torchvision applying the same object to the same images (its mean subtracted in
C x H x W order, then torch.mm), in either output layout and dtype, and what is refused."""
import os

import numpy as np
import pytest
import torch
import torchvision.transforms as v1
from image_data import write_image_folder
from test_transforms import FLOAT, C, dali_outputs, twin_outputs
from torchvision.transforms import v2

from dali_loaders import DaliLoader, transforms
from dali_loaders.dali_compat import graph_operators
from dali_loaders.loader import dali_loader
from dali_loaders.loader.build import graph_variant, serialized_gpu_graph
from dali_loaders.ops import linear as op
from dali_loaders.ops import plugin
from dali_loaders.sources.arrays import ArraySource
from dali_loaders.sources.image_files import ImageFiles

pytest.importorskip("nvidia.dali")

SIZE = 8   # 8 x 8 x 3: D = 192


def pixels(n=24, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (n, SIZE, SIZE, 3), dtype=np.uint8)


def whitening(images: np.ndarray, dtype=np.float32):
    """ZCA as the docstring of torchvision's class says: the covariance's SVD, of 0..1 pixels
    flattened in C x H x W order."""
    flat = images.transpose(0, 3, 1, 2).reshape(len(images), -1).astype(np.float64) / 255
    mean = flat.mean(0)
    u, s, _ = np.linalg.svd(np.cov(flat.T))
    matrix = u @ np.diag(1 / np.sqrt(s + 0.01)) @ u.T
    return torch.from_numpy(matrix.astype(dtype)), torch.from_numpy(mean.astype(dtype))


def source(images):
    return ArraySource(images, np.arange(len(images)), "indexed")


@pytest.fixture(autouse=True)
def operator_built():
    assert plugin.augment_available()


@pytest.mark.parametrize("recipe", ["v2", "v1", "v2 after Normalize"])
def test_matches_torchvision_on_the_same_images(recipe):
    images = pixels()
    matrix, mean = whitening(pixels(400, seed=1))
    transform = {
        "v2": C(v2.ToImage(), FLOAT, v2.LinearTransformation(matrix, mean)),
        "v1": v1.Compose([v1.ToTensor(), v1.LinearTransformation(matrix, mean)]),
        "v2 after Normalize": C(v2.ToImage(), FLOAT, v2.Normalize([0.5] * 3, [0.25] * 3),
                                v2.LinearTransformation(matrix, mean), v2.Normalize([0.1] * 3, [2.0] * 3)),
    }[recipe]
    assert not transforms.plan(transform, python_fallback=False).python
    ours, theirs = dali_outputs(source(images), transform), twin_outputs(source(images), transform)
    scale = max(np.abs(t).max() for t in theirs)
    assert scale > 1.0   # whitened: the matrix did something
    for a, b in zip(ours, theirs, strict=True):
        assert a.shape == b.shape == (3, SIZE, SIZE)
        np.testing.assert_allclose(a, b, atol=2e-5 * scale, rtol=0)


def test_a_mean_read_in_the_wrong_order_would_be_caught():
    """The check above fails on a mean or matrix taken in H x W x C order: the reference
    differs from the same product with the mean's values permuted."""
    images = pixels()
    matrix, mean = whitening(pixels(400, seed=1))
    permuted = mean.reshape(3, SIZE, SIZE).permute(1, 2, 0).reshape(-1)
    right = twin_outputs(source(images), C(v2.ToImage(), FLOAT, v2.LinearTransformation(matrix, mean)))
    wrong = twin_outputs(source(images), C(v2.ToImage(), FLOAT, v2.LinearTransformation(matrix, permuted)))
    assert np.abs(right[0] - wrong[0]).max() > 0.1


def test_channels_last_batches_hold_the_same_tensors():
    """An HWC graph (memory_format=channels_last) flattens each image in C x H x W order too."""
    images = pixels(16)
    matrix, mean = whitening(pixels(400, seed=1))
    transform = C(v2.ToImage(), FLOAT, v2.LinearTransformation(matrix, mean))
    plain, last = (torch.cat([x for x, _ in dali_loader(source(images), transform, train=False, batch_size=8,
                                                         num_threads=2, memory_format=memory_format)])
                   for memory_format in (torch.contiguous_format, torch.channels_last))
    assert last.is_contiguous(memory_format=torch.channels_last) and not last.is_contiguous()
    torch.testing.assert_close(last, plain, rtol=0, atol=0)
    expected = torch.stack([torch.from_numpy(t) for t in twin_outputs(source(images), transform)])
    torch.testing.assert_close(plain, expected, rtol=0, atol=2e-5 * float(expected.abs().max()))


@pytest.mark.parametrize("image_dtype,matrix_dtype,result", [(torch.float32, np.float64, torch.float64),
                                                             (torch.float16, np.float32, torch.float32)])
def test_the_batches_dtype_is_promoted_as_torch_promotes(image_dtype, matrix_dtype, result):
    images = pixels(8)
    matrix, mean = whitening(pixels(400, seed=1), matrix_dtype)
    transform = C(v2.ToImage(), v2.ToDtype(image_dtype, scale=True), v2.LinearTransformation(matrix, mean),
                  v2.Normalize([0.1] * 3, [2.0] * 3))
    batch, labels = next(iter(dali_loader(source(images), transform, train=False, batch_size=8, num_threads=1)))
    expected = torch.stack([transform(torch.from_numpy(image).permute(2, 0, 1)) for image in images])
    assert expected.dtype == batch.dtype == result
    # float16 pixels are rounded to half before the product, by both
    torch.testing.assert_close(batch, expected, rtol=0, atol=1e-4 * float(expected.abs().max()))


def test_images_of_another_size_are_refused_naming_both_sizes():
    images = pixels(4)
    matrix, mean = whitening(pixels(400, seed=1)[:, :4, :4])   # made for 4 x 4 images
    loader = dali_loader(source(images), C(v2.ToImage(), FLOAT, v2.LinearTransformation(matrix, mean)), train=False,
                         batch_size=4, num_threads=1)
    with pytest.raises(Exception, match=r"LinearTransformation: the image has 3 x 8 x 8 = 192 values and the "
                                        r"transformation matrix is 48 x 48"):
        list(loader)


@pytest.mark.parametrize("steps,match", [
    ([v2.ToImage()], "on uint8 images is not translated; put ToDtype"),
    ([], "takes tensors, and here the image is a PIL image"),
])
def test_uint8_and_pil_images_are_refused_by_name(steps, match):
    images = pixels(4)
    matrix, mean = whitening(pixels(400, seed=1))
    loader = dali_loader(source(images), C(*steps, v2.LinearTransformation(matrix, mean)), train=False, batch_size=4,
                         num_threads=1)
    with pytest.raises(Exception, match=match):
        list(loader)


def test_the_matrix_file_is_named_by_its_contents_and_a_short_one_is_refused(tmp_path, monkeypatch):
    from nvidia.dali import fn, pipeline_def

    monkeypatch.setenv(plugin.CACHE_ENV, str(tmp_path))
    matrix, mean = (t.numpy() for t in whitening(pixels(400, seed=1)))
    first = op.matrix_file(matrix, mean)
    assert first == op.matrix_file(matrix.copy(), mean.copy()) and first.startswith(str(tmp_path))
    assert os.path.getsize(first) == 4 * (192 + 192 * 192)
    assert op.matrix_file(matrix * 2, mean) != first
    short = tmp_path / "short.f32"
    short.write_bytes(open(first, "rb").read()[:-4])

    @pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipe():
        data = fn.external_source(source=lambda: [np.zeros((3, SIZE, SIZE), np.float32)], batch=True, layout="CHW")
        return fn.dali_loaders_linear(data, matrix_file=str(short), size=192)

    with pytest.raises(RuntimeError, match=r"short.f32 does not hold 37056 float32 values"):
        p = pipe()
        p.build()
        p.run()


def test_gpu_loaders_run_the_steps_on_the_cpu_with_no_gpu_to_cpu_edge(tmp_path):
    write_image_folder(str(tmp_path), {"a": 2, "b": 2})
    folder = ImageFiles(str(tmp_path))
    matrix, mean = whitening(pixels(400, seed=1))
    transform = C(v2.RandomResizedCrop(SIZE), v2.ToImage(), FLOAT, v2.LinearTransformation(matrix, mean))
    recipe = transforms.plan(transform, python_fallback=False)
    plain = transforms.plan(C(v2.RandomResizedCrop(SIZE), v2.ToImage(), FLOAT), python_fallback=False)
    for device in ("gpu", "cpu-decode"):
        assert graph_variant(device, folder, recipe) == "cpu-steps"
        assert graph_variant(device, folder, plain) == device   # only the step's recipes
    graph = serialized_gpu_graph(folder, transform, variant="cpu-steps")
    operators = graph_operators(graph)
    assert "DaliLoadersLinear" in [kind for kind, *_ in operators]
    edges = [kind for kind, _, device, inputs in operators if device == "cpu" for _, d in inputs if d == "gpu"]
    assert edges == []


def test_a_plain_loader_over_an_image_folder_whitens_every_image(tmp_path):
    """The loader a user builds: DaliLoader over torchvision's ImageFolder with the recipe."""
    from torchvision import datasets

    write_image_folder(str(tmp_path), {"a": 3, "b": 3})
    matrix, mean = whitening(pixels(400, seed=1))
    transform = C(v2.Resize((SIZE, SIZE)), v2.ToImage(), FLOAT, v2.LinearTransformation(matrix, mean))
    dataset = datasets.ImageFolder(str(tmp_path), transform=transform)
    ours = torch.cat([x for x, _ in DaliLoader(dataset, 3, num_workers=1, device="cpu")])
    theirs = torch.stack([dataset[i][0] for i in range(len(dataset))])
    torch.testing.assert_close(ours, theirs, rtol=0, atol=2e-5 * float(theirs.abs().max()))
