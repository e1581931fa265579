"""What one process of a distributed run sees, written to a file for tests/test_distributed.py.

    torchrun ... dist_worker.py shards JOB_JSON OUT_DIR
        Builds the loaders named in the job WITHOUT passing a rank (they must find it),
        runs a few train epochs and one val pass, and writes OUT_DIR/rank<RANK>.json.
        With "process_group": true it then initializes a gloo group, hides torchrun's
        RANK/WORLD_SIZE so only the group can tell the loaders who they are, and does it
        again, plus the documented val-metric all_reduce.

    torchrun ... dist_worker.py accelerate JOB_JSON OUT_DIR
        As a script using Accelerate runs: Accelerator() (its process group), set_seed with
        device_specific=True (each rank's generators seeded apart), then every loader of the
        job (DALI loaders and twins) through accelerator.prepare, which must hand it back
        unchanged; the epochs as "shards" reports them, under "accelerate".

    torchrun ... dist_worker.py fabric JOB_JSON OUT_DIR
        As a script using Lightning Fabric runs: Fabric(strategy="ddp") on the CPU, launch(),
        seed_everything(7 + rank); each twin through fabric.setup_dataloaders (which takes
        DataLoaders only), each DALI loader as it is; iterated as Fabric's loop does, without
        set_epoch (Fabric's wrapper sets the sampler's epoch); under "fabric". Both write the
        framework's index of this process as "process_index".

    python dist_worker.py resume JOB_PICKLE OUT_FILE
        For each saved state: a fresh loader, load_state_dict, the rest of that epoch and
        the next whole epoch, all saved with torch.save for a bit-for-bit comparison.
"""
import json
import os
import pickle
import sys

import torch

from dali_loaders import recipes


def make_loader(kind: str, kwargs: dict, twin: bool = False):
    """kind "cifar" or "imagefolder", with the get_*_iter_dali keyword arguments; `twin`: the
    torchvision twin (get_*_iter_torch) with the same arguments."""
    from dali_loaders.datasets import cifar, imagenet

    module, name = (cifar, "cifar") if kind == "cifar" else (imagenet, "imagefolder")
    return getattr(module, f"get_{name}_iter_{'torch' if twin else 'dali'}")(**kwargs)


def recipe_mean_std(kind: str, kwargs: dict):
    dataset = kwargs.get("dataset", "cifar10")
    mean = recipes.CIFAR_MEAN[dataset] if kind == "cifar" else recipes.IMAGENET_MEAN
    std = recipes.CIFAR_STD[dataset] if kind == "cifar" else recipes.IMAGENET_STD
    return 255 * torch.tensor(mean, dtype=torch.float64), 255 * torch.tensor(std, dtype=torch.float64)


def decode_indices(images: torch.Tensor, mean: torch.Tensor, std: torch.Tensor, code: dict) -> list:
    """The sample index every image encodes in its pixels: each channel one digit in base
    code["base"], written as offset + step * digit, red the most significant (CIFAR's
    index_images: base 256, step 1; the image folders: a few widely spaced levels, which
    survive resizing). Reads the centre pixel, which no crop or flip moves off the image."""
    base, step, offset = code["base"], code["step"], code["offset"]
    h, w = images.shape[-2:]
    rgb = images[:, :, h // 2, w // 2].double().cpu() * std + mean
    digits = torch.round((rgb - offset) / step)
    if (rgb - (offset + step * digits)).abs().max() > step / 4 or digits.min() < 0 or digits.max() >= base:
        raise AssertionError(f"pixels do not encode an index: {rgb.tolist()}")
    digits = digits.long()
    return (digits[:, 0] * base * base + digits[:, 1] * base + digits[:, 2]).tolist()


def labelled_indices(images: torch.Tensor, labels: torch.Tensor, mean, std, code: dict, per_class: int) -> list:
    """decode_indices, checking each label is its image's (class index // per_class)."""
    indices = decode_indices(images, mean, std, code)
    assert labels.tolist() == [i // per_class for i in indices], "a label left its image"
    return indices


def run_epochs(loader, epochs: int, decode) -> list:
    """[[ [indices, labels] per batch ] per epoch], set_epoch-style as with DistributedSampler."""
    seen = []
    for epoch in range(epochs):
        if hasattr(loader, "set_epoch"):   # Fabric's wrapper has none: it sets the sampler's epoch itself
            loader.set_epoch(epoch)
        seen.append([[decode(images), labels.tolist()] for images, labels in loader])
    return seen


def observe(job: dict, prepare=lambda loader: loader) -> dict:
    """What every loader of the job yields in this process (each loader as `prepare` hands it back)."""
    report = {}
    for name, spec in job["loaders"].items():
        # env_kwargs: arguments read from the environment, as the original API's callers did.
        kwargs = dict(spec["kwargs"], **{k: int(os.environ[v]) for k, v in spec.get("env_kwargs", {}).items()})
        mean, std = recipe_mean_std(spec["kind"], kwargs)
        loader = prepare(make_loader(spec["kind"], kwargs, spec.get("twin", False)))
        shard = loader.sampler.shard
        report[name] = {"shard_rank": shard.rank, "shard_world_size": shard.world_size,
                        "gpu_local_rank": shard.local_rank, "len": len(loader),
                        "epochs": run_epochs(loader, spec["epochs"],
                                             lambda x: decode_indices(x, mean, std, spec["code"]))}
    return report


def combined_val_counts(report: dict) -> dict:
    """The README's recipe: per-rank sums and counts, all_reduce'd after the loop."""
    combined = {}
    for name, seen in report.items():
        samples = [i for batches in seen["epochs"] for indices, _ in batches for i in indices]
        totals = torch.tensor([len(samples), sum(samples)], dtype=torch.float64)
        torch.distributed.all_reduce(totals)
        combined[name] = totals.tolist()
    return combined


def shards(job_path: str, out_dir: str) -> None:
    with open(job_path) as f:
        job = json.load(f)
    result = {"env": {k: os.environ.get(k) for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "GROUP_RANK")},
              "from_env": observe(job)}
    if job.get("process_group"):
        torch.distributed.init_process_group("gloo")
        for name in ("RANK", "WORLD_SIZE"):  # from here on, only the group knows
            del os.environ[name]
        result["from_group"] = observe(job)
        val = {name: seen for name, seen in result["from_group"].items() if name.endswith("val")}
        result["val_all_reduce"] = combined_val_counts(val)
        torch.distributed.destroy_process_group()
    write_report(out_dir, result)


def accelerate_setup():
    """As a script using Accelerate starts: (this process's index, what prepare() does)."""
    import accelerate
    from accelerate.utils import set_seed

    accelerator = accelerate.Accelerator(cpu=True)
    set_seed(7, device_specific=True)   # 7 + process index: the ranks' generators apart

    def prepare(loader):
        prepared = accelerator.prepare(loader)
        assert prepared is loader, f"accelerate rebuilt the {type(loader).__name__}"
        return prepared

    return accelerator.process_index, prepare


def fabric_setup():
    """As a script using Lightning Fabric starts: (this process's index, what it does to a loader)."""
    import lightning_fabric
    from torch.utils.data import DataLoader

    fabric = lightning_fabric.Fabric(accelerator="cpu", devices=int(os.environ["WORLD_SIZE"]), strategy="ddp")
    fabric.launch()
    fabric.seed_everything(7 + fabric.global_rank)   # the ranks' generators apart

    def prepare(loader):
        return fabric.setup_dataloaders(loader) if isinstance(loader, DataLoader) else loader

    return fabric.global_rank, prepare


FRAMEWORKS = {"accelerate": accelerate_setup, "fabric": fabric_setup}


def framework_run(framework: str, job_path: str, out_dir: str) -> None:
    with open(job_path) as f:
        job = json.load(f)
    process_index, prepare = FRAMEWORKS[framework]()
    write_report(out_dir, {"env": {k: os.environ.get(k) for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK")},
                           "process_index": process_index, framework: observe(job, prepare)})


def write_report(out_dir: str, result: dict) -> None:
    with open(os.path.join(out_dir, f"rank{result['env']['RANK']}.json"), "w") as f:
        json.dump(result, f)


def resume(job_path: str, out_path: str) -> None:
    with open(job_path, "rb") as f:
        job = pickle.load(f)
    results = {}
    for name, state in job["states"].items():
        loader = make_loader(job["kind"], job["kwargs"])
        loader.load_state_dict(state)
        rest = list(loader)
        results[name] = {"rest": rest, "next_epoch": list(loader)}
    torch.save(results, out_path)


if __name__ == "__main__":
    if sys.argv[1] in FRAMEWORKS:
        framework_run(*sys.argv[1:])
    else:
        {"shards": shards, "resume": resume}[sys.argv[1]](*sys.argv[2:])
