"""One process of a torchrun over WebDataset shards, for tests/test_webdataset.py.

    torchrun ... wds_worker.py SHARD_FOLDER OUT_DIR
        Builds a train and a val loader WITHOUT passing a rank (they must find it), runs two
        train epochs and one val pass, and writes OUT_DIR/rank<RANK>.json: per loader, its
        shard, len() and, per epoch, [sample ids, labels] per batch.
"""
import json
import os
import sys

import torch
from image_data import image_id
from torchvision.transforms import v2

from dali_loaders import get_webdataset_iter_dali

BATCH = 4


def recipe(train: bool):
    """Any crop of a flat colour keeps it; no normalization, so pixels = x * 255."""
    crop = v2.RandomResizedCrop(16, antialias=True) if train else v2.CenterCrop(16)
    return v2.Compose([crop, v2.ToImage(), v2.ToDtype(torch.float32, scale=True)])


def sample_ids(images: torch.Tensor) -> list:
    return [image_id(rgb) for rgb in (images.mean(dim=(2, 3)) * 255).tolist()]


def epochs(loader, count: int) -> list:
    seen = []
    for epoch in range(count):
        loader.set_epoch(epoch)
        seen.append([[sample_ids(x), y.tolist()] for x, y in loader])
    return seen


def main(folder: str, out_dir: str) -> None:
    report = {}
    for name, train, count in (("train", True, 2), ("val", False, 1)):
        loader = get_webdataset_iter_dali(folder, BATCH, 1, train=train, seed=5, transform=recipe(train))
        report[name] = {"rank": loader.sampler.shard.rank, "world_size": loader.sampler.shard.world_size,
                        "len": len(loader), "epochs": epochs(loader, count)}
    with open(os.path.join(out_dir, f"rank{os.environ['RANK']}.json"), "w") as f:
        json.dump(report, f)


if __name__ == "__main__":
    main(*sys.argv[1:])
