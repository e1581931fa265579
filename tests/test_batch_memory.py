"""The batch memory (ops/batch_memory.py): torch's CPU allocator while the loader runs a
collate_fn or a batch_transform callable. Its blocks (from 2 MB up kept when freed and reused
for the same size, at most four and 1 GiB), torch's allocator put back after nested
and overlapping calls, an allocator of higher priority left alone, the switch and the fallback
without a compiler, tensors freed after the call and in a forked child, and the loaders'
callables running inside it."""
import math
import multiprocessing
import subprocess
import sys
import threading
import warnings

import pytest
import torch
import torchvision.datasets as tvd
from cifar_data import index_images, write_cifar
from subprocess_env import subprocess_env
from torchvision.transforms import v2

from dali_loaders import DaliLoader, TorchLoader
from dali_loaders.ops import batch_memory

BATCH = (64, 3, 224, 224)   # a default ImageNet train batch: 38.5 MB of float32


@pytest.fixture(autouse=True)
def nothing_kept():
    """Each test starts and ends with no kept blocks and torch's own allocator."""
    batch_memory.release_kept()
    yield
    batch_memory.release_kept()
    assert not batch_memory.active()


def test_large_blocks_are_aligned_and_kept_when_freed_and_reused_for_the_same_size():
    with batch_memory.allocations():
        assert batch_memory.active()
        big = torch.full(BATCH, 3.0)
        small = torch.arange(10.0)
        address = big.data_ptr()
        assert address % 64 == 0 and small.data_ptr() % 64 == 0
        assert batch_memory.kept_blocks() == (0, 1)
    assert not batch_memory.active()
    assert float(big.sum()) == 3.0 * big.numel() and small.tolist() == list(range(10))
    del big   # freed after the call: kept
    assert batch_memory.kept_blocks() == (1, 0)
    with batch_memory.allocations():
        again = torch.empty(BATCH)
        other = torch.empty(BATCH[0] + 1, *BATCH[1:])   # another size: a block of its own
    assert again.data_ptr() == address and other.data_ptr() != address
    assert batch_memory.kept_blocks() == (0, 2)
    del again, other
    assert batch_memory.release_kept() >= 2 * math.prod(BATCH) * 4 and batch_memory.kept_blocks() == (0, 0)


def test_at_most_four_freed_blocks_are_kept():
    with batch_memory.allocations():
        blocks = [torch.empty(BATCH[0] - i, *BATCH[1:]) for i in range(6)]
    del blocks
    assert batch_memory.kept_blocks() == (4, 0)


def test_at_most_a_gib_is_kept():
    with batch_memory.allocations():
        blocks = [torch.empty(300 << 20, dtype=torch.uint8) for _ in range(4)]   # 4 x 300 MiB, untouched
    del blocks
    assert batch_memory.kept_blocks() == (3, 0)
    assert batch_memory.release_kept() == 3 * (300 << 20)


def test_outside_the_call_torchs_allocator_makes_the_tensors():
    with batch_memory.allocations():
        pass
    outside = torch.empty(BATCH)
    del outside
    assert batch_memory.kept_blocks() == (0, 0)   # not one of its blocks: nothing kept


def test_nested_and_overlapping_calls_put_torchs_allocator_back_once_all_have_returned():
    inside, go_on, failures = threading.Event(), threading.Event(), []

    def other_thread():
        try:
            with batch_memory.allocations():
                inside.set()
                go_on.wait(10)
            failures.append(None)
        except Exception as e:   # pragma: no cover - reported below
            failures.append(e)

    with batch_memory.allocations():
        with batch_memory.allocations():
            assert batch_memory.active()
        assert batch_memory.active()
        thread = threading.Thread(target=other_thread)
        thread.start()
        assert inside.wait(10)
    assert batch_memory.active()   # the other thread is still inside its call
    go_on.set()
    thread.join(10)
    assert failures == [None] and not batch_memory.active()


HIGHER_PRIORITY = """
import torch
from dali_loaders.ops import batch_memory
torch._C._set_default_mobile_cpu_allocator()   # torch's own, at priority 100: for good in this process
with batch_memory.allocations():
    assert not batch_memory.active()
    block = torch.empty({batch})
del block
assert batch_memory.kept_blocks() == (0, 0)
print("left alone")
"""


@pytest.mark.subprocess
def test_an_allocator_of_higher_priority_is_left_alone():
    done = subprocess.run([sys.executable, "-c", HIGHER_PRIORITY.format(batch=BATCH)], env=subprocess_env(),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "left alone", done.stderr[-2000:]


def test_the_switch_turns_it_off(monkeypatch):
    monkeypatch.setenv(batch_memory.DISABLE_ENV, "1")
    with batch_memory.allocations():
        assert not batch_memory.active()


def test_without_a_compiler_it_warns_once_and_torchs_allocator_stays(no_compiler):
    batch_memory.forget()
    try:
        with pytest.warns(RuntimeWarning, match="torch's own CPU allocator"):
            with batch_memory.allocations():
                assert not batch_memory.active()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with batch_memory.allocations():
                pass
    finally:
        batch_memory.forget()


def _free_in_child(tensor, answers):
    first = tensor.numpy()[0, 0, 0, 0]   # numpy: torch's thread pool does not survive fork()
    del tensor
    answers.put(float(first))


def test_a_forked_child_frees_a_tensor_made_inside_the_call():
    with batch_memory.allocations():
        tensor = torch.ones(BATCH)
        tensor[0, 0, 0, 0] = 1.0
    context = multiprocessing.get_context("fork")
    answers = context.Queue()
    child = context.Process(target=_free_in_child, args=(tensor, answers))
    child.start()
    child.join(60)
    assert child.exitcode == 0 and answers.get(timeout=5) == 1.0


# -- the loaders' callables run inside it --------------------------------------------------------


@pytest.fixture
def cifar(tmp_path, monkeypatch):
    """torchvision's CIFAR-10 over files written here (its md5 checks patched out)."""
    monkeypatch.setattr(tvd.CIFAR10, "_check_integrity", lambda self: True)
    monkeypatch.setattr(tvd.cifar, "check_integrity", lambda *args, **kwargs: True)
    root = write_cifar(str(tmp_path), "cifar10", 32, 11, images=index_images)
    return tvd.CIFAR10(root, train=False, transform=v2.Compose([v2.PILToTensor(), v2.ToDtype(torch.float, scale=True)]))


def seen_inside(samples_or_images, labels=None):
    """Whether the callable ran inside the batch memory: a big tensor made here is its block."""
    out_before = batch_memory.kept_blocks()[1]
    block = torch.empty(BATCH)   # noqa: F841  (alive while its block is counted)
    return batch_memory.active() and batch_memory.kept_blocks()[1] == out_before + 1, labels


def test_the_dali_loaders_collate_fn_and_batch_transform_run_inside_it(cifar):
    collated = DaliLoader(cifar, 8, collate_fn=seen_inside)
    transformed = DaliLoader(cifar, 8, batch_transform=lambda images, labels: (
        torch.tensor(seen_inside(images)[0]), labels))
    assert collated.route == transformed.route == "dali"
    assert [inside for inside, _ in collated] == [True] * 2
    assert [bool(inside) for inside, _ in transformed] == [True] * 2
    assert not batch_memory.active()
    twin = TorchLoader(cifar, 8, batch_transform=lambda images, labels: (torch.tensor(seen_inside(images)[0]), labels))
    assert [bool(inside) for inside, _ in twin] == [True] * 2
