"""Processes for tests/test_pipeline_life.py.

    python life_worker.py fork ROOT [--no-hook]
        A DALI loader run, then left in a reference cycle; then a DataLoader whose forked
        workers run gc.collect() on every sample. Prints "served N". (--no-hook: with the
        library's after-fork hook made a no-op, to show the hang it prevents.)
    python life_worker.py allreduce ROOT OUT_DIR   (under torchrun, 3 processes, gloo)
        Validation with even_batches=True and an all_reduce per batch, as timm's validate.
    python life_worker.py soak ROOT OUT EPOCHS [STATE]
        TrivialAugmentWide epochs; after every batch, the state_dict and the labels seen so far
        (torch.save, replaced atomically); at each epoch's end the process's RSS and threads.
"""
import gc
import json
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from dist_worker import decode_indices, recipe_mean_std  # noqa: E402

CIFAR_CODE = {"base": 256, "step": 1, "offset": 0}


def fork(root: str, no_hook: bool) -> None:
    from dali_loaders import get_cifar_iter_dali

    if no_hook:
        import dali_loaders.loader.pipeline as pipeline
        pipeline._disarm_inherited_pipelines.__code__ = (lambda: None).__code__
    gc.disable()  # the cycle must survive until the children collect it
    loader = get_cifar_iter_dali("val", root, 16, num_threads=2, seed=0)
    for k, _ in enumerate(loader):
        if k == 1:
            break  # runs left in flight, as a real `break` leaves them
    loader.cycle = loader
    del loader

    class Collecting(torch.utils.data.Dataset):
        def __len__(self):
            return 8

        def __getitem__(self, i):
            gc.collect()
            return i

    served = sum(len(b) for b in torch.utils.data.DataLoader(Collecting(), batch_size=2, num_workers=2))
    print(f"served {served}", flush=True)


def allreduce(root: str, out_dir: str) -> None:
    import torch.distributed as dist

    from dali_loaders import get_cifar_iter_dali

    dist.init_process_group("gloo")
    loader = get_cifar_iter_dali("val", root, 33, num_threads=1, seed=0, even_batches=True)
    mean, std = recipe_mean_std("cifar", {})
    kept, steps = [], 0
    for images, labels in loader:
        total = torch.tensor([float(len(labels))])
        dist.all_reduce(total)  # every rank must reach it as often as the others
        steps += 1
        keep = ~loader.padded
        kept += [i for i, k in zip(decode_indices(images, mean, std, CIFAR_CODE), keep.tolist()) if k]
    with open(os.path.join(out_dir, f"rank{dist.get_rank()}.json"), "w") as f:
        json.dump({"steps": steps, "kept": kept}, f)
    dist.destroy_process_group()


def soak(root: str, out: str, epochs: int, state_path: str = None) -> None:
    from torchvision.transforms import v2

    from dali_loaders import get_cifar_iter_dali

    recipe = v2.Compose([v2.TrivialAugmentWide(), v2.ToImage(), v2.ToDtype(torch.float32, scale=True)])
    loader = get_cifar_iter_dali("train", root, 16, num_threads=2, seed=3, dataset="cifar100", transform=recipe)
    seen, usage = {}, []
    if state_path:
        saved = torch.load(state_path, weights_only=False)
        loader.load_state_dict(saved["state"])
        seen = saved["seen"]
    first = loader.state_dict()["epoch"]
    for epoch in range(first, epochs):
        for images, labels in loader:
            seen.setdefault(epoch, []).extend(labels.tolist())
            torch.save({"state": loader.state_dict(), "seen": seen, "usage": usage}, out + ".tmp")
            os.replace(out + ".tmp", out)
            time.sleep(float(os.environ.get("SOAK_STEP_SECONDS", "0")))   # a training step's time: the kill lands mid-epoch
        usage.append(rss_and_threads())
        torch.save({"state": loader.state_dict(), "seen": seen, "usage": usage}, out + ".tmp")
        os.replace(out + ".tmp", out)
    loader.close()


def rss_and_threads():
    """(resident bytes, threads) of this process, from /proc."""
    status = dict(line.split(":", 1) for line in open("/proc/self/status"))
    return int(status["VmRSS"].split()[0]) * 1024, int(status["Threads"])


if __name__ == "__main__":
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "fork":
        fork(args[0], "--no-hook" in args)
    elif mode == "allreduce":
        allreduce(*args)
    else:
        soak(args[0], args[1], int(args[2]), *args[3:])
