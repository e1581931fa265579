"""The "gpu-decode" graph (DALI_LOADERS_STEPS_DECODE=gpu): a recipe whose steps device="gpu"
runs on the CPU has its files decoded, cropped and resized on the GPU, then copied to the CPU
once, before the first step that branches per sample, fuses into the augmentation operator or
runs on the CPU alone. Read from the serialized graphs, without a GPU; the GPU test runs it."""
import os

import numpy as np
import pytest
import torch
from image_data import write_image_folder
from test_gpu_graphs import gpu_to_cpu_edges, variant_of   # a CPU operator reading GPU data
from torchvision.transforms import v2

from dali_loaders import dali_compat, recipes, transforms
from dali_loaders.bench.catalog import RECIPES
from dali_loaders.loader import build
from dali_loaders.loader.build import graph_variant, serialized_gpu_graph
from dali_loaders.ops import plugin
from dali_loaders.sources.arrays import ArraySource
from dali_loaders.sources.image_files import ImageFiles

FLOAT = [v2.ToImage(), v2.ToDtype(torch.float32, scale=True)]


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("images"))
    write_image_folder(folder, {"a": 3, "b": 3})
    return ImageFiles(folder)


@pytest.fixture
def decode_on_gpu(monkeypatch):
    monkeypatch.setenv(build.STEPS_DECODE_ENV, "gpu")


def crossings(graph: bytes):
    """(CPU operator, GPU operator's output) of each copy to the CPU the graph asks for (`.cpu()`:
    the CPU operator names the GPU operator's output as a CPU input)."""
    operators = dali_compat.graph_operators(graph)
    produced_on = {name: device for _, name, device, _ in operators}
    return [(kind, name) for kind, _, device, inputs in operators if device == "cpu"
            for name, input_device in inputs if input_device == "cpu" and produced_on.get(name) in ("gpu", "mixed")]


def test_the_cut_is_before_the_first_step_the_cpu_runs():
    def cut(*steps):
        return transforms.host_steps_from(transforms.plan(v2.Compose(list(steps)), False))

    crop = [v2.RandomResizedCrop(32), v2.RandomHorizontalFlip()]
    assert cut(*crop, v2.RandAugment(2, 9), *FLOAT) == 2
    assert cut(*crop, v2.TrivialAugmentWide(), *FLOAT, v2.RandomErasing(0.5)) == 2
    assert cut(v2.ColorJitter(0.4, 0.4, 0.4, 0.1), *crop) == 0
    assert cut(v2.Resize(40), v2.CenterCrop(32), *FLOAT) == 4   # nothing for the CPU: the end
    linear = v2.LinearTransformation(torch.eye(3 * 8 * 8), torch.zeros(3 * 8 * 8))
    assert cut(v2.Resize((8, 8)), *FLOAT, linear) == 3


def test_where_the_placement_decodes_on_the_gpu(images, decode_on_gpu):
    assert plugin.augment_available()
    two = v2.Compose([v2.RandomResizedCrop(32), v2.RandAugment(2, 9), *FLOAT])
    assert variant_of(images, two) == transforms.GPU_DECODE
    assert variant_of(images, v2.Compose([v2.ColorJitter(0.4, 0.4, 0.4, 0.1), *FLOAT])) == transforms.GPU_DECODE
    linear = v2.Compose([v2.Resize((8, 8)), *FLOAT, v2.LinearTransformation(torch.eye(192), torch.zeros(192))])
    assert variant_of(images, linear) == transforms.GPU_DECODE
    assert variant_of(images, recipes.resnet50_reference(True)) == "gpu"   # one slot: the GPU chain
    assert variant_of(images, recipes.imagenet(False)) == "gpu"
    assert variant_of(images, two, "cpu-decode") == "cpu-decode"   # asked for
    assert variant_of(images, linear, "cpu-decode") == "cpu-steps"
    assert variant_of(images, two, "cpu") == "cpu"
    pixels = ArraySource(np.zeros((4, 32, 32, 3), np.uint8), np.arange(4) % 2, "cifar10")
    assert variant_of(pixels, two) == "cpu-steps"   # nothing to decode


def test_by_default_the_cpu_decodes_what_the_cpu_augments(images, monkeypatch):
    monkeypatch.delenv(build.STEPS_DECODE_ENV, raising=False)
    assert variant_of(images, v2.Compose([v2.RandomResizedCrop(32), v2.RandAugment(2, 9), *FLOAT])) == "cpu-steps"
    monkeypatch.setenv(build.STEPS_DECODE_ENV, "GPU!")
    with pytest.raises(ValueError, match=build.STEPS_DECODE_ENV):
        variant_of(images, v2.Compose([v2.RandAugment(2, 9)]))


def gpu_decoded_recipes():
    """(name, transform) of the bench's ImageNet recipes that device="gpu" runs as "gpu-decode"."""
    found = []
    for name, recipe in RECIPES["imagenet"].items():
        if recipe.options.get("python_fallback"):
            continue
        for split in recipe.splits:
            try:
                found.append((f"{name} {split}", recipe.make(split == "train")))
            except ImportError:   # an optional package's recipe
                continue
    return found


def test_every_such_recipe_crosses_once_a_view_after_its_crops(images, decode_on_gpu):
    """The files decoded on the GPU; one copy to the CPU a view with a CPU step, made by `.cpu()`
    (no CPU operator reads GPU data otherwise); the augmentation operator on the CPU; the batch
    handed over on the GPU; no conditionals where the operator fuses the branching steps."""
    seen = []
    for name, transform in gpu_decoded_recipes():
        plan = transforms.plan(transform, False)
        if graph_variant("gpu", images, plan) != transforms.GPU_DECODE:
            continue
        seen.append(name)
        graph = serialized_gpu_graph(images, transform, variant=transforms.GPU_DECODE)
        operators = dali_compat.graph_operators(graph)
        # the views with a step the CPU runs (timm-jsd's clean view has none: it stays on the GPU)
        views = sum(transforms.host_steps_from(view) < len(view.translated) for view in transforms.plans_of(plan))
        assert gpu_to_cpu_edges(graph) == [], name
        assert views >= 1 and len(crossings(graph)) == views, (name, crossings(graph))
        assert ("decoders__Image", "mixed") in {(kind, device) for kind, _, device, _ in operators}, name
        assert {device for kind, _, device, _ in operators if kind.startswith("DaliLoadersAugment")} == {"cpu"}, name
        assert {device for _, device in dali_compat.graph_outputs(graph)} == {"gpu"}, name
        assert not transforms.needs_conditionals(plan, transforms.GPU_DECODE), name
    assert {"timm-ra train", "tv176 train", "contrastive train"} <= set(seen), seen


def test_the_crop_and_resize_run_on_the_gpu_before_the_copy(images, decode_on_gpu):
    """timm's RandAugment recipe: the whole file decoded on the GPU (fancy upsampling on the
    hardware engine), the crop cut and resized there, so a 176 x 176 image crosses, not the file's."""
    transform = RECIPES["imagenet"]["timm-ra"].make(True)
    graph = serialized_gpu_graph(images, transform, variant=transforms.GPU_DECODE)
    on_gpu = [kind for kind, _, device, _ in dali_compat.graph_operators(graph) if device != "cpu"]
    assert on_gpu == ["decoders__Image", "Slice", "Resize"]
    [(consumer, crossing)] = crossings(graph)
    assert crossing.startswith("__Resize") and consumer.startswith("DaliLoadersAugment")


def test_views_that_share_a_cpu_step_cross_once_before_they_split(images, decode_on_gpu):
    """SplitViews whose shared steps hold a step the CPU runs: one copy, in the shared steps;
    each view's steps then on the CPU. Views that share only GPU steps cross a view at a time,
    those without a CPU step not at all."""
    jitter = v2.ColorJitter(0.4, 0.4, 0.4, 0.1)
    shared_jitter = transforms.SplitViews(v2.Compose([v2.RandomResizedCrop(40), jitter]),
                                          [v2.Compose([v2.CenterCrop(32), *FLOAT]), v2.Compose([v2.CenterCrop(24), *FLOAT])])
    own_jitter = transforms.SplitViews(v2.RandomResizedCrop(40),
                                       [v2.Compose([jitter, *FLOAT]), v2.Compose([v2.CenterCrop(24), *FLOAT])])
    found = {}
    for name, transform in (("shared", shared_jitter), ("own", own_jitter)):
        assert variant_of(images, transform) == transforms.GPU_DECODE, name
        graph = serialized_gpu_graph(images, transform, variant=transforms.GPU_DECODE)
        assert gpu_to_cpu_edges(graph) == [], name
        found[name] = [consumer for consumer, _ in crossings(graph)]
    assert len(found["shared"]) == 1 and found["shared"][0].startswith("DaliLoadersAugment")
    assert len(found["own"]) == 1   # the view with ColorJitter; the other stays on the GPU


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_a_gpu_it_serves_every_image_once_with_its_label(tmp_path, decode_on_gpu):
    from PIL import Image
    from torchvision.datasets import ImageFolder

    from dali_loaders import DaliLoader

    for k in range(20):   # each image one flat grey level: its index
        folder = tmp_path / f"c{k % 3}"
        folder.mkdir(exist_ok=True)
        Image.fromarray(np.full((40 + k, 50, 3), 10 * k, np.uint8)).save(folder / f"{k:02d}.png")
    transform = v2.Compose([v2.Resize((16, 16)), v2.RandAugment(2, 0), v2.PILToTensor()])   # magnitude 0
    dataset = ImageFolder(str(tmp_path), transform=transform)
    loader = DaliLoader(dataset, batch_size=6, shuffle=True, num_workers=2, device="gpu", seed=0)
    assert variant_of(ImageFiles(str(tmp_path)), transform) == transforms.GPU_DECODE
    served = []
    for batch, labels in loader:
        for image, label in zip(batch.cpu(), labels.cpu()):
            index = int(image.float().median()) // 10
            served.append(index)
            assert label.item() == dataset.targets[[i for i, (p, _) in enumerate(dataset.samples)
                                                    if p.endswith(f"{index:02d}.png")][0]]
    assert sorted(served) == list(range(20))


def test_each_placement_switch_moves_its_steps_and_is_put_back(images, monkeypatch):
    """The environment's switches (loader/build.py), as the GPU checks and probes set them: each
    moves what it names and nothing else, `overridden` puts it back, a value it does not know
    is refused by name."""
    from dali_loaders import switches

    for name in (build.FUSED_STEPS_ENV, build.STEPS_DECODE_ENV, build.DECODED_STEPS_ENV):
        monkeypatch.delenv(name, raising=False)
    two = v2.Compose([v2.RandomResizedCrop(32), v2.RandAugment(2, 9), *FLOAT])
    one = recipes.resnet50_reference(True)   # TrivialAugmentWide: one slot, on the GPU as measured
    flip = v2.Compose([v2.RandomHorizontalFlip(), *FLOAT])
    pixels = ArraySource(np.zeros((4, 32, 32, 3), np.uint8), np.arange(4) % 2, "cifar10")
    assert [variant_of(images, two), variant_of(images, one), variant_of(pixels, flip)] == \
        ["cpu-steps", "gpu", "cpu-steps"]
    with switches.overridden(build.FUSED_STEPS_ENV, "gpu"):
        assert [variant_of(images, two), variant_of(images, one)] == ["gpu", "gpu"]
    with switches.overridden(build.FUSED_STEPS_ENV, "cpu"):
        assert [variant_of(images, two), variant_of(images, one)] == ["cpu-steps", "cpu-steps"]
    with switches.overridden(build.DECODED_STEPS_ENV, "gpu"):
        assert [variant_of(pixels, flip), variant_of(pixels, two), variant_of(images, two)] == \
            ["gpu", "cpu-steps", "cpu-steps"]   # the fused steps stay where FUSED_STEPS puts them
    monkeypatch.setenv(build.DECODED_STEPS_ENV, "cpu")
    with switches.overridden(build.DECODED_STEPS_ENV, "gpu"):
        assert variant_of(pixels, flip) == "gpu"
    assert variant_of(pixels, flip) == "cpu-steps"
    assert build.FUSED_STEPS_ENV not in os.environ
    assert build.fused_steps() == "measured" and build.decoded_steps() == "cpu"
    for name in (build.FUSED_STEPS_ENV, build.DECODED_STEPS_ENV):
        with switches.overridden(name, "tpu"), pytest.raises(ValueError, match=name):
            variant_of(images, two) if name == build.FUSED_STEPS_ENV else variant_of(pixels, flip)
