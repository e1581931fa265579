"""The loaders inside Lightning and Accelerate (issue 11), counting the samples every epoch
and every rank saw: images encode their own index (cifar_data.index_images).

Lightning runs tests/lightning_worker.py: in this process for one device, launched as a
script for strategy="ddp" on 2 CPU processes (gloo), where the loaders passed to fit()
are built before the process group exists.
"""
import importlib
import inspect
import json
import os
import subprocess
import sys

import pytest
import torch
from cifar_data import index_images, write_cifar
from dist_worker import decode_indices, recipe_mean_std
from subprocess_env import subprocess_env
from torch.utils.data import DataLoader

from dali_loaders import get_cifar_iter_dali, get_cifar_iter_torch
from dali_loaders.distributed import Shard

HERE = os.path.dirname(os.path.abspath(__file__))
N_TRAIN, N_VAL, BATCH = 500, 100, 32
TRAIN, VAL = list(range(N_TRAIN)), list(range(N_TRAIN, N_TRAIN + N_VAL))  # index_images numbers val after train
CHECKPOINT_STEP = 4
LAUNCH_TIMEOUT = 600

MEAN, STD = recipe_mean_std("cifar", {})


def indices(images):
    return decode_indices(images, MEAN, STD, {"base": 256, "step": 1, "offset": 0})


@pytest.fixture(scope="module")
def cifar_root(written_once):
    return written_once(write_cifar, n_train=N_TRAIN, n_test=N_VAL, images=index_images)


@pytest.fixture(autouse=True)
def no_accelerator_left():
    """An Accelerator is process-wide state, and the loaders' default device follows it
    (Accelerator(cpu=True): the CPU): one made here must not choose the device of later tests.
    Reset as Accelerate's own test case resets it (its only way)."""
    yield
    state = sys.modules.get("accelerate.state")
    if state is not None and state.is_initialized():
        state.AcceleratorState._reset_state(reset_partial_state=True)
        assert not state.is_initialized()


def flat(batches):
    return [i for batch in batches for i in batch]


# -- the DataLoader surface and the lazy shard, without a framework ---------------------------


def test_dali_loader_has_every_dataloader_attribute(cifar_root, no_torchrun_env):
    loader = get_cifar_iter_dali("train", cifar_root, BATCH, num_threads=1, seed=0)
    arguments = set(inspect.signature(DataLoader.__init__).parameters) - {"self", "shuffle"}
    assert not [name for name in arguments if not hasattr(loader, name)]
    assert (loader.num_workers, loader.pin_memory, loader.collate_fn) == (1, False, None)   # DALI threads, as passed
    assert isinstance(loader.sampler, torch.utils.data.DistributedSampler)
    assert (loader.sampler.num_replicas, loader.sampler.rank) == (1, 0)
    assert len(loader.batch_sampler) == len(loader)
    # The batch sampler names the samples of each batch the loader yields.
    loader.set_epoch(3)
    planned = list(loader.batch_sampler)
    loader.set_epoch(3)
    assert [indices(images) for images, _ in loader] == planned


def test_iter_alone_starts_no_epoch(cifar_root, no_torchrun_env):
    loader = get_cifar_iter_dali("train", cifar_root, BATCH, num_threads=1, seed=0)
    reference = [indices(images) for images, _ in get_cifar_iter_dali("train", cifar_root, BATCH, num_threads=1,
                                                                      seed=0)]
    iter(loader), iter(loader)  # what Lightning does to check that a loader is iterable
    assert loader.state_dict()["epoch"] == 0
    assert [indices(images) for images, _ in loader] == reference


def test_shard_waits_for_the_rank(cifar_root, no_torchrun_env, monkeypatch):
    # Lightning's ddp launcher, in rank 1 before its process group: WORLD_SIZE, LOCAL_RANK, no RANK.
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    loader = get_cifar_iter_dali("train", cifar_root, BATCH, num_threads=1)  # does not raise
    twin = get_cifar_iter_torch("train", cifar_root, BATCH, num_threads=0)
    with pytest.raises(ValueError, match="WORLD_SIZE=2 is set"):
        len(loader)
    monkeypatch.setenv("RANK", "1")  # as the process group would tell
    assert loader.sampler.shard == twin.sampler.shard == Shard(1, 2, 1)
    assert len(loader) == len(twin) == -(-(N_TRAIN // 2) // BATCH)
    assert loader.sampler.seed == 0, "several processes must agree on the seed"


def test_single_process_until_a_group_says_otherwise(cifar_root, no_torchrun_env, monkeypatch):
    # Lightning's rank 0: built before fit() with nothing set, read once the group exists.
    loader = get_cifar_iter_dali("train", cifar_root, BATCH, num_threads=1)
    assert len(loader.sampler) == N_TRAIN
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert len(loader.sampler) == N_TRAIN // 2
    assert sorted(flat(indices(images) for images, _ in loader)) == sorted(loader.sampler.indices(0).tolist())


def test_state_from_another_rank_resumes_this_ranks_batches(cifar_root, no_torchrun_env):
    def loader(rank):
        return get_cifar_iter_dali("train", cifar_root, BATCH, num_threads=1, seed=4, rank=rank, world_size=2)

    rank0, rank1 = loader(0), loader(1)
    reference = [indices(images) for images, _ in rank1]
    epoch = iter(rank0)
    for _ in range(3):
        next(epoch)
    state = rank0.state_dict()  # frameworks keep rank 0's state only
    resumed = loader(1)
    resumed.load_state_dict(state)
    assert [indices(images) for images, _ in resumed] == reference[3:]
    with pytest.raises(ValueError, match="world_size"):
        get_cifar_iter_dali("train", cifar_root, BATCH, num_threads=1, seed=4, rank=0, world_size=3) \
            .load_state_dict(state)


# -- Lightning -------------------------------------------------------------------------------------

LIGHTNING_JOBS = {
    # Loaders built before the Trainer and passed to fit(): sanity check, validation mid-epoch,
    # validate/test/predict, then a new process's fit resumed from a mid-epoch checkpoint.
    "factory_dali": {"loaders": "factory", "use_dali": True, "seed": 3, "evaluate": True,
                     "trainer": {"max_epochs": 2, "num_sanity_val_steps": 2, "val_check_interval": 3},
                     "checkpoint_step": CHECKPOINT_STEP, "resume_from": f"step={CHECKPOINT_STEP}.ckpt"},
    "module_dali": {"loaders": "module", "use_dali": True, "evaluate": True,
                    "trainer": {"max_epochs": 2, "limit_train_batches": 5, "num_sanity_val_steps": 0}},
    "module_torch": {"loaders": "module", "use_dali": False, "num_threads": 0, "evaluate": True,
                     "trainer": {"max_epochs": 2, "num_sanity_val_steps": 2}},
}


def lightning_jobs(root, **settings):
    return {name: dict(job, root=root, batch_size=BATCH, **settings) for name, job in LIGHTNING_JOBS.items()}


def check_lightning(reports, world_size):
    """reports[rank][job] = what that rank saw (lightning_worker.py)."""
    per_rank = N_TRAIN // world_size
    batches_per_epoch = -(-per_rank // BATCH)
    for name in LIGHTNING_JOBS:
        runs = [report[name] for report in reports]
        assert [r["world_size"] for r in runs] == [world_size] * world_size
        limit = LIGHTNING_JOBS[name]["trainer"].get("limit_train_batches")
        for epoch in ("0", "1"):
            shards = [flat(r["train"][epoch]) for r in runs]
            for shard in shards:  # every rank: a whole epoch (or exactly `limit` batches), no repeat
                assert len(shard) == len(set(shard)) == (limit * BATCH if limit else per_rank), (name, epoch)
            together = flat(shards)
            assert len(set(together)) == len(together), f"{name}: ranks overlap in epoch {epoch}"
            assert set(together) <= set(TRAIN)
        for r in runs:
            assert r["train"]["0"] != r["train"]["1"], f"{name}: epoch 1 repeats epoch 0"
        # Every validation run, the test and the prediction: each val sample once over all ranks.
        for passes in zip(*(r["val"] for r in runs)):
            assert sorted(flat(flat(passes))) == VAL, name
        for stage in ("test", "predict"):
            assert sorted(flat(flat(r[stage] for r in runs))) == VAL, (name, stage)
        sanity = [flat(run) for r in runs for run in r["sanity"]]
        steps = LIGHTNING_JOBS[name]["trainer"]["num_sanity_val_steps"]
        assert len(sanity) == (world_size if steps else 0)
        for r in runs:
            if steps:
                assert len(r["sanity"][0]) == steps
        if "resume_from" in LIGHTNING_JOBS[name]:
            for r in runs:
                original, resumed = r["train"], r["resumed"]["train"]
                assert len(original["0"]) == batches_per_epoch
                # The epoch interrupted after CHECKPOINT_STEP batches goes on with the batches still to come.
                assert resumed["0"] == original["0"][CHECKPOINT_STEP:]
                assert resumed["1"] == original["1"]


def test_lightning_one_process(cifar_root, tmp_path, no_torchrun_env):
    pytest.importorskip("pytorch_lightning")
    sys.path.insert(0, HERE)
    import lightning_worker

    jobs_path = tmp_path / "jobs.json"
    jobs_path.write_text(json.dumps(lightning_jobs(cifar_root)))
    lightning_worker.main(str(jobs_path), str(tmp_path))
    check_lightning([json.load(open(tmp_path / "rank0.json"))], 1)


@pytest.mark.slow
@pytest.mark.subprocess
def test_lightning_ddp_two_processes(cifar_root, tmp_path, no_torchrun_env):
    pytest.importorskip("pytorch_lightning")
    jobs_path = tmp_path / "jobs.json"
    jobs_path.write_text(json.dumps(lightning_jobs(cifar_root, devices=2, strategy="ddp")))
    env = subprocess_env()
    done = subprocess.run([sys.executable, os.path.join(HERE, "lightning_worker.py"), str(jobs_path), str(tmp_path)],
                          env=env, capture_output=True, text=True, timeout=LAUNCH_TIMEOUT)
    assert done.returncode == 0, done.stderr[-5000:]
    check_lightning([json.load(open(tmp_path / f"rank{r}.json")) for r in range(2)], 2)


def test_datamodule_takes_the_factory_arguments(cifar_root, tmp_path):
    pytest.importorskip("pytorch_lightning")
    from dali_loaders.lightning import (
        CIFAR10DataModule,
        CIFAR100DataModule,
        ImageFolderDataModule,
    )

    module = CIFAR10DataModule(cifar_root, BATCH, num_threads=1, seed=5, drop_last=True)
    train = module.train_dataloader()
    assert train is module.train_dataloader(), "built once, kept"
    assert (train.drop_last, train.sampler.seed, len(train)) == (True, 5, N_TRAIN // BATCH)
    assert isinstance(CIFAR10DataModule(cifar_root, BATCH, use_dali=False, num_threads=0).val_dataloader(),
                      DataLoader)
    with pytest.raises(ValueError, match="use_dali"):
        CIFAR10DataModule(cifar_root, BATCH, use_dali="yes")
    with pytest.raises(ValueError, match="dataset"):
        CIFAR100DataModule(cifar_root, BATCH, dataset="cifar10")
    with pytest.raises(TypeError, match="no_such_argument"):
        CIFAR10DataModule(cifar_root, BATCH, no_such_argument=1).train_dataloader()
    with pytest.raises(ValueError, match="val_root"):
        ImageFolderDataModule(str(tmp_path), BATCH).val_dataloader()


def test_every_standard_dataset_has_a_datamodule_that_reads_each_split_once(tmp_path):
    """MNIST and Flowers-102 stand for the standard datasets: each split's loader is the
    factory's, with both backends, and Flowers-102's test stage reads its test split."""
    pytest.importorskip("pytorch_lightning")
    from dataset_data import write_flowers, write_mnist

    import dali_loaders
    from dali_loaders import lightning

    for name in dali_loaders.STANDARD_DATASETS:   # one class per dataset, on its own factories
        module = next(m for m in vars(lightning).values() if getattr(m, "factories", None) ==
                      (getattr(dali_loaders, f"get_{name}_iter_dali"), getattr(dali_loaders, f"get_{name}_iter_torch")))
        assert module.__name__ in lightning.__all__
    write_mnist(str(tmp_path), n_train=24, n_test=12)
    for use_dali in (True, False):
        module = lightning.MNISTDataModule(str(tmp_path), 5, use_dali=use_dali, num_threads=1 if use_dali else 0)
        assert sum(len(y) for _, y in module.val_dataloader()) == 12
        assert sum(len(y) for _, y in module.train_dataloader()) == 24
    flowers = str(tmp_path / "flowers")
    write_flowers(flowers)
    module = lightning.Flowers102DataModule(flowers, 4, num_threads=1)
    val, test = module.val_dataloader(), module.test_dataloader()
    assert len(val.dataset) + len(test.dataset) + len(module.train_dataloader().dataset) == 30
    assert len(val.dataset) != len(test.dataset) or val.dataset.fingerprint != test.dataset.fingerprint


def test_datamodule_runs_the_dali_loader_where_the_trainer_keeps_the_model(cifar_root):
    """Trainer(accelerator="cpu") keeps the DALI loader on the CPU (DALI would take a GPU where
    there is one), a GPU Trainer puts it on the Trainer's GPU; a device named by the keywords,
    and the twin, are left as they are."""
    pl = pytest.importorskip("pytorch_lightning")
    from types import SimpleNamespace

    from dali_loaders.lightning import CIFAR10DataModule
    from dali_loaders.loader.options import torch_device

    calls = []

    def recorded(factory):
        return lambda *args, **kwargs: calls.append(kwargs) or factory(*args, **kwargs)

    class Recorded(CIFAR10DataModule):
        factories = (recorded(get_cifar_iter_dali), recorded(get_cifar_iter_torch))

    trainer = pl.Trainer(accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False)
    on_gpu_one = SimpleNamespace(strategy=SimpleNamespace(root_device=torch.device("cuda", 1)))
    on_mps = SimpleNamespace(strategy=SimpleNamespace(root_device=torch.device("mps")))
    # (keywords, trainer, (variant, GPU) the factory is asked for: None, None is its own default)
    cases = [(dict(), trainer, ("cpu", None)), (dict(), on_gpu_one, ("gpu", 1)), (dict(), None, (None, None)),
             (dict(), on_mps, (None, None)), (dict(device="cpu-decode"), trainer, (None, None)),
             (dict(dali_cpu=True), on_gpu_one, (None, None)), (dict(use_dali=False), trainer, (None, None))]
    for keywords, attached, expected in cases:
        module = Recorded(cifar_root, BATCH, num_threads=1, **keywords)
        module.trainer = attached
        placed = module.placement()
        assert torch_device(placed.get("device"), placed.get("device_id")) == expected, (keywords, attached)
    module = Recorded(cifar_root, BATCH, num_threads=1)
    module.trainer = trainer
    images, _ = next(iter(module.val_dataloader()))
    assert torch_device(calls[-1]["device"], None) == ("cpu", None) and images.device.type == "cpu"


@pytest.mark.subprocess
def test_import_needs_no_lightning():
    code = ("import sys; sys.modules['pytorch_lightning'] = sys.modules['lightning'] = None; "
            "import dali_loaders; print('ok')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "ok", done.stderr


# -- Accelerate -------------------------------------------------------------------------------------


def test_accelerate_prepare_runs_the_loop_unchanged(cifar_root, no_torchrun_env):
    accelerate = pytest.importorskip("accelerate")
    accelerator = accelerate.Accelerator(cpu=True)
    for make in (get_cifar_iter_dali, get_cifar_iter_torch):
        loader = make("train", cifar_root, BATCH, num_threads=1 if make is get_cifar_iter_dali else 0, seed=2)
        model = torch.nn.Linear(3 * 32 * 32, 10)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        model, optimizer, prepared = accelerator.prepare(model, optimizer, loader)
        assert prepared is loader, f"{make.__name__}: handed back, as it shards itself"
        epochs = []
        for epoch in range(2):
            prepared.set_epoch(epoch)
            seen = []
            for images, labels in prepared:
                loss = torch.nn.functional.cross_entropy(model(images.flatten(1)), labels)
                accelerator.backward(loss)
                optimizer.step()
                optimizer.zero_grad()
                seen.append(indices(images))
            assert sorted(flat(seen)) == TRAIN, make.__name__
            epochs.append(seen)
        assert epochs[0] != epochs[1]


def test_accelerate_keeps_the_twins_batch_transform_and_dict_batches(cifar_root, no_torchrun_env):
    """What the twin does per batch (MixUp / CutMix, output="dict") is in its batches after
    prepare(), and on the Accelerator's device: a DataLoader rebuilt from it had lost both."""
    accelerate = pytest.importorskip("accelerate")
    from torchvision.transforms import v2

    accelerator = accelerate.Accelerator(cpu=True)
    mixing = get_cifar_iter_torch("train", cifar_root, BATCH, num_threads=0, seed=2,
                                  batch_transform=v2.MixUp(num_classes=10))
    images, labels = next(iter(accelerator.prepare(mixing)))
    assert labels.shape == (BATCH, 10) and labels.dtype == torch.float32, "MixUp's soft labels"
    assert images.device == accelerator.device
    assert torch.allclose(labels.sum(1), torch.ones(BATCH)) and (labels.max(1).values < 1).any()
    dicts = get_cifar_iter_torch("val", cifar_root, BATCH, num_threads=0, output="dict")
    batch = next(iter(accelerator.prepare(dicts)))
    assert isinstance(batch, list) and set(batch[0]) == {"data", "label"} and batch[0]["label"].shape == (BATCH, 1)
    assert indices(batch[0]["data"]) == VAL[:BATCH]


def test_twin_batches_go_to_the_accelerators_device_and_stay_put_without_one(cifar_root, monkeypatch,
                                                                            no_torchrun_env):
    pytest.importorskip("accelerate")
    from collections import namedtuple

    from dali_loaders.loader.python_path import placed

    pair = namedtuple("Pair", "images labels")
    batch = [{"data": torch.zeros(2, 3), "label": torch.ones(2, dtype=torch.long)},
             pair(torch.zeros(1), [torch.zeros(1), 7])]
    meta = placed(batch, torch.device("meta"), False)   # what the twin moves its batches with
    assert meta[0]["data"].is_meta and meta[0]["label"].is_meta and meta[0]["label"].dtype == torch.long
    assert isinstance(meta[1], pair) and meta[1].images.is_meta and meta[1].labels[0].is_meta
    assert meta[1].labels[1] == 7 and not batch[0]["data"].is_meta
    # The twin itself, its Accelerator's device stood in by "meta": tuple and dict batches moved.
    torch_loader = importlib.import_module("dali_loaders.loader.torch_loader")   # the module, not the shortcut
    monkeypatch.setattr(torch_loader, "accelerate_device", lambda: torch.device("meta"))
    for output in ("tuple", "dict"):
        twin = get_cifar_iter_torch("val", cifar_root, BATCH, num_threads=0, output=output)
        first = next(iter(twin))
        tensors = [*first[0].values()] if output == "dict" else first
        assert all(t.is_meta for t in tensors), output
    monkeypatch.undo()
    # In a fresh process: none before an Accelerator is made, its device after.
    code = ("import accelerate; from dali_loaders.loader.options import accelerate_device as d; "
            "before = d(); a = accelerate.Accelerator(cpu=True); print(before, d() == a.device)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=subprocess_env(),
                          timeout=120)
    assert done.stdout.split() == ["None", "True"], done.stderr[-2000:]


def test_an_accelerator_on_the_cpu_keeps_the_dali_loader_there(monkeypatch):
    """Accelerator(cpu=True) on a machine with a GPU: the DALI loader's default device is the
    CPU, where the model is (its batches would be on the GPU otherwise, as Accelerate does not
    move them); a GPU Accelerator, none, or a device the user names leave it as it was."""
    pytest.importorskip("accelerate")
    options = importlib.import_module("dali_loaders.loader.options")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    for framework, device, expected in [(torch.device("cpu"), None, "cpu"), (torch.device("cuda", 0), None, "gpu"),
                                        (None, None, "gpu"), (torch.device("cpu"), "gpu", "gpu"),
                                        (torch.device("cpu"), "cpu-decode", "cpu-decode")]:
        monkeypatch.setattr(options, "accelerate_device", lambda: framework)
        assert options.resolve_device(device, None) == expected, (framework, device)
    monkeypatch.undo()
    # With a real Accelerator, in a fresh process that pretends to have CUDA.
    code = ("import torch; torch.cuda.is_available = lambda: True; import accelerate; "
            "from dali_loaders.loader.options import resolve_device as r; "
            "before = r(None, None); accelerate.Accelerator(cpu=True); print(before, r(None, None))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=subprocess_env(),
                          timeout=120)
    assert done.stdout.split() == ["gpu", "cpu"], done.stderr[-2000:]


def test_skip_first_batches_reads_the_epochs_rest_or_names_the_way_to_resume(cifar_root, no_torchrun_env,
                                                                            monkeypatch):
    """accelerator.skip_first_batches rebuilds a DataLoader over loader.dataset. Over a torchvision
    dataset it reads, for the epoch set_epoch names, exactly the DALI loader's samples after the
    skipped batches; over a factory's source, which DALI reads only in batches, it fails naming
    what resumes instead (it failed on "not subscriptable")."""
    accelerate = pytest.importorskip("accelerate")
    import torchvision.datasets as tvd
    from torchvision.transforms import v2

    from dali_loaders import DaliLoader

    monkeypatch.setattr(tvd.cifar, "check_integrity", lambda *args, **kwargs: True)   # files this test wrote
    accelerator = accelerate.Accelerator(cpu=True)
    recipe = v2.Compose([v2.PILToTensor(), v2.ToDtype(torch.float32), v2.Normalize(MEAN.tolist(), STD.tolist())])
    loader = accelerator.prepare(DaliLoader(tvd.CIFAR10(cifar_root, train=True, transform=recipe), BATCH,
                                            shuffle=True, num_workers=1, seed=5))
    assert loader.route == "dali"
    for epoch in (0, 3):
        loader.set_epoch(epoch)
        whole = [indices(images) for images, _ in loader]
        loader.set_epoch(epoch)
        rest = [indices(images) for images, _ in accelerator.skip_first_batches(loader, CHECKPOINT_STEP)]
        assert rest == whole[CHECKPOINT_STEP:], epoch
    factory_made = accelerator.prepare(get_cifar_iter_dali("train", cifar_root, BATCH, num_threads=1))
    with pytest.raises(TypeError, match="ArraySource is read by the DALI loader.*register_for_checkpointing"):
        next(iter(accelerator.skip_first_batches(factory_made, CHECKPOINT_STEP)))


def test_accelerate_save_state_resumes_a_registered_dali_loader_mid_epoch(cifar_root, no_torchrun_env, tmp_path):
    """accelerator.register_for_checkpointing(loader): save_state in the middle of an epoch,
    load_state into a fresh loader, and the rest of the epoch is the batches still to come."""
    accelerate = pytest.importorskip("accelerate")

    def make():
        return get_cifar_iter_dali("train", cifar_root, BATCH, num_threads=1, seed=3)

    whole = [indices(images) for images, _ in make()]
    accelerator = accelerate.Accelerator(cpu=True)
    loader = accelerator.prepare(make())
    accelerator.register_for_checkpointing(loader)
    batches = iter(loader)
    done = [indices(next(batches)[0]) for _ in range(CHECKPOINT_STEP)]
    accelerator.save_state(str(tmp_path / "state"))
    again = accelerate.Accelerator(cpu=True)   # as a restarted script makes it
    fresh = again.prepare(make())
    again.register_for_checkpointing(fresh)
    again.load_state(str(tmp_path / "state"))
    rest = [indices(images) for images, _ in fresh]
    assert done + rest == whole and len(rest) == len(whole) - CHECKPOINT_STEP
