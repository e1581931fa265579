"""Sharding across processes, exact-once evaluation and mid-epoch resume (issue 4).

The multi-process tests launch tests/dist_worker.py with torchrun (CPU, gloo) and check
what each rank wrote: which samples (decoded from the pixels, tests/cifar_data.py's
index_images), in which batches, with which labels.
"""
import json
import os
import pickle
import socket
import subprocess
import sys
from collections import Counter

import pytest
import torch

from cifar_data import index_images, write_cifar
from dali_loaders.cifar import get_cifar_iter_dali
from dali_loaders.distributed import EpochSampler, Shard, resolve_shard

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "dist_worker.py")
TORCHRUN = os.path.join(os.path.dirname(sys.executable), "torchrun")
N_TRAIN, N_VAL, CLASSES = 500, 100, 10
VAL_INDICES = list(range(N_TRAIN, N_TRAIN + N_VAL))  # index_images numbers val after train
EPOCHS = 3
LAUNCH_TIMEOUT = 300  # seconds; a hung rendezvous must fail the test, not the session


@pytest.fixture(scope="module")
def cifar_root(tmp_path_factory):
    return write_cifar(str(tmp_path_factory.mktemp("cifar")), n_train=N_TRAIN, n_test=N_VAL,
                       images=index_images)


@pytest.fixture
def no_torchrun_env(monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)


def cifar_spec(root, type, batch_size, epochs, **extra):
    return {"kind": "cifar", "epochs": epochs,
            "kwargs": dict(type=type, image_dir=root, batch_size=batch_size, num_threads=1, **extra)}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(HERE), HERE, env.get("PYTHONPATH", "")])
    return env


def launch(node_commands, tmp_path) -> list:
    """Runs the torchrun commands together (one per "node"); returns every rank's report."""
    procs = [subprocess.Popen(cmd, env=worker_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True) for cmd in node_commands]
    try:
        logs = [p.communicate(timeout=LAUNCH_TIMEOUT)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, log in zip(procs, logs):
        assert p.returncode == 0, f"torchrun failed:\n{log[-5000:]}"
    reports = [json.load(open(tmp_path / name)) for name in sorted(os.listdir(tmp_path))
               if name.startswith("rank")]
    return sorted(reports, key=lambda r: int(r["env"]["RANK"]))


def write_job(tmp_path, job) -> tuple:
    out = tmp_path / "out"
    out.mkdir()
    path = tmp_path / "job.json"
    path.write_text(json.dumps(job))
    return str(path), out


# -- what the reports must show ----------------------------------------------------------


def check_labels_match_images(batches):
    for indices, labels in batches:
        assert labels == [i % CLASSES for i in indices], "labels came apart from their images"


def check_train(per_rank, n, world_size, batch_size, drop_last):
    """per_rank[r][epoch] = rank r's batches. Disjoint shards, equal batch counts, coverage."""
    missing_by_epoch = []
    for epoch in range(len(per_rank[0])):
        batches = [ranks[epoch] for ranks in per_rank]
        assert len({len(b) for b in batches}) == 1, f"epoch {epoch}: ranks ran unequal batch counts"
        counts = Counter(i for rank_batches in batches for indices, _ in rank_batches for i in indices)
        assert max(counts.values()) == 1, f"epoch {epoch}: a sample was read twice"
        assert all(0 <= i < n for i in counts)
        per_rank_samples = n // world_size
        expected = per_rank_samples - per_rank_samples % batch_size if drop_last else per_rank_samples
        assert len(counts) == world_size * expected, f"epoch {epoch}: {len(counts)} samples read"
        assert n - len(counts) < world_size * batch_size if drop_last else n - len(counts) < world_size
        for rank_batches in batches:
            check_labels_match_images(rank_batches)
            assert all(len(indices) == batch_size for indices, _ in rank_batches[:-1])
        missing_by_epoch.append(frozenset(range(n)) - set(counts))
    if any(missing_by_epoch):  # left-over samples change with the epoch, so none is left out for good
        assert len(set(missing_by_epoch)) == len(missing_by_epoch), "the same samples left out every epoch"


def check_val_exactly_once(per_rank, n):
    seen = [i for ranks in per_rank for batches in ranks for indices, _ in batches for i in indices]
    assert sorted(seen) == VAL_INDICES, "val must read every sample exactly once over all ranks"
    for ranks in per_rank:
        for batches in ranks:
            check_labels_match_images(batches)


def check_reports(reports, phase, world_size, specs):
    assert len(reports) == world_size
    assert [r[phase]["cifar_train"]["shard_rank"] for r in reports] == list(range(world_size))
    for name, spec in specs.items():
        views = [r[phase][name] for r in reports]
        assert all(v["shard_world_size"] == world_size for v in views)
        # The shard is the global rank, whatever LOCAL_RANK is.
        assert [v["shard_rank"] for v in views] == [int(r["env"]["RANK"]) for r in reports]
        assert [v["gpu_local_rank"] for v in views] == [int(r["env"]["LOCAL_RANK"]) for r in reports]
        per_rank = [v["epochs"] for v in views]
        assert all(len(v["epochs"][0]) == v["len"] for v in views), "len(loader) is not the batch count"
        kwargs = spec["kwargs"]
        if kwargs["type"] == "train":
            check_train(per_rank, N_TRAIN, world_size, kwargs["batch_size"], kwargs.get("drop_last", False))
        else:
            check_val_exactly_once(per_rank, N_VAL)


# -- 1. one machine, three processes ---------------------------------------------------------


def test_torchrun_three_processes_shard_train_and_read_val_exactly_once(cifar_root, tmp_path):
    specs = {"cifar_train": cifar_spec(cifar_root, "train", 16, EPOCHS),
             "cifar_val": cifar_spec(cifar_root, "val", 16, 1)}
    job_path, out = write_job(tmp_path, {"loaders": specs, "process_group": True})
    reports = launch([[TORCHRUN, "--standalone", "--nproc_per_node=3", WORKER, "shards", job_path, str(out)]],
                     out)
    for phase in ("from_env", "from_group"):  # torchrun's RANK, then only the gloo group's rank
        check_reports(reports, phase, 3, specs)
    # Found from the group or from torchrun: the very same shards.
    assert [r["from_env"] for r in reports] == [r["from_group"] for r in reports]
    for r in reports:  # the README's all_reduce of per-rank sums and counts
        assert r["val_all_reduce"]["cifar_val"] == [N_VAL, sum(VAL_INDICES)]


# -- 2. two "machines", two processes each ---------------------------------------------------


def test_two_torchrun_nodes_shard_by_global_rank(cifar_root, tmp_path):
    # The original API's call: local_rank and world_size from the environment. On two
    # machines LOCAL_RANK repeats, so it must pick the GPU only, never the shard.
    legacy = {"local_rank": "LOCAL_RANK", "world_size": "WORLD_SIZE"}
    specs = {"cifar_train": cifar_spec(cifar_root, "train", 16, EPOCHS, drop_last=True),
             "cifar_val": cifar_spec(cifar_root, "val", 16, 1),
             "cifar_val_legacy_args": dict(cifar_spec(cifar_root, "val", 16, 1), env_kwargs=legacy)}
    job_path, out = write_job(tmp_path, {"loaders": specs})
    port = free_port()
    nodes = [[TORCHRUN, "--nnodes=2", "--nproc_per_node=2", f"--node_rank={node}", "--master_addr=127.0.0.1",
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


@pytest.mark.parametrize("kwargs", [
    dict(type="train", batch_size=16, cutout=8, seed=11),
    dict(type="train", batch_size=8, seed=5, rank=1, world_size=3, drop_last=True),
    dict(type="val", batch_size=32, rank=2, world_size=3),
], ids=["train_one_process", "train_rank1_of_3", "val_rank2_of_3"])
def test_resume_in_a_new_process_yields_exactly_the_remaining_batches(cifar_root, tmp_path, kwargs,
                                                                      no_torchrun_env):
    kwargs = dict(kwargs, image_dir=cifar_root, num_threads=1)
    uninterrupted = get_cifar_iter_dali(**kwargs)
    reference = [list(uninterrupted) for _ in range(4)]
    interrupted = get_cifar_iter_dali(**kwargs)
    batches, states = save_states_along_the_way(interrupted, 2)
    for epoch in range(2):  # taking states does not disturb the run
        assert_same_batches(batches[epoch], reference[epoch], f"epoch {epoch} while saving states")
    # The new process builds its loaders with seed=None: the state brings the seed.
    job = {"kind": "cifar", "kwargs": dict(kwargs, seed=None), "states": states}
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
    (dict(world_size=3), "rank="),  # several processes, rank unknown: never guess 0
])
def test_bad_rank_or_world_size_is_refused_by_name(arguments, named, no_torchrun_env, cifar_root):
    with pytest.raises(ValueError, match=named):
        resolve_shard(**arguments)
    with pytest.raises(ValueError, match=named):
        get_cifar_iter_dali("train", cifar_root, 16, num_threads=1, **arguments)


def test_more_processes_than_training_samples_is_refused():
    with pytest.raises(ValueError, match="world_size=4"):
        EpochSampler(3, shuffle=True, seed=0, shard=Shard(0, 4, 0))


def test_state_of_another_loader_is_refused(cifar_root, tmp_path, no_torchrun_env):
    def loader(**changes):
        kwargs = dict(type="train", image_dir=cifar_root, batch_size=16, num_threads=1, seed=0)
        return get_cifar_iter_dali(**dict(kwargs, **changes))

    saved = loader()
    next(iter(saved))
    state = saved.state_dict()
    other = write_cifar(str(tmp_path / "other"), n_train=N_TRAIN + 16, n_test=N_VAL)
    for changes, named in [(dict(batch_size=8), "batch_size"), (dict(type="val"), "dataset"),
                           (dict(image_dir=other), "dataset"), (dict(rank=0, world_size=2), "world_size"), (dict(rank=1, world_size=2), "rank"),
                           (dict(drop_last=True), "drop_last")]:
        with pytest.raises(ValueError, match=named):
            loader(**changes).load_state_dict(state)
    with pytest.raises(ValueError, match="lacks"):
        loader().load_state_dict({k: v for k, v in state.items() if k != "dali"})
    with pytest.raises(TypeError, match="state_dict"):
        loader().load_state_dict(pickle.dumps(state))
