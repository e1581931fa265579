"""NVIDIA's DALI example pipeline, the bench's hand-written contender (bench/nvidia.py): on the
CPU, its val epoch is torchvision's Resize(256), CenterCrop(224), normalized (ImageFolder's
images, labels and order); its train epoch serves every image once, 224-pixel crops. Every
contender that runs a DALI pipeline builds it once and runs it epoch after epoch, as its
users do."""
import collections
import os

import numpy as np
import pytest
import torch

from dali_loaders.bench import data, nvidia


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return data.make_image_folder(str(tmp_path_factory.mktemp("nv")), 10, 7, classes=3, short_sides=(240, 300),
                                  workers=1)


def test_val_is_torchvisions_resize_and_centre_crop(folder):
    from torchvision import datasets
    from torchvision.transforms import v2

    reference = datasets.ImageFolder(os.path.join(folder, "val"), transform=v2.Compose([
        v2.Resize(256, antialias=True), v2.CenterCrop(224), v2.ToImage(), v2.ToDtype(torch.float32, scale=True),
        v2.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])]))
    served = [(images, labels) for images, labels in nvidia.NvidiaExample(folder, "val", 3, 1, gpu=False)]
    images = torch.cat([i for i, _ in served])
    labels = torch.cat([y for _, y in served])
    assert images.shape == (7, 3, 224, 224) and images.dtype == torch.float32 and labels.dtype == torch.int64
    assert labels.tolist() == [label for _, label in reference.samples]
    means = [(images[k] - expected).abs().mean().item() for k, (expected, _) in enumerate(reference)]
    # DALI's resize is not PIL's, and it rounds the long side where torchvision truncates (a
    # pixel wider, textures a little apart): ~0.01 (under a level, ~0.017) on most images,
    # 0.1 at worst; a flipped, channel-swapped or shifted crop is 0.3 and more
    assert np.median(means) < 0.03 and max(means) < 0.15, means


def test_train_serves_every_image_once_per_epoch(folder):
    loader = nvidia.NvidiaExample(folder, "train", 4, 1, gpu=False)
    expected = collections.Counter(k % 3 for k in range(10))
    for _ in range(2):
        batches = list(loader)
        assert [len(y) for _, y in batches] == [4, 4, 2]
        assert all(x.shape[1:] == (3, 224, 224) for x, _ in batches)
        assert collections.Counter(torch.cat([y for _, y in batches]).tolist()) == expected
        mean = torch.cat([x for x, _ in batches]).mean(dim=(0, 2, 3))
        assert np.all(np.abs(mean.numpy()) < 3)   # normalized, not 0..255


@pytest.mark.parametrize("kind", ["nvidia", "ceiling", "limit", "dali"])
@pytest.mark.parametrize("split", ["train", "val"])
def test_each_contender_builds_its_pipeline_once(folder, kind, split, monkeypatch):
    """Three whole epochs through the bench's own maker: one pipeline runs them all (a
    pipeline per epoch would time builds, not epochs), and every epoch serves the split."""
    from nvidia.dali.pipeline import Pipeline

    from dali_loaders.bench.contenders import make_loader

    ran = []
    schedule_run = Pipeline.schedule_run

    def recording(pipeline):
        if not any(pipeline is seen for seen in ran):
            ran.append(pipeline)
        return schedule_run(pipeline)

    monkeypatch.setattr(Pipeline, "schedule_run", recording)
    spec = {"kind": kind, "dataset": "imagenet", "split": split, "data": folder, "batch_size": 4, "threads": 1,
            "recipe": "default", "device": "cpu"}
    loader = make_loader(spec, 0)
    size = 10 if split == "train" else 7
    for _ in range(3):
        served = sum(len(labels) for _, labels in loader)
        # the limit and the ceiling run whole batches (the reader wraps round), the loaders the split
        assert served == (-(-size // 4) * 4 if kind in ("limit", "ceiling") else size)
    assert len(ran) == 1
