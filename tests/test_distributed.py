"""Sharding across processes, exact-once evaluation and mid-epoch resume (issue 4).

The multi-process tests launch tests/dist_worker.py with torchrun (CPU, gloo) and check
what each rank wrote: which samples (decoded from the pixels: every image encodes its own
index), in which batches, with which labels. Over a CIFAR-format set and an image folder.
"""
import json
import os
import pickle
import signal
import socket
import subprocess
import sys
from collections import Counter

import pytest
import torch
from cifar_data import index_images, write_cifar
from dist_worker import labelled_indices, make_loader
from PIL import Image
from subprocess_env import subprocess_env

from dali_loaders.datasets.cifar import get_cifar_iter_dali
from dali_loaders.distributed import (
    EpochSampler,
    Shard,
    resolve_shard,
    shard_indices,
)

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "dist_worker.py")
TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]  # torchrun, wherever its script is
N_TRAIN, N_VAL, CLASSES = 500, 100, 10  # 3 divides neither
EPOCHS = 3
LAUNCH_TIMEOUT = 300  # seconds; a hung rendezvous must fail the test, not the session

# How an image's pixels spell its index (dist_worker.decode_indices).
CIFAR_CODE = {"base": 256, "step": 1, "offset": 0}     # cifar_data.index_images
FOLDER_CODE = {"base": 8, "step": 32, "offset": 16}    # write_index_folder: 512 flat colours
FOLDER_SIZES = [(40, 36), (36, 44), (48, 48), (33, 41), (64, 40)]  # (width, height)


def write_index_folder(root, count):
    """root/class_<c>/<i>.png: image i (ImageFolder's order) one flat colour spelling i, in
    class i // (count / CLASSES); lossless, so any crop, flip or resize still says i."""
    per_class = count // CLASSES
    for i in range(count):
        digits = [(i // FOLDER_CODE["base"] ** k) % FOLDER_CODE["base"] for k in (2, 1, 0)]
        colour = tuple(FOLDER_CODE["offset"] + FOLDER_CODE["step"] * d for d in digits)
        folder = os.path.join(root, f"class_{i // per_class}")
        os.makedirs(folder, exist_ok=True)
        Image.new("RGB", FOLDER_SIZES[i % len(FOLDER_SIZES)], colour).save(os.path.join(folder, f"{i:04d}.png"))
    return root


@pytest.fixture(scope="module")
def cifar_root(written_once):
    return written_once(write_cifar, n_train=N_TRAIN, n_test=N_VAL, images=index_images)


@pytest.fixture(scope="module")
def folder_roots(tmp_path_factory):
    root = tmp_path_factory.mktemp("folder")
    return {split: write_index_folder(str(root / split), n) for split, n in (("train", N_TRAIN), ("val", N_VAL))}


def cifar_spec(root, type, batch_size, epochs, **extra):
    """A loader for dist_worker, and what it must yield: indices first..first+count-1
    (index_images numbers val after train), labels index % CLASSES."""
    first, count = (0, N_TRAIN) if type == "train" else (N_TRAIN, N_VAL)
    return {"kind": "cifar", "epochs": epochs, "code": CIFAR_CODE,
            "kwargs": dict(type=type, image_dir=root, batch_size=batch_size, num_threads=1, **extra),
            "expect": {"train": type == "train", "first": first, "count": count, "label_mod": CLASSES}}


def folder_spec(roots, type, batch_size, epochs, **extra):
    count = N_TRAIN if type == "train" else N_VAL
    return {"kind": "imagefolder", "epochs": epochs, "code": FOLDER_CODE,
            "kwargs": dict(root=roots[type], batch_size=batch_size, train=type == "train", num_threads=1,
                           crop=32, val_size=36, **extra),
            "expect": {"train": type == "train", "first": 0, "count": count, "label_div": count // CLASSES}}


def twin_of(spec):
    """The spec with the torchvision twin (get_*_iter_torch, its batches read in the process) in
    place of the DALI loader."""
    return dict(spec, twin=True, kwargs=dict(spec["kwargs"], num_threads=0))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker_env(tmp=None) -> dict:
    return subprocess_env(tmp=tmp)


def launch(node_commands, out_dir) -> list:
    """Runs the torchrun commands together (one per "node"); returns every rank's report."""
    # Each torchrun in its own process group, so a hung one is killed with its workers.
    procs = [subprocess.Popen(cmd, env=worker_env(out_dir), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, start_new_session=True) for cmd in node_commands]
    try:
        logs = [p.communicate(timeout=LAUNCH_TIMEOUT)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
    for p, log in zip(procs, logs):
        assert p.returncode == 0, f"torchrun failed:\n{log[-5000:]}"
    reports = [json.load(open(out_dir / name)) for name in sorted(os.listdir(out_dir))
               if name.startswith("rank")]
    return sorted(reports, key=lambda r: int(r["env"]["RANK"]))


def write_job(tmp_path, job) -> tuple:
    out = tmp_path / "out"
    out.mkdir()
    path = tmp_path / "job.json"
    path.write_text(json.dumps(job))
    return str(path), out


# -- what the reports must show ----------------------------------------------------------


def check_labels_match_images(batches, expect):
    for indices, labels in batches:
        want = [i % expect["label_mod"] if "label_mod" in expect else (i - expect["first"]) // expect["label_div"]
                for i in indices]
        assert labels == want, "labels came apart from their images"


def check_train(per_rank, expect, world_size, batch_size, drop_last):
    """per_rank[r][epoch] = rank r's batches. Disjoint shards, equal batch counts, coverage."""
    n, everything = expect["count"], frozenset(range(expect["first"], expect["first"] + expect["count"]))
    per_rank_samples = n // world_size
    expected = per_rank_samples - per_rank_samples % batch_size if drop_last else per_rank_samples
    missing_by_epoch = []
    for epoch in range(len(per_rank[0])):
        batches = [ranks[epoch] for ranks in per_rank]
        assert len({len(b) for b in batches}) == 1, f"epoch {epoch}: ranks ran unequal batch counts"
        counts = Counter(i for rank_batches in batches for indices, _ in rank_batches for i in indices)
        assert max(counts.values()) == 1, f"epoch {epoch}: a sample was read twice"
        assert set(counts) <= everything
        assert len(counts) == world_size * expected, f"epoch {epoch}: {len(counts)} samples read"
        assert n - len(counts) < world_size * batch_size if drop_last else n - len(counts) < world_size
        for rank_batches in batches:
            check_labels_match_images(rank_batches, expect)
            assert all(len(indices) == batch_size for indices, _ in rank_batches[:-1])
        missing_by_epoch.append(everything - set(counts))
    if any(missing_by_epoch):  # left-over samples change with the epoch, so none is left out for good
        assert len(set(missing_by_epoch)) == len(missing_by_epoch), "the same samples left out every epoch"
    orders = [tuple(i for indices, _ in per_rank[0][epoch] for i in indices) for epoch in range(len(per_rank[0]))]
    assert len(set(orders)) == len(orders), "every epoch must have its own order"


def check_val_exactly_once(per_rank, expect):
    seen = [i for ranks in per_rank for batches in ranks for indices, _ in batches for i in indices]
    assert sorted(seen) == list(range(expect["first"], expect["first"] + expect["count"])), \
        "val must read every sample exactly once over all ranks"
    for ranks in per_rank:
        for batches in ranks:
            check_labels_match_images(batches, expect)


def check_reports(reports, phase, world_size, specs):
    assert len(reports) == world_size
    for name, spec in specs.items():
        views = [r[phase][name] for r in reports]
        assert all(v["shard_world_size"] == world_size for v in views)
        # The shard is the global rank, whatever LOCAL_RANK is.
        assert [v["shard_rank"] for v in views] == list(range(world_size))
        assert [v["shard_rank"] for v in views] == [int(r["env"]["RANK"]) for r in reports]
        assert [v["gpu_local_rank"] for v in views] == [int(r["env"]["LOCAL_RANK"]) for r in reports]
        assert all(len(v["epochs"][0]) == v["len"] for v in views), "len(loader) is not the batch count"
        per_rank = [v["epochs"] for v in views]
        if spec["expect"]["train"]:
            check_train(per_rank, spec["expect"], world_size, spec["kwargs"]["batch_size"],
                        spec["kwargs"].get("drop_last", False))
        else:
            check_val_exactly_once(per_rank, spec["expect"])


# -- the partition itself ------------------------------------------------------------------


def test_shard_indices_partition_for_every_size_and_world():
    for world_size in range(1, 6):
        for n in range(1, 23):
            shards = [Shard(r, world_size, 0) for r in range(world_size)]
            val = [shard_indices(n, shuffle=False, seed=0, epoch=0, shard=s).tolist() for s in shards]
            assert sorted(sum(val, [])) == list(range(n)), (n, world_size)  # exactly once, no padding
            assert max(map(len, val)) - min(map(len, val)) <= 1
            if n < world_size:
                continue
            for epoch in range(3):
                train = [shard_indices(n, shuffle=True, seed=4, epoch=epoch, shard=s).tolist() for s in shards]
                assert {len(t) for t in train} == {n // world_size}, (n, world_size)
                assert len(set(sum(train, []))) == n // world_size * world_size, "shards overlap"


# -- 1. one machine, three processes ---------------------------------------------------------


@pytest.mark.slow
@pytest.mark.subprocess
def test_torchrun_three_processes_shard_train_and_read_val_exactly_once(cifar_root, folder_roots, tmp_path):
    specs = {"cifar_train": cifar_spec(cifar_root, "train", 16, EPOCHS),
             "cifar_val": cifar_spec(cifar_root, "val", 16, 1),
             "folder_train": folder_spec(folder_roots, "train", 16, EPOCHS),
             "folder_val": folder_spec(folder_roots, "val", 16, 1)}
    job_path, out = write_job(tmp_path, {"loaders": specs, "process_group": True})
    reports = launch([[*TORCHRUN, "--standalone", "--nproc_per_node=3", WORKER, "shards", job_path, str(out)]],
                     out)
    for phase in ("from_env", "from_group"):  # torchrun's RANK, then only the gloo group's rank
        check_reports(reports, phase, 3, specs)
    # Found from the group or from torchrun: the very same shards.
    assert [r["from_env"] for r in reports] == [r["from_group"] for r in reports]
    for r in reports:  # the README's all_reduce of per-rank sums and counts
        for name in ("cifar_val", "folder_val"):
            expect = specs[name]["expect"]
            indices = range(expect["first"], expect["first"] + expect["count"])
            assert r["val_all_reduce"][name] == [len(indices), sum(indices)]


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.parametrize("framework,package", [("accelerate", "accelerate"), ("fabric", "lightning_fabric")])
def test_a_framework_on_two_processes_leaves_each_loader_reading_its_shard(framework, package, cifar_root,
                                                                          folder_roots, tmp_path):
    """A script using Accelerate (Accelerator, set_seed(device_specific=True), prepare) or
    Lightning Fabric (ddp, seed_everything per rank) on two processes. Accelerate's prepare
    hands each loader back, DALI loader or torchvision twin (rebuilt, a twin would be sharded a
    second time); Fabric's setup_dataloaders takes the twins (it leaves their sampler, a
    DistributedSampler, in place and sets its epoch), the DALI loaders are used as they are (it
    takes DataLoaders only). Each loader reads this rank's shard of the framework's group:
    train partitioned every epoch, val read exactly once."""
    pytest.importorskip(package)
    specs = {"cifar_train": cifar_spec(cifar_root, "train", 16, 2),
             "folder_val": folder_spec(folder_roots, "val", 16, 1)}
    specs.update({f"{name}_twin": twin_of(spec) for name, spec in specs.items()})
    job_path, out = write_job(tmp_path, {"loaders": specs})
    reports = launch([[*TORCHRUN, "--standalone", "--nproc_per_node=2", WORKER, framework, job_path, str(out)]], out)
    assert [r["process_index"] for r in reports] == [0, 1]
    check_reports(reports, framework, 2, specs)


# -- 2. two "machines", two processes each ---------------------------------------------------


@pytest.mark.slow
@pytest.mark.subprocess
def test_two_torchrun_nodes_shard_by_global_rank(cifar_root, folder_roots, tmp_path):
    # The original API's call: local_rank and world_size from the environment. On two
    # machines LOCAL_RANK repeats, so it must pick the GPU only, never the shard.
    legacy = {"env_kwargs": {"local_rank": "LOCAL_RANK", "world_size": "WORLD_SIZE"}}
    specs = {"cifar_train": cifar_spec(cifar_root, "train", 16, EPOCHS, drop_last=True),
             "cifar_val_legacy_args": dict(cifar_spec(cifar_root, "val", 16, 1), **legacy),
             "folder_train_legacy_args": dict(folder_spec(folder_roots, "train", 16, EPOCHS), **legacy),
             "folder_val": folder_spec(folder_roots, "val", 16, 1)}
    job_path, out = write_job(tmp_path, {"loaders": specs})
    port = free_port()
    nodes = [[*TORCHRUN, "--nnodes=2", "--nproc_per_node=2", f"--node_rank={node}", "--master_addr=127.0.0.1",
              f"--master_port={port}", WORKER, "shards", job_path, str(out)] for node in (0, 1)]
    reports = launch(nodes, out)
    assert sorted(int(r["env"]["LOCAL_RANK"]) for r in reports) == [0, 0, 1, 1]
    check_reports(reports, "from_env", 4, specs)


# -- 3. mid-epoch resume in a new process -----------------------------------------------------


def save_states_along_the_way(loader, epochs):
    """Every batch of `epochs` epochs, and states taken before the first batch, after the
    first, second, middle, last-but-one and last batch (the very end of an epoch, before
    the loop ends), and between epochs."""
    batches, states = [], {}
    for epoch in range(epochs):
        it = iter(loader)
        states[f"e{epoch}_before_first_batch"] = loader.state_dict()
        batches.append([])
        stops = {1, 2, len(loader) // 2, len(loader) - 1, len(loader)}
        for k, batch in enumerate(it, start=1):
            batches[-1].append(batch)
            if k in stops:
                states[f"e{epoch}_after_{k}_of_{len(loader)}"] = loader.state_dict()
        states[f"e{epoch}_between_epochs"] = loader.state_dict()
    return batches, {name: pickle.loads(pickle.dumps(state)) for name, state in states.items()}


def expected_after(state, reference):
    epoch, done = state["epoch"], state["batches_done"]
    return reference[epoch][done:], reference[epoch + 1]


def assert_same_batches(got, want, what):
    assert len(got) == len(want), f"{what}: {len(got)} batches, expected {len(want)}"
    for k, ((images, labels), (want_images, want_labels)) in enumerate(zip(got, want)):
        assert torch.equal(images, want_images), f"{what}: batch {k} images differ"
        assert torch.equal(labels, want_labels), f"{what}: batch {k} labels differ"


RESUME_CASES = {
    "cifar_train_one_process": ("cifar", dict(type="train", batch_size=16, cutout=8, seed=11)),
    "cifar_train_rank1_of_3": ("cifar", dict(type="train", batch_size=8, seed=5, rank=1, world_size=3,
                                             drop_last=True)),
    "cifar_val_rank2_of_3": ("cifar", dict(type="val", batch_size=32, rank=2, world_size=3)),
    # 100 images, batches of 8: the last batch is short, where readers.file wraps around.
    "folder_train_one_process": ("imagefolder", dict(train=True, batch_size=8, seed=3)),
    "folder_val_rank1_of_3": ("imagefolder", dict(train=False, batch_size=8, rank=1, world_size=3)),
}


@pytest.mark.subprocess
@pytest.mark.parametrize("case", sorted(RESUME_CASES))
def test_resume_in_a_new_process_yields_exactly_the_remaining_batches(case, cifar_root, folder_roots, tmp_path,
                                                                      no_torchrun_env):
    kind, kwargs = RESUME_CASES[case]
    where = dict(image_dir=cifar_root) if kind == "cifar" else dict(root=folder_roots["val"], crop=32, val_size=36)
    kwargs = dict(kwargs, num_threads=1, **where)
    uninterrupted = make_loader(kind, kwargs)
    reference = [list(uninterrupted) for _ in range(4)]
    interrupted = make_loader(kind, kwargs)
    batches, states = save_states_along_the_way(interrupted, 2)
    for epoch in range(2):  # taking states does not disturb the run
        assert_same_batches(batches[epoch], reference[epoch], f"epoch {epoch} while saving states")
    # The new process builds its loaders with seed=None: the state brings the seed.
    job = {"kind": kind, "kwargs": dict(kwargs, seed=None), "states": states}
    job_path, out_path = tmp_path / "job.pkl", tmp_path / "resumed.pt"
    job_path.write_bytes(pickle.dumps(job))
    subprocess.run([sys.executable, WORKER, "resume", str(job_path), str(out_path)], env=worker_env(),
                   check=True, timeout=LAUNCH_TIMEOUT)
    resumed = torch.load(out_path)
    assert resumed.keys() == states.keys()
    for name, state in states.items():
        rest, following = expected_after(state, reference)
        assert_same_batches(resumed[name]["rest"], rest, f"{name}: rest of epoch {state['epoch']}")
        assert_same_batches(resumed[name]["next_epoch"], following, f"{name}: the epoch after")


@pytest.mark.parametrize("kind", ["cifar", "imagefolder"])
def test_set_epoch_reproduces_that_epoch_in_a_fresh_loader(kind, cifar_root, folder_roots, no_torchrun_env):
    where = dict(type="train", image_dir=cifar_root) if kind == "cifar" else \
        dict(train=True, root=folder_roots["val"], crop=32, val_size=36)
    kwargs = dict(where, batch_size=16, num_threads=1, seed=7, rank=1, world_size=2)
    run = make_loader(kind, kwargs)
    epochs = [list(run) for _ in range(3)]
    resumed = make_loader(kind, kwargs)
    resumed.set_epoch(2)
    assert_same_batches(list(resumed), epochs[2], "set_epoch(2)")
    resumed.set_epoch(1)
    assert_same_batches(list(resumed), epochs[1], "set_epoch(1) after epoch 2")


def test_state_is_small_and_names_its_position(cifar_root, no_torchrun_env):
    loader = get_cifar_iter_dali("train", cifar_root, 16, num_threads=1, seed=0)
    it = iter(loader)
    for _ in range(3):
        next(it)
    state = loader.state_dict()
    assert (state["epoch"], state["batches_done"]) == (0, 3)
    assert len(pickle.dumps(state)) < 10_000
    fresh = get_cifar_iter_dali("train", cifar_root, 16, num_threads=1, seed=0)
    fresh.load_state_dict(state)
    assert fresh.state_dict() == state, "a loaded state, not yet used, is still the state"


# -- 4. who am I, and bad input -----------------------------------------------------------------


def test_rank_comes_from_arguments_then_process_group_then_torchrun(monkeypatch, tmp_path):
    monkeypatch.setenv("RANK", "5")
    monkeypatch.setenv("WORLD_SIZE", "8")
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert resolve_shard() == Shard(rank=5, world_size=8, local_rank=1)
    assert resolve_shard(rank=2, world_size=4, local_rank=0) == Shard(2, 4, 0)
    # The original API's local_rank under torchrun: the GPU; the shard stays the global rank.
    assert resolve_shard(local_rank=1, world_size=8) == Shard(5, 8, 1)
    torch.distributed.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0,
                                         world_size=1)
    try:
        assert resolve_shard() == Shard(0, 1, 1)  # the group wins over RANK/WORLD_SIZE
    finally:
        torch.distributed.destroy_process_group()


def test_original_api_local_rank_is_the_shard_outside_torchrun(no_torchrun_env):
    assert resolve_shard(local_rank=2, world_size=3) == Shard(2, 3, 2)
    assert resolve_shard(local_rank=1) == Shard(0, 1, 1), "one process: local_rank only picks the GPU"
    assert resolve_shard() == Shard(0, 1, 0)


@pytest.mark.parametrize("arguments, named", [
    (dict(world_size=0), "world_size"),
    (dict(world_size=-2, rank=0), "world_size"),
    (dict(rank=3, world_size=3), "rank"),
    (dict(rank=-1, world_size=3), "rank"),
    (dict(rank=1.0, world_size=3), "rank"),
    (dict(rank=0, world_size=2, local_rank=-1), "local_rank"),
    (dict(world_size=2, local_rank="1"), "local_rank"),
    (dict(world_size=3), "rank="),  # several processes, rank unknown: never guess 0
])
def test_bad_rank_or_world_size_is_refused_by_name(arguments, named, no_torchrun_env, cifar_root, folder_roots):
    with pytest.raises(ValueError, match=named):
        resolve_shard(**arguments)
    with pytest.raises(ValueError, match=named):
        get_cifar_iter_dali("train", cifar_root, 16, num_threads=1, **arguments)
    with pytest.raises(ValueError, match=named):
        make_loader("imagefolder", dict(root=folder_roots["val"], batch_size=16, train=False, num_threads=1,
                                        **arguments))


def test_more_processes_than_training_samples_is_refused():
    with pytest.raises(ValueError, match="world_size=4"):
        EpochSampler(3, shuffle=True, seed=0, shard=Shard(0, 4, 0))


def test_state_of_another_loader_is_refused(cifar_root, folder_roots, tmp_path, no_torchrun_env):
    def loader(**changes):
        kwargs = dict(type="train", image_dir=cifar_root, batch_size=16, num_threads=1, seed=0)
        return get_cifar_iter_dali(**dict(kwargs, **changes))

    saved = loader()
    next(iter(saved))
    state = saved.state_dict()
    other = write_cifar(str(tmp_path / "other"), n_train=N_TRAIN + 16, n_test=N_VAL)
    for changes, named in [(dict(batch_size=8), "batch_size"), (dict(type="val"), "dataset"),
                           (dict(image_dir=other), "dataset"), (dict(rank=0, world_size=2), "world_size"),
                           (dict(rank=1, world_size=2), "rank"), (dict(drop_last=True), "drop_last")]:
        with pytest.raises(ValueError, match=named):
            loader(**changes).load_state_dict(state)
    folder = make_loader("imagefolder", dict(root=folder_roots["train"], batch_size=16, train=True, num_threads=1))
    with pytest.raises(ValueError, match="dataset"):
        folder.load_state_dict(state)
    with pytest.raises(ValueError, match="lacks"):
        loader().load_state_dict({k: v for k, v in state.items() if k != "dali"})
    with pytest.raises(TypeError, match="state_dict"):
        loader().load_state_dict(pickle.dumps(state))


@pytest.mark.parametrize("loader_class", ["DaliLoader", "TorchLoader"])
def test_ranks_with_generators_seeded_apart_still_share_one_order(loader_class, folder_roots, no_torchrun_env):
    """torch's recipe seeds a generator per rank for the workers' randomness; DistributedSampler
    ignores it for the order, so the ranks' shards still partition the samples. Every image
    says its own index: over two ranks each sample comes exactly once an epoch, with its label."""
    import torchvision.datasets as tvd
    from torchvision import transforms as T

    import dali_loaders

    recipe = T.Compose([T.Resize((24, 24)), T.ToTensor()])
    zero, unit = torch.zeros(3, dtype=torch.float64), torch.full((3,), 255.0, dtype=torch.float64)
    per_epoch = [[] for _ in range(2)]
    for rank in range(2):
        loader = getattr(dali_loaders, loader_class)(
            tvd.ImageFolder(folder_roots["train"], transform=recipe), batch_size=50, shuffle=True,
            generator=torch.Generator().manual_seed(1000 + 17 * rank), rank=rank, world_size=2)
        for epoch in range(2):
            loader.set_epoch(epoch)
            for images, labels in loader:
                per_epoch[epoch] += labelled_indices(images, labels, zero, unit, FOLDER_CODE, N_TRAIN // CLASSES)
    for seen in per_epoch:
        assert sorted(seen) == list(range(N_TRAIN)), "ranks lost or repeated samples"
        assert seen != sorted(seen), "training order not shuffled"
    assert per_epoch[0] != per_epoch[1]
