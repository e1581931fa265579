"""The images collate_fn gets on the DALI path are rows of the loader's batch: stacked back whole
and in order (default_collate) they are that batch, with no copy; stacked any other way they are
what torch.stack makes of them, and every collate_fn gets DataLoader's result. The batches rows
are made of: numbered, so that a row out of place shows."""
import copy
import pickle

import pytest
import torch
from test_collate import cifar, cifar_root, no_md5_checks  # noqa: F401  (fixtures)
from torch.utils.data import DataLoader, default_collate

from dali_loaders import DaliLoader
from dali_loaders.loader.rows import batch_rows


def numbered(n=5, memory_format=torch.contiguous_format):
    """(n, 3, 4, 4) float32, every value of row i in [i, i + 1)."""
    values = torch.arange(n * 48, dtype=torch.float32).view(n, 3, 4, 4) / 48
    return values.contiguous(memory_format=memory_format)


def plain_copies(rows):
    return [row.clone() for row in rows]   # what DataLoader's samples are: tensors apart from any batch


STACKS = [lambda rows: torch.stack(rows), lambda rows: torch.stack(rows, 0),
          lambda rows: torch.stack(tuple(rows), dim=-4), lambda rows: torch.stack(tensors=rows, dim=0, out=None),
          lambda rows: default_collate(list(zip(rows, range(5))))[0]]


@pytest.mark.parametrize("stack", STACKS, ids=["positional", "dim 0", "dim -4", "keywords", "default_collate"])
def test_stacking_all_rows_in_order_gives_the_batch_itself_equal_to_torch_stack(stack):
    batch = numbered()
    rows = batch_rows(batch)
    want = torch.stack(plain_copies(rows))
    stacked = stack(rows)
    assert stacked is batch and type(stacked) is torch.Tensor
    assert torch.equal(stacked, want) and stacked.stride() == want.stride() and stacked.dtype == want.dtype


def test_a_second_stack_of_the_rows_is_a_copy_apart_from_the_first():
    """A collate_fn that collates twice gets two batches apart, as DataLoader's two stacks are."""
    batch = numbered()
    rows = batch_rows(batch)
    first, second = default_collate(list(zip(rows, range(5))))[0], torch.stack(rows)
    assert first is batch and second is not batch and torch.equal(first, second)
    second.add_(1)
    assert not torch.equal(first, second)


def reordered(rows):
    return rows[::-1]


def dropped(rows):
    return rows[:2] + rows[3:]


def first_ones(rows):
    return rows[:3]


def last_ones(rows):
    return rows[1:]


def one_copied(rows):
    return rows[:2] + [rows[2].clone()] + rows[3:]


def one_changed(rows):
    return rows[:2] + [rows[2] * 2] + rows[3:]


def twice(rows):
    return rows + rows


def first_swapped(rows):
    return [rows[1], rows[0]] + rows[2:]


@pytest.mark.parametrize("chosen", [reordered, dropped, first_ones, last_ones, one_copied, one_changed, twice,
                                    first_swapped])
def test_any_other_stack_is_torch_stack_of_those_rows(chosen):
    batch = numbered()
    rows = batch_rows(batch)
    got = torch.stack(chosen(rows))
    want = torch.stack(chosen(plain_copies(rows)))
    assert type(got) is torch.Tensor and got.data_ptr() != batch.data_ptr()
    assert got.shape == want.shape and torch.equal(got, want)


def test_stacks_along_another_dim_or_into_out_run_as_torch_runs_them():
    batch = numbered()
    rows = batch_rows(batch)
    assert torch.equal(torch.stack(rows, 1), torch.stack(plain_copies(rows), 1))
    out = torch.empty(5, 3, 4, 4)   # what default_collate passes in DataLoader's worker processes
    got = torch.stack(rows, 0, out=out)
    assert got is out and torch.equal(out, batch) and out.data_ptr() != batch.data_ptr()
    assert torch.equal(torch.cat(rows), torch.cat(plain_copies(rows)))


def test_rows_are_tensors_and_ops_on_them_give_plain_tensors():
    batch = numbered()
    rows = batch_rows(batch)
    assert all(isinstance(row, torch.Tensor) and row.shape == (3, 4, 4) for row in rows)
    first, second = rows[0], rows[1]
    made = [first * 2, first.clone(), first + second, first[0], first.view(-1), torch.cat([first, second]),
            first.to(torch.float64), torch.stack([first, second]), first.unsqueeze(0),
            copy.deepcopy(first), pickle.loads(pickle.dumps(first))]
    assert all(type(t) is torch.Tensor for t in made), [type(t).__name__ for t in made]
    assert torch.equal(made[-1], batch[0]) and torch.equal(made[-2], batch[0])
    assert repr(first) == repr(batch[0]) and str(first).startswith("tensor(")
    assert first.float() is first and first.mul_(1) is first   # as torch: no new tensor, the row itself
    assert first.data_ptr() == batch.data_ptr() and second.data_ptr() == batch[1].data_ptr()   # views, no copy


def test_a_channels_last_batch_is_restacked_contiguous_as_dataloader_would():
    batch = numbered(memory_format=torch.channels_last)
    rows = batch_rows(batch)
    stacked = torch.stack(rows)
    assert stacked is not batch and stacked.is_contiguous() and torch.equal(stacked, batch)


# -- through the loader: the collate_fn gets DataLoader's result ---------------------------------


def restacked(samples):
    return default_collate(samples)


def reversed_batch(samples):
    return default_collate(samples[::-1])


def without_the_second(samples):
    return default_collate(samples[:1] + samples[2:])


def first_three(samples):
    return default_collate(samples[:3])


def doubled(samples):
    return default_collate([(image * 2, label) for image, label in samples])


def images_stacked_then_labels(samples):
    images = torch.stack([image for image, _ in samples])
    return images.sub(0.5), torch.tensor([label for _, label in samples])


@pytest.mark.parametrize("collate_fn", [restacked, reversed_batch, without_the_second, first_three, doubled,
                                        images_stacked_then_labels])
def test_collate_fns_get_dataloaders_result(cifar_root, collate_fn):  # noqa: F811
    dataset = cifar(cifar_root, train=False)
    ours = DaliLoader(dataset, 8, collate_fn=collate_fn)
    theirs = DataLoader(dataset, 8, collate_fn=collate_fn)
    batches = 0
    for (x, y), (u, v) in zip(ours, theirs, strict=True):
        assert x.shape == u.shape and x.is_contiguous() and (x - u).abs().max() <= 1e-5 and torch.equal(y, v)
        batches += 1
    assert ours.route == "dali" and batches == 3


def test_a_restacked_batch_is_the_loaders_own_memory_and_stays_as_it_was(cifar_root):  # noqa: F811
    """The fast stack hands out the loader's batch: the batches after it must not be made in it."""
    dataset = cifar(cifar_root, train=False)
    copies, kept = [], []

    def collate_fn(samples):
        images, labels = default_collate(samples)
        assert images.data_ptr() == samples[0][0].data_ptr()   # the batch itself, not a copy
        copies.append(images.clone())
        return images, labels

    for images, _ in DaliLoader(dataset, 4, collate_fn=collate_fn):
        kept.append(images)
    assert len(kept) == 6 and all(torch.equal(a, b) for a, b in zip(kept, copies, strict=True))
    assert len({images.data_ptr() for images in kept}) == len(kept)
