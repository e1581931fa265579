"""A GPU loader needs none of our C++ operators: its graphs are DALI's own operators, but for
RandomErasing's box, which a recipe that erases asks the augmentation plugin for (one CPU
operator where DALI arithmetic takes fifty) and draws in DALI arithmetic without it. Each GPU
graph is serialized (DALI checks every operator and argument against its GPU schemas) in a
fresh process where compiling is impossible: once with the plugins turned off, once with no
compiler and an empty plugin cache, where any try to build one warns and is recorded."""
import json
import os
import subprocess
import sys

import pytest

SCRIPT = r"""
import json, os, sys, warnings
warnings.simplefilter("always", RuntimeWarning)
from torchvision.transforms import v2
from dali_loaders import recipes
from dali_loaders.loader.build import serialized_gpu_graph
from dali_loaders.ops import plugin
from dali_loaders.sources.arrays import ArraySource
from dali_loaders.sources.image_files import ImageFiles
from dali_loaders.testing.check_gpu import SIZES, write_image_folder
import numpy as np

folder = write_image_folder(sys.argv[1], SIZES)
images = ImageFiles(folder)
pixels = np.random.default_rng(0).integers(0, 256, (8, 32, 32, 3), dtype=np.uint8)
arrays = ArraySource(pixels, np.arange(8) % 3, "cifar10")
tried = []
build = plugin.build


def recording_build(library=plugin.RESIZE):
    tried.append(library.file)
    return build(library)


plugin.build = recording_build   # available() builds through this
cases = {
    "imagenet train": (images, recipes.imagenet(True, 32, 40)),
    "imagenet val": (images, recipes.imagenet(False, 32, 40)),
    "resnet50 train (TrivialAugmentWide, RandomErasing)": (images, recipes.resnet50_reference(True)),
    "RandAugment + ColorJitter": (images, v2.Compose([v2.RandomResizedCrop(32), v2.RandAugment(),
                                                      v2.ColorJitter(0.4, 0.4, 0.4, 0.1), *recipes.to_float(
                                                          recipes.IMAGENET_MEAN, recipes.IMAGENET_STD)])),
    "cifar train (Cutout)": (arrays, recipes.cifar(True, "cifar10", cutout=8)),
}
sizes, asked = {}, {}
for name, (source, transform) in cases.items():
    for variant in ("gpu", "cpu-decode"):
        before = len(tried)
        with warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always", RuntimeWarning)
            sizes[f"{name}, {variant}"] = len(serialized_gpu_graph(source, transform, variant=variant))
        asked[f"{name}, {variant}"] = tried[before:] + [str(w.message)[:80] for w in warned]
print(json.dumps({"sizes": sizes, "tried": tried, "asked": asked}))
"""


@pytest.mark.parametrize("how", ["plugins turned off", "no compiler"])
def test_gpu_graphs_serialize_without_our_operators(how, tmp_path):
    cache = tmp_path / "plugin-cache"
    cache.mkdir()
    env = dict(os.environ, DALI_LOADERS_CACHE=str(cache))
    if how == "plugins turned off":
        env["DALI_LOADERS_NO_PLUGIN"] = "1"
    else:
        env.pop("DALI_LOADERS_NO_PLUGIN", None)
        env["CXX"] = str(tmp_path / "no-such-compiler")
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "images")], capture_output=True, text=True,
                          timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(found["sizes"]) == 10 and all(size > 0 for size in found["sizes"].values())
    assert list(cache.iterdir()) == []    # nothing was compiled into the cache
    if how == "plugins turned off":
        assert found["tried"] == []       # no plugin was asked for
        return
    # the first graph that erases asked for the augmentation plugin (once: its failure is
    # remembered), warned that it is not available, and drew the box without it
    augment = "libdali_loaders_augment.so"
    assert found["tried"] == [augment]
    first = "resnet50 train (TrivialAugmentWide, RandomErasing), gpu"
    assert found["asked"][first][0] == augment
    assert "augmentation plugin is not available" in found["asked"][first][1]
    assert all(asked == [] for name, asked in found["asked"].items() if name != first), found["asked"]
