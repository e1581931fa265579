"""One pipeline for a loader's life (issue 18): reused across epochs with every sample once,
break and resume; no hang when a process that used it forks; even batches on every rank;
a 30-epoch soak with a SIGKILL and a resume. Images encode their own index (cifar_data)."""
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter

import pytest
import torch
from cifar_data import index_images, write_cifar
from dist_worker import decode_indices, recipe_mean_std
from subprocess_env import subprocess_env

from dali_loaders import get_cifar_iter_dali

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "life_worker.py")
CODE = {"base": 256, "step": 1, "offset": 0}
TIMEOUT = 240  # a hang must fail the test, not the session


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("cifar"))
    write_cifar(path, n_train=96, n_test=100, images=index_images)
    return write_cifar(path, dataset="cifar100", n_train=96, n_test=10)   # label == index


def env():
    return subprocess_env()


def indices(images):
    return decode_indices(images, *recipe_mean_std("cifar", {}), CODE)


def test_one_pipeline_every_epoch_each_sample_once_break_and_resume(root, no_torchrun_env):
    loader = get_cifar_iter_dali("train", root, 16, num_threads=2, seed=5)
    reference = get_cifar_iter_dali("train", root, 16, num_threads=1, seed=5)
    expected = [[indices(x) for x, _ in reference] for _ in range(3)]
    first = [indices(x) for x, _ in loader]
    pipeline = loader.pipeline
    assert pipeline is not None and first == expected[0]
    for k, (images, _) in enumerate(loader):   # epoch 1, left after 2 batches
        if k == 1:
            break
    state = loader.state_dict()
    assert (state["epoch"], state["batches_done"]) == (1, 2)
    assert [indices(x) for x, _ in loader] == expected[2]   # a new loop: the next epoch, whole
    assert loader.pipeline is pipeline                      # ... on the same pipeline
    assert sorted(sum(expected[2], [])) == sorted(set(sum(expected[2], []))) and len(sum(expected[2], [])) == 96
    loader.load_state_dict(state)                           # the rest of epoch 1, then epoch 2
    assert [indices(x) for x, _ in loader] == expected[1][2:]
    assert [indices(x) for x, _ in loader] == expected[2]
    assert loader.pipeline is pipeline
    loader.close()
    assert loader.pipeline is None
    loader.set_epoch(0)   # a loop after close() builds a new pipeline, same epoch as before
    assert [indices(x) for x, _ in loader] == expected[0] and loader.pipeline is not pipeline


def test_augmentations_are_the_epochs_own_on_a_reused_pipeline(root, no_torchrun_env):
    from torchvision.transforms import v2
    recipe = v2.Compose([v2.RandomResizedCrop(32), v2.RandomHorizontalFlip(), v2.ToImage(),
                         v2.ToDtype(torch.float32, scale=True)])
    run = get_cifar_iter_dali("train", root, 16, num_threads=2, seed=9, transform=recipe)
    epochs = [torch.cat([x for x, _ in run]) for _ in range(3)]
    assert not torch.equal(epochs[1], epochs[2])
    fresh = get_cifar_iter_dali("train", root, 16, num_threads=1, seed=9, transform=recipe)
    fresh.set_epoch(2)
    assert torch.equal(torch.cat([x for x, _ in fresh]), epochs[2])


def test_a_state_from_another_graph_is_refused_by_name_and_the_loader_then_resumes_its_own(root, no_torchrun_env):
    """A state whose DALI checkpoint another transform's graph wrote (the same dataset, batch
    and seed, so every other check passes) is named as such, not left to DALI's internals."""
    from torchvision.transforms import v2

    from dali_loaders import recipes

    augmented = v2.Compose([v2.RandomCrop(32, padding=4), v2.RandomHorizontalFlip(),
                            v2.AutoAugment(v2.AutoAugmentPolicy.CIFAR10)] +
                           recipes.to_float(recipes.CIFAR_MEAN["cifar100"], recipes.CIFAR_STD["cifar100"]))
    other = get_cifar_iter_dali("train", root, 16, num_threads=2, seed=5, transform=augmented)
    for k, _ in enumerate(other):
        if k == 1:
            break
    foreign = other.state_dict()
    loader = get_cifar_iter_dali("train", root, 16, num_threads=2, seed=5)
    for k, _ in enumerate(loader):
        if k == 1:
            break
    own = loader.state_dict()
    expected = [indices(x) for x, _ in get_cifar_iter_dali("train", root, 16, num_threads=1, seed=5)][2:]
    loader.load_state_dict(foreign)
    with pytest.raises(ValueError, match="its DALI checkpoint is of another graph than this loader's"):
        next(iter(loader))   # its pipeline built already
    fresh = get_cifar_iter_dali("train", root, 16, num_threads=2, seed=5)
    fresh.load_state_dict(foreign)
    with pytest.raises(ValueError, match="its DALI checkpoint is of another graph than this loader's"):
        next(iter(fresh))    # its pipeline built with the state
    resumed = get_cifar_iter_dali("train", root, 16, num_threads=2, seed=5)
    resumed.load_state_dict(own)
    assert [indices(x) for x, _ in resumed] == expected


@pytest.mark.subprocess
def test_forked_workers_collecting_a_cycled_loader_do_not_hang(root, no_torchrun_env):
    # Without the after-fork hook this hangs in the workers (life_worker.py fork --no-hook).
    done = subprocess.run([sys.executable, WORKER, "fork", root], env=env(), capture_output=True,
                          text=True, timeout=TIMEOUT)
    assert done.returncode == 0 and "served 8" in done.stdout, done.stderr[-2000:]


@pytest.mark.subprocess
def test_even_batches_let_a_per_batch_all_reduce_finish_on_three_ranks(root, tmp_path, no_torchrun_env):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=3", "--master_addr=127.0.0.1",
               f"--master_port={port}", WORKER, "allreduce", root, str(tmp_path)]
    subprocess.run(command, env=subprocess_env(tmp=tmp_path), check=True, timeout=TIMEOUT, capture_output=True)
    ranks = [json.load(open(tmp_path / f"rank{r}.json")) for r in range(3)]
    assert [r["steps"] for r in ranks] == [2, 2, 2]   # 100 samples, 3 ranks, batch 33: 34 each
    kept = Counter(i for r in ranks for i in r["kept"])
    assert sorted(kept) == list(range(96, 196)) and set(kept.values()) == {1}   # padding flagged


def test_even_batches_pads_only_validation_and_flags_the_padding(root, no_torchrun_env):
    loaders = [get_cifar_iter_dali("val", root, 33, num_threads=1, rank=r, world_size=3, even_batches=True)
               for r in range(3)]
    assert [len(x) for x in loaders] == [2, 2, 2]
    last = []
    for loader in loaders:
        batches = [indices(x) for x, _ in loader]
        last.append(loader.padded.tolist())
        assert sum(len(b) for b in batches) == 34
    assert last == [[False], [True], [True]]   # 34, 33, 33 own samples
    unpadded = get_cifar_iter_dali("val", root, 33, num_threads=1, rank=1, world_size=3)
    assert len(unpadded) == 1


@pytest.mark.subprocess
def test_soak_thirty_epochs_flat_memory_and_a_sigkill_resumed_exactly(root, tmp_path, no_torchrun_env):
    out, epochs = str(tmp_path / "soak.pt"), 30
    soak = subprocess.run([sys.executable, WORKER, "soak", root, out, str(epochs)], env=env(),
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert soak.returncode == 0, soak.stderr[-2000:]
    run = torch.load(out, weights_only=False)
    usage = run["usage"]
    rss = [u[0] / 2 ** 20 for u in usage]
    threads = [u[1] for u in usage]
    print(f"soak: RSS MiB after epochs 2..{epochs}: {min(rss[2:]):.1f}..{max(rss[2:]):.1f}; "
          f"threads {min(threads[2:])}..{max(threads[2:])}")
    assert max(threads[2:]) == min(threads[2:])
    assert max(rss[2:]) - rss[2] < 16, rss   # flat: no growth per epoch past the warm-up
    for epoch in range(epochs):
        assert sorted(run["seen"][epoch]) == list(range(96)), epoch
    # Killed mid-epoch, then resumed from its last state: every sample of that epoch once.
    partial = str(tmp_path / "killed.pt")
    victim = subprocess.Popen([sys.executable, WORKER, "soak", root, partial, "3"],
                              env=dict(env(), SOAK_STEP_SECONDS="0.2"))
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        if os.path.exists(partial) and len(torch.load(partial, weights_only=False)["seen"].get(1, [])) >= 32:
            break
        time.sleep(0.05)
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=30)
    state = torch.load(partial, weights_only=False)
    assert state["state"]["epoch"] == 1 and 0 < state["state"]["batches_done"] < 6
    resumed = str(tmp_path / "resumed.pt")
    subprocess.run([sys.executable, WORKER, "soak", root, resumed, "3", partial], env=env(), check=True,
                   timeout=TIMEOUT)
    seen = torch.load(resumed, weights_only=False)["seen"]
    for epoch in range(3):
        assert sorted(seen[epoch]) == list(range(96)), epoch
        assert seen[epoch] == run["seen"][epoch]    # and in the uninterrupted run's order


@pytest.mark.slow
@pytest.mark.subprocess
def test_lightning_dali_then_ddp_then_forked_workers_in_one_process(root, tmp_path, no_torchrun_env):
    """The issue's sequence: fit with the DALI DataModule, then under ddp, then with
    use_dali=False, whose DataLoader forks workers after the DALI pipelines existed."""
    pytest.importorskip("pytorch_lightning")
    base = dict(root=root, batch_size=16, loaders="module", seed=1,
                trainer=dict(max_epochs=2, num_sanity_val_steps=0))
    jobs = {"dali": dict(base, use_dali=True, num_threads=2),
            "dali_ddp": dict(base, use_dali=True, num_threads=2, strategy="ddp", devices=1),
            "torch_workers": dict(base, use_dali=False, num_threads=2)}
    jobs_path = tmp_path / "jobs.json"
    jobs_path.write_text(json.dumps(jobs))
    done = subprocess.run([sys.executable, os.path.join(HERE, "lightning_worker.py"), str(jobs_path), str(tmp_path)],
                          env=env(), capture_output=True, text=True, timeout=TIMEOUT * 2)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.load(open(tmp_path / "rank0.json"))
    for name in jobs:
        for epoch in ("0", "1"):
            assert sorted(sum(report[name]["train"][epoch], [])) == list(range(96)), (name, epoch)
        assert len(report[name]["val"]) == 2
        for run in report[name]["val"]:
            assert sorted(sum(run, [])) == list(range(96, 196)), name


@pytest.fixture
def builds(monkeypatch):
    """Every DALI pipeline built from here on, as whether it runs DALI's default (dynamic)
    executor: each built from a graph (pipeline_def, Pipeline.build), and each deserialized
    (Pipeline.deserialize, which without executor flags runs the legacy one)."""
    from nvidia.dali.pipeline import Pipeline

    made, backend, deserialize = [], Pipeline._init_pipeline_backend, Pipeline.deserialize.__func__

    def counted_backend(pipe):
        made.append(pipe.exec_dynamic)
        return backend(pipe)

    def counted_deserialize(cls, *args, **kwargs):
        made.append(kwargs.get("exec_dynamic") is True)
        return deserialize(cls, *args, **kwargs)

    monkeypatch.setattr(Pipeline, "_init_pipeline_backend", counted_backend)
    monkeypatch.setattr(Pipeline, "deserialize", classmethod(counted_deserialize))
    return made


def folder_loader(folder, seed=4):
    from torchvision.datasets import ImageFolder
    from torchvision.transforms import v2

    from dali_loaders import DaliLoader

    recipe = v2.Compose([v2.RandomResizedCrop(24), v2.RandomHorizontalFlip(), v2.ColorJitter(0.3, 0.3),
                         v2.ToImage(), v2.ToDtype(torch.float32, scale=True)])
    return DaliLoader(ImageFolder(folder, transform=recipe), batch_size=5, shuffle=True, num_workers=1,
                      seed=seed, device="cpu")


@pytest.mark.parametrize("kind", ["cifar", "folder"])
def test_three_epochs_build_one_pipeline_and_a_resumed_loader_at_most_two(kind, root, builds, tmp_path,
                                                                          no_torchrun_env):
    from image_data import write_image_folder

    if kind == "cifar":
        make = lambda: get_cifar_iter_dali("train", root, 16, num_threads=1, seed=5)   # noqa: E731
    else:
        folder = str(tmp_path / "folder")
        write_image_folder(folder, {"a": 7, "b": 6})
        make = lambda: folder_loader(folder)   # noqa: E731
    loader = make()
    epochs = [torch.cat([x for x, _ in loader]) for _ in range(3)]
    assert len(builds) == 1, builds                        # none after the first epoch
    assert not torch.equal(epochs[1], epochs[2])           # new augmentations every epoch all the same
    batches = iter(loader)                                 # epoch 3: its first batch, then a state
    next(batches)
    state = loader.state_dict()
    rest = [x for x, _ in batches]
    following = [x for x, _ in loader]                     # epoch 4
    assert len(builds) == 1
    resumed = make()
    resumed.load_state_dict(state)
    assert same(rest, [x for x, _ in resumed]) and same(following, [x for x, _ in resumed])
    assert len(builds) <= 1 + 2, builds
    fresh = make()                                         # an epoch is the (seed, epoch, rank)'s own
    fresh.set_epoch(4)
    assert same(following, [x for x, _ in fresh])
    assert all(builds), builds                              # DALI's default executor, every one


def same(batches, others):
    return len(batches) == len(others) and all(torch.equal(a, b) for a, b in zip(batches, others))


def solid_loader(folder, **kwargs):
    """A val-like loader (no random step: its graph has no random state) over solid images."""
    from torchvision.datasets import ImageFolder
    from torchvision.transforms import v2

    from dali_loaders import DaliLoader

    recipe = v2.Compose([v2.Resize(12), v2.CenterCrop(12), v2.ToImage(), v2.ToDtype(torch.float32, scale=True)])
    return DaliLoader(ImageFolder(folder, transform=recipe), batch_size=4, num_workers=1, seed=6, device="cpu",
                      **kwargs)


def solid_ids(images):
    from image_data import image_id

    return [image_id((image.mean(dim=(1, 2)) * 255).tolist()) for image in images]


def test_a_graph_without_random_state_runs_into_the_next_epoch_and_serves_each_sample_once(tmp_path, builds,
                                                                                              monkeypatch,
                                                                                              no_torchrun_env):
    """Its runs past an epoch's end are the next epoch's first batches: the pipeline never
    idles between epochs, and every epoch is still exactly its own (each image once, in the
    epoch's order), whatever comes between: set_epoch, a break, a state loaded."""
    from image_data import write_solid_folder

    from dali_loaders.loader import pipeline

    folder = str(tmp_path / "solid")
    write_solid_folder(folder, {"a": 9, "b": 8})        # 17 images: batches of 4 and a last one of 1
    monkeypatch.setattr(pipeline, "RUN_AHEAD", False)   # the reference: each epoch from a loader of its own

    def order(epoch):
        alone = solid_loader(folder, shuffle=True)
        alone.set_epoch(epoch)
        ids = [i for x, _ in alone for i in solid_ids(x)]
        assert sorted(ids) == list(range(17))
        return ids

    expected = {epoch: order(epoch) for epoch in (0, 1, 2, 7, 8, 9)}
    assert expected[0] != expected[1]
    monkeypatch.setattr(pipeline, "RUN_AHEAD", True)
    builds.clear()
    loader = solid_loader(folder, shuffle=True)
    epochs = [[i for x, _ in loader for i in solid_ids(x)] for _ in range(3)]
    assert epochs == [expected[0], expected[1], expected[2]]
    assert loader._parts.feed.base == 2 * 5              # epochs 1 and 2 carried on: no restart between
    assert len(builds) == 1
    loader.set_epoch(7)                                  # not the epoch it ran into: those runs dropped
    assert [i for x, _ in loader for i in solid_ids(x)] == expected[7]
    assert loader._parts.feed.base == 0
    batches = iter(loader)                               # epoch 8 (carried on from 7), left after 2 batches
    taken = [solid_ids(next(batches)[0]) for _ in range(2)]
    state = loader.state_dict()
    assert loader._parts.feed.base == 5 and state["dali"] is None   # the rest of a stateless epoch: read afresh
    del batches
    assert [i for x, _ in loader for i in solid_ids(x)] == expected[9]   # a new loop after a break
    resumed = solid_loader(folder, shuffle=True)
    resumed.load_state_dict(state)
    assert sum(taken, []) + [i for x, _ in resumed for i in solid_ids(x)] == expected[8]
    assert [i for x, _ in resumed for i in solid_ids(x)] == expected[9]


def test_a_graph_with_random_state_never_runs_ahead(tmp_path, no_torchrun_env):
    from image_data import write_image_folder

    folder = str(tmp_path / "folder")
    write_image_folder(folder, {"a": 7, "b": 6})
    loader = folder_loader(folder)
    for _ in range(2):
        for _ in loader:
            pass
    assert not loader._parts.pipeline.stateless and loader._parts.feed.base == 0


def test_an_epoch_order_carried_on_maps_the_sources_iterations_to_each_epochs_batches():
    import numpy as np

    from dali_loaders.loader.pipeline import EpochOrder

    feed = EpochOrder()
    feed.set(EpochOrder(np.arange(5), 1, np.array([0, 2, 4, 5])))                 # 3 batches: [0 1] [2 3] [4]
    feed.following = EpochOrder(np.arange(10, 14), 2, np.array([0, 2, 4]))        # then 2: [10 11] [12 13]
    assert [feed.batch(i, 2).tolist() for i in range(5)] == [[0, 1], [2, 3], [4], [10, 11], [12, 13]]
    assert [feed.holds(i, 2) for i in range(6)] == [True] * 5 + [False]
    feed.carry_on()                                                                # the sources go on at 3
    assert (feed.base, feed.seed, feed.following) == (3, 2, None)
    assert [feed.batch(i, 2).tolist() for i in (3, 4)] == [[10, 11], [12, 13]]
    assert [feed.holds(i, 2) for i in (2, 3, 4, 5)] == [False, True, True, False]
    assert len(feed.batch(5, 2)) == 2                                              # past the end: any full batch


def test_an_epoch_order_reads_ahead_into_the_epoch_expected_next_asking_once():
    import numpy as np

    from dali_loaders.loader.pipeline import EpochOrder

    feed = EpochOrder()
    feed.set(EpochOrder(np.arange(5), 1, np.array([0, 2, 4, 5])))                 # [0 1] [2 3] [4]
    asked = []
    expected = EpochOrder(np.arange(20, 25), 2, np.array([0, 2, 4, 5]))           # [20 21] [22 23] [24]
    feed.upcoming = lambda: asked.append(1) or expected
    ahead = [feed.read_ahead(i, 2) for i in range(7)]
    assert [None if a is None else a.tolist() for a in ahead] == [[0, 1], [2, 3], [4], [20, 21], [22, 23], [24],
                                                                  None]
    assert asked == [1]                       # the loader's plan for the next epoch, made once
    feed.set(EpochOrder(np.arange(5), 3, np.array([0, 2, 4, 5])))                 # the next epoch starts afresh
    assert feed.read_ahead(3, 2) is None      # nothing expected of the epoch after it yet
    feed.upcoming = lambda: None              # a user's sampler: unknown until it starts
    assert feed.read_ahead(3, 2) is None and feed.read_ahead(1, 2).tolist() == [2, 3]
    feed.following = EpochOrder(np.arange(10, 12), 4, np.array([0, 2]))           # runs carried on: its own
    assert feed.read_ahead(3, 2).tolist() == [10, 11] and feed.read_ahead(4, 2) is None
