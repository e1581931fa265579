"""The GPU graphs, read from their serialized form without a GPU.

No GPU -> CPU edge in any of them: a CPU operator fed by GPU data stalls DALI's dynamic
executor on a copy back to the host and is refused by its legacy one ("GPU->CPU transitions
are not allowed"). Every translated transform and every recipe is serialized as its GPU graph,
on both GPU variants, and each operator's inputs are read from the graph.

Where device="gpu" runs a recipe's steps (loader/build.py's graph_variant): on the GPU after
the GPU decode, but on the CPU (the batch handed over on the GPU) for recipes the fused CPU
operator runs and for sources of pixels, where the CPU was measured faster."""
import numpy as np
import pytest
import torch
from image_data import write_image_folder
from torchvision.transforms import v2

from dali_loaders import dali_compat, recipes, transforms
from dali_loaders.bench.catalog import RECIPES
from dali_loaders.loader.build import graph_variant, serialized_gpu_graph
from dali_loaders.ops import plugin
from dali_loaders.sources.arrays import ArraySource
from dali_loaders.sources.image_files import ImageFiles
from dali_loaders.testing.check_gpu import transform_cases, view_cases
from dali_loaders.transforms import DaliFunction

VARIANTS = ("gpu", "cpu-decode")


def gpu_to_cpu_edges(graph: bytes):
    """(CPU operator, its GPU input) of every such edge of a serialized graph."""
    return [(kind, name) for kind, _, device, inputs in dali_compat.graph_operators(graph) if device == "cpu"
            for name, input_device in inputs if input_device == "gpu"]


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("images"))
    write_image_folder(folder, {"a": 3, "b": 3})
    return ImageFiles(folder)


@pytest.fixture(scope="module")
def arrays():
    pixels = np.random.default_rng(0).integers(0, 256, (8, 32, 32, 3), dtype=np.uint8)
    return ArraySource(pixels, np.arange(8) % 3, "cifar10")


def recipe_cases():
    """(name, dataset kind, transform): the library's recipes and the bench's, train and val."""
    cases = [(f"cifar {split}", "arrays", recipes.cifar(split == "train", cutout=8 if split == "train" else 0))
             for split in ("train", "val")]
    for dataset, kind in (("imagenet", "images"), ("cifar10", "arrays")):
        for name, recipe in RECIPES[dataset].items():
            if recipe.options.get("python_fallback"):   # Python steps: the whole graph runs on the CPU
                continue
            for split in recipe.splits:
                try:
                    transform = recipe.make(split == "train")
                except ImportError:   # an optional package's recipe (timm, albumentations)
                    continue
                cases.append((f"{dataset} {name} {split}", kind, transform))
    return cases


@pytest.mark.parametrize("variant", VARIANTS)
def test_no_translated_transform_has_a_gpu_to_cpu_edge(images, variant):
    found = {}
    for name, transform, _ in transform_cases():
        # a step with no GPU operator: the loader builds its "cpu-steps" graph (build.py's graph_variant)
        built = "cpu-steps" if transforms.steps_on_cpu(transforms.plan(transform, False)) else variant
        edges = gpu_to_cpu_edges(serialized_gpu_graph(images, transform, variant=built))
        if edges:
            found[name] = edges
    assert found == {}


@pytest.mark.parametrize("variant", VARIANTS)
def test_no_transform_making_views_has_a_gpu_to_cpu_edge(images, variant):
    """View makers, SplitViews, FiveCrop and TenCrop: a graph with an output per view."""
    found = {}
    for name, transform, _ in view_cases():
        edges = gpu_to_cpu_edges(serialized_gpu_graph(images, transform, variant=variant))
        if edges:
            found[name] = edges
    assert found == {} and len(view_cases()) >= 4


@pytest.mark.parametrize("variant", VARIANTS)
def test_steps_drawn_per_sample_have_no_gpu_to_cpu_edge(images, variant):
    """Sizes, canvases (a rotation's expanded one too), colour distortions, channel orders, elastic
    fields and noise drawn per sample (check-gpu pins them, which leaves some of their operators
    out of its graphs)."""
    steps = [v2.RandomShortestSize([40, 50], max_size=70), v2.ScaleJitter((60, 50), (0.5, 1.5)),
             v2.RandomResize(30, 40), v2.RandomZoomOut(fill=3, p=0.5), v2.RandomPhotometricDistort(),
             v2.RandomChannelPermutation(), v2.RandomPerspective(0.3, p=0.5), v2.ElasticTransform(fill=3.0),
             v2.RandomRotation(20, expand=True), v2.RandomRotation(20, expand=True, interpolation=v2.InterpolationMode.BILINEAR),
             v2.ElasticTransform(interpolation=v2.InterpolationMode.NEAREST, fill=5.0), v2.ToImage(),
             v2.GaussianNoise(0.0, 0.05), v2.JPEG((30, 90)), v2.ToDtype(torch.float32, scale=True), v2.GaussianNoise(),
             v2.RandomZoomOut(fill=0.5, side_range=(1.0, 1.5), p=0.5)]   # float: its fill in the float image's units
    steps[10:10] = [v2.RandomRotation(20, fill=[1, 2, 3]),   # fills per channel, nearest and bilinear
                    v2.RandomAffine(5, interpolation=v2.InterpolationMode.BILINEAR, fill=[4, 5, 6])]
    steps[-1:-1] = [v2.RandomPerspective(0.3, fill=[0.1, 0.2, 0.3])]
    assert gpu_to_cpu_edges(serialized_gpu_graph(images, v2.Compose(steps), variant=variant)) == []


@pytest.mark.parametrize("variant", VARIANTS)
def test_amounts_and_boxes_drawn_per_image_have_no_gpu_to_cpu_edge(images, variant):
    """Each image's own padding (pad_if_needed with a mode, on files of varying size) and
    timm's several erasing boxes."""
    timm_erasing = pytest.importorskip("timm.data.random_erasing")
    steps = [v2.RandomCrop(64, pad_if_needed=True, padding_mode="edge"),
             v2.RandomCrop(70, pad_if_needed=True, padding_mode="reflect"), v2.ToImage(),
             v2.ToDtype(torch.float32, scale=True),
             timm_erasing.RandomErasing(0.5, mode="pixel", min_count=1, max_count=3, device="cpu")]
    assert gpu_to_cpu_edges(serialized_gpu_graph(images, v2.Compose(steps), variant=variant)) == []


@pytest.mark.parametrize("variant", VARIANTS)
def test_no_recipe_has_a_gpu_to_cpu_edge(images, arrays, variant):
    found, seen = {}, []
    for name, kind, transform in recipe_cases():
        source = images if kind == "images" else arrays
        edges = gpu_to_cpu_edges(serialized_gpu_graph(source, transform, variant=variant))
        seen.append(name)
        if edges:
            found[name] = edges
    assert found == {}
    assert {"imagenet default train", "imagenet default val", "imagenet resnet50 train"} <= set(seen)


def test_the_chain_operator_adds_no_gpu_to_cpu_edge(images, arrays, monkeypatch):
    """The recipes' GPU graphs with the chain's stages in DaliLoadersChainTail (as
    DALI_LOADERS_CHAIN_TAIL=1 gives them where its GPU operator is built): none has a
    GPU -> CPU edge, and the chains do use the operator."""
    from dali_loaders.ops import chain_tail, plugin

    if not plugin.chain_available():
        pytest.skip("the chain plugin cannot be built here")
    monkeypatch.setattr(chain_tail, "usable", lambda device: True)
    found, used = {}, []
    for name, kind, transform in recipe_cases():
        graph = serialized_gpu_graph(images if kind == "images" else arrays, transform, variant="gpu")
        used += [name for op_kind, *_ in dali_compat.graph_operators(graph) if op_kind == "DaliLoadersChainTail"]
        edges = gpu_to_cpu_edges(graph)
        if edges:
            found[name] = edges
    assert found == {}
    assert "imagenet resnet50 train" in used


def test_the_check_finds_an_edge(images):
    # a graph that asks for the GPU pixels' shape on the CPU: the check must see it
    def resized_by_own_shape(pixels):
        from nvidia.dali import fn, types

        return fn.resize(pixels, size=fn.cast(pixels.shape()[0:2], dtype=types.FLOAT) * 0.5)

    graph = serialized_gpu_graph(images, DaliFunction(resized_by_own_shape), variant="gpu")
    assert [kind for kind, _ in gpu_to_cpu_edges(graph)] == ["_Shape"]


# -- where device="gpu" runs the steps ------------------------------------------------------------


def variant_of(source, transform, variant="gpu", python_fallback=False):
    return graph_variant(variant, source, transforms.plan(transform, python_fallback))


def test_plain_recipes_over_files_run_on_the_gpu(images):
    assert variant_of(images, recipes.imagenet(True)) == "gpu"
    assert variant_of(images, recipes.imagenet(False)) == "gpu"


def with_step(step):
    return v2.Compose([v2.RandomResizedCrop(32), step, v2.ToDtype(torch.float32, scale=True)])


def test_recipes_the_fused_operator_runs_faster_keep_their_steps_on_the_cpu(images):
    """Where the GPU chain was measured slower than the fused CPU operator (two slots or
    more, ColorJitter's branches) the steps stay on the CPU; one slot runs on the GPU."""
    assert plugin.augment_available()
    two = with_step(v2.RandAugment(2, 9))
    assert variant_of(images, two) == "cpu-steps"
    assert variant_of(images, with_step(v2.AutoAugment())) == "cpu-steps"
    assert variant_of(images, with_step(v2.ColorJitter(0.4, 0.4, 0.4, 0.1))) == "cpu-steps"
    assert variant_of(images, with_step(v2.RandAugment(1, 9))) == "gpu"
    assert variant_of(images, with_step(v2.AugMix())) == "cpu-steps"   # three chains of 1-3 slots
    assert variant_of(images, with_step(v2.AugMix(mixture_width=1, chain_depth=1))) == "gpu"
    assert variant_of(images, recipes.resnet50_reference(True)) == "gpu"   # TrivialAugmentWide: one slot
    assert variant_of(images, recipes.resnet50_reference(False)) == "gpu"          # val: no augmentation
    assert variant_of(images, two, "cpu-decode") == "cpu-decode"   # asked for
    assert variant_of(images, two, "cpu") == "cpu"


def test_without_the_fused_operator_they_run_on_the_gpu(images, monkeypatch):
    monkeypatch.setenv(plugin.DISABLE_AUGMENT_ENV, "1")
    assert variant_of(images, with_step(v2.RandAugment(2, 9))) == "gpu"
    assert variant_of(images, with_step(v2.AugMix())) == "gpu"


@pytest.mark.parametrize("variant", VARIANTS)
def test_augmix_on_the_gpu_has_no_gpu_to_cpu_edge_and_no_conditionals(images, variant):
    """AugMix's chains on GPU pixels (the GPU chain's operators) and its weights copied over once."""
    transform = with_step(v2.AugMix())
    assert not transforms.needs_conditionals(transforms.plan(transform, False), variant)
    assert gpu_to_cpu_edges(serialized_gpu_graph(images, transform, variant=variant)) == []


def test_sources_of_pixels_keep_their_steps_on_the_cpu(arrays):
    assert variant_of(arrays, recipes.cifar(True)) == "cpu-steps"
    assert variant_of(arrays, recipes.cifar(True), "cpu-decode") == "cpu-decode"


def test_the_cpu_steps_graph_runs_every_step_on_the_cpu_and_hands_the_batch_over_on_the_gpu(images, arrays):
    for source, transform in ((images, recipes.resnet50_reference(True)), (arrays, recipes.cifar(True))):
        graph = serialized_gpu_graph(source, transform, variant="cpu-steps")
        operators = dali_compat.graph_operators(graph)
        assert [kind for kind, _, device, _ in operators if device != "cpu"] == []
        assert [device for _, device in dali_compat.graph_outputs(graph)] == ["gpu", "gpu"]
        assert "decoders__ImageRandomCrop" in {kind for kind, *_ in operators} or source is arrays
    gpu = dali_compat.graph_outputs(serialized_gpu_graph(images, recipes.imagenet(True), variant="gpu"))
    assert [device for _, device in gpu] == ["gpu", "gpu"]


def test_timms_pixel_noise_crosses_to_the_gpu_at_the_boxs_size(images):
    """timm's RandomErasing(mode="pixel") on a GPU graph: the noise is drawn on the CPU at the
    box's size and padded to the image on the GPU (the padded copy on the CPU was the image's
    size in float32 a sample, copied over each batch)."""
    timm_erasing = pytest.importorskip("timm.data.random_erasing")
    transform = v2.Compose([v2.RandomResizedCrop(32), v2.ToImage(), v2.ToDtype(torch.float32, scale=True),
                            timm_erasing.RandomErasing(1.0, mode="pixel", device="cpu")])
    operators = dali_compat.graph_operators(serialized_gpu_graph(images, transform, variant="gpu"))
    kinds = {(kind, device) for kind, _, device, _ in operators}
    assert ("random__Normal", "cpu") in kinds
    assert ("Slice", "cpu") not in kinds and ("Slice", "gpu") in kinds, sorted(kinds)


def test_files_are_read_without_a_memory_map_each(images):
    """fn.io.file.read with dont_use_mmap (one mapping per image held the GPU loader to two
    thirds of plain reads' speed on an H200): the argument as the serialized graph holds it."""
    graph = serialized_gpu_graph(images, recipes.imagenet(True), variant="gpu")
    assert [kind for kind, *_ in dali_compat.graph_operators(graph)].count("io__file__Read") == 1
    assert b"\n\rdont_use_mmap\x12\x04bool0\x01" in graph   # name, type, value True
