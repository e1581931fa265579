"""DaliLoader shaped like DataLoader: its arguments, a user's sampler and batch_sampler, a Dataset of
one's own (the Python path), and what each keeps of resume, with images that encode their index."""
import collections
import warnings

import numpy as np
import pytest
import torch
from torch.utils.data import BatchSampler, DataLoader, Dataset, DistributedSampler, WeightedRandomSampler
from torchvision.transforms import v2

from dali_loaders import DaliLoader, TorchLoader
from dali_loaders.loader import PythonPathNote
from dali_loaders.sources.arrays import ArraySource

N = 40
TO_TENSOR = v2.Compose([v2.ToImage()])


def indexed(n=N, name="indexed"):
    """n 8x8 RGB images whose pixels (0, 0) hold their index (low byte, high byte); label = index % 7."""
    images = np.zeros((n, 8, 8, 3), dtype=np.uint8)
    images[:, 0, 0, 0], images[:, 0, 0, 1] = np.arange(n) % 256, np.arange(n) // 256
    return ArraySource(images, np.arange(n) % 7, name)


def index_of(images: torch.Tensor) -> np.ndarray:
    return (images[:, 0, 0, 0].long() + 256 * images[:, 1, 0, 0].long()).numpy()


def epoch(loader):
    """(indices the images encode, labels), batch by batch, checking each label belongs to its image."""
    served = []
    for images, labels in loader:
        idx = index_of(images)
        assert np.array_equal(labels.numpy(), idx % 7), "a label on the wrong image"
        served.append(idx)
    return served


def make(dataset=None, *args, **kwargs):
    kwargs.setdefault("device", "cpu")
    kwargs.setdefault("transform", TO_TENSOR)
    return DaliLoader(indexed() if dataset is None else dataset, *args, **kwargs)


def test_dataloader_argument_order_and_shuffle_serves_each_image_once_in_a_new_order():
    loader = make(None, 6, True, seed=1, num_workers=2)   # DataLoader's positional order
    orders = [np.concatenate(epoch(loader)) for _ in range(3)]
    for order in orders:
        assert sorted(order) == list(range(N))
    assert not np.array_equal(orders[0], orders[1]) and not np.array_equal(orders[1], orders[2])
    assert len(loader) == 7 and loader.batch_size == 6 and loader.route == "dali"
    assert [len(b) for b in epoch(make(None, 6, drop_last=True))] == [6] * 6


def test_num_workers_zero_runs_as_dataloader_users_debug():
    assert np.array_equal(np.concatenate(epoch(make(None, 8, num_workers=0))), np.arange(N))


def test_a_sampler_chooses_the_order_and_set_epoch_reaches_it():
    sampler = DistributedSampler(range(N), num_replicas=2, rank=1, shuffle=True, seed=5)
    loader = make(None, 4, sampler=sampler)
    assert loader.sampler is sampler
    for e in (0, 3):
        loader.set_epoch(e)
        assert sampler.epoch == e
        assert np.concatenate(epoch(loader)).tolist() == list(iter(sampler))
    assert len(loader) == 5


@pytest.mark.parametrize("loader_class", [DaliLoader, TorchLoader])
@pytest.mark.parametrize("with_sampler", [False, True], ids=["library order", "sampler="])
def test_order_gives_the_seed_shard_and_epoch_in_progress(loader_class, with_sampler):
    sampler = DistributedSampler(range(N), num_replicas=2, rank=1, seed=5) if with_sampler else None
    loader = loader_class(indexed(), 8, shuffle=None if with_sampler else True, sampler=sampler, seed=9,
                          transform=TO_TENSOR, **({"device": "cpu"} if loader_class is DaliLoader else {}))
    assert loader.order.seed == 9 and (loader.order.shard.rank, loader.order.shard.world_size) == (0, 1)
    with pytest.raises(AttributeError):
        loader.order.seed = 1   # read-only: the loader's seed is its own
    loader.set_epoch(3)
    for expected in (3, 4):   # set_epoch starts the next one; each loop after it the one after
        assert [loader.order.epoch for _ in loader] == [expected] * len(loader)


def test_weighted_random_sampler_frequencies_follow_the_weights():
    weights = np.where(np.arange(N) < 10, 8.0, 1.0)   # the first 10 images 8x as likely
    sampler = WeightedRandomSampler(weights, num_samples=4000, replacement=True,
                                    generator=torch.Generator().manual_seed(0))
    counts = collections.Counter(np.concatenate(epoch(make(None, 100, sampler=sampler))).tolist())
    heavy = sum(counts[i] for i in range(10)) / 4000
    expected = 80 / (80 + 30)
    assert abs(heavy - expected) < 0.03, (heavy, expected)
    # a sampler ignored (the library's order instead) would serve every image once
    assert max(counts.values()) > 1


def test_a_batch_sampler_gives_batches_of_its_own_sizes():
    sizes = [3, 7, 1, 12, 5, 12]
    batches, start = [], 0
    for size in sizes:
        batches.append(list(range(start, start + size))[::-1])
        start += size
    loader = make(None, batch_sampler=batches)
    served = epoch(loader)
    assert [b.tolist() for b in served] == batches
    assert len(loader) == len(sizes) and loader.batch_size is None
    torchvision_style = BatchSampler(range(N), 9, False)
    assert [len(b) for b in epoch(make(None, batch_sampler=torchvision_style))] == [9, 9, 9, 9, 4]


@pytest.mark.parametrize("sampler_kind", ["weighted", "distributed"])
def test_resume_with_a_users_sampler_serves_the_rest_of_the_epoch_exactly(sampler_kind):
    def sampler():
        if sampler_kind == "weighted":   # draws from its own generator: not a function of the epoch
            return WeightedRandomSampler(np.ones(N), num_samples=N, replacement=True)
        return DistributedSampler(range(N), num_replicas=1, rank=0, shuffle=True, seed=2)

    first = make(None, 5, sampler=sampler(), seed=4)
    whole, state = [], None
    for k, (images, _) in enumerate(first):
        whole.append(index_of(images))
        if k == 2:
            state = first.state_dict()
    resumed = make(None, 5, sampler=sampler(), seed=4)
    resumed.load_state_dict(state)
    rest = epoch(resumed)
    assert [b.tolist() for b in rest] == [b.tolist() for b in whole[3:]]


class Squares(Dataset):
    """A Dataset of one's own: (a float image that encodes its index, the index, a name)."""

    def __len__(self):
        return 23

    def __getitem__(self, i):
        return torch.full((2, 3, 3), float(i)), i, f"item{i}"


def test_a_dataset_of_ones_own_gives_dataloaders_batches_and_says_which_path():
    with pytest.warns(PythonPathNote, match="Squares is not a dataset this library reads"):
        loader = DaliLoader(Squares(), batch_size=4, num_workers=2, device="cpu")
    assert loader.route.startswith("python")
    expected = list(DataLoader(Squares(), batch_size=4))
    got = list(loader)
    assert len(got) == len(expected) == 6
    for (images, labels, names), (e_images, e_labels, e_names) in zip(got, expected):
        assert torch.equal(images, e_images) and torch.equal(labels, e_labels) and names == e_names
    # shuffled: each item once; a collate_fn of one's own is used as DataLoader uses it
    loader = DaliLoader(Squares(), 5, shuffle=True, seed=3, device="cpu", collate_fn=lambda items: items)
    seen = [item[1] for batch in loader for item in batch]
    assert sorted(seen) == list(range(23)) and seen != list(range(23))


def test_the_python_path_resumes_at_the_next_batch():
    loader = DaliLoader(Squares(), 4, shuffle=True, seed=8, device="cpu")
    whole, state = [], None
    for k, (_, labels, _) in enumerate(loader):
        whole.append(labels.tolist())
        if k == 1:
            state = loader.state_dict()
    again = DaliLoader(Squares(), 4, shuffle=True, seed=8, device="cpu")
    again.load_state_dict(state)
    assert [labels.tolist() for _, labels, _ in again] == whole[2:]


def test_an_untranslatable_transform_takes_the_python_path_naming_the_step():
    recipe = v2.Compose([v2.ToImage(), v2.Lambda(lambda image: image.flip(-1))])
    with pytest.warns(PythonPathNote, match="Lambda"):
        loader = make(indexed(), 8, transform=recipe)
    images, labels = next(iter(loader))
    assert loader.route.startswith("python") and np.array_equal(index_of(images.flip(-1)), np.arange(8))
    assert np.array_equal(labels.numpy(), np.arange(8) % 7)   # the Lambda ran: pixel (0, 0) moved right
    twin = next(iter(TorchLoader(indexed(), 8, transform=recipe)))
    assert torch.equal(images, twin[0]) and torch.equal(labels, twin[1])


def test_dataloader_rules_for_its_arguments():
    with pytest.raises(ValueError, match="mutually exclusive"):
        make(None, 4, batch_sampler=[[0, 1]])
    with pytest.raises(ValueError, match="mutually exclusive with shuffle"):
        make(None, 4, shuffle=True, sampler=range(N))
    with pytest.raises(ValueError, match="num_workers"):
        make(None, 4, num_workers=-1)
    for seed in ("a", -1, 1.5, True):
        with pytest.raises(ValueError, match=f"seed must be a non-negative integer.*got {seed!r}"):
            make(None, 4, seed=seed)
    with pytest.raises(TypeError, match="dataset is None"):
        DaliLoader(None, 4)
    with pytest.raises(ValueError, match="collate_fn.*output='dict'.*pass one of them"):
        make(None, 4, collate_fn=lambda samples: samples, output="dict")
    with pytest.raises(TypeError, match="collate_fn must be callable"):
        make(None, 4, collate_fn="default")
    with pytest.raises(ValueError, match="even_batches"):
        make(None, 4, sampler=range(N), even_batches=True)
    # the DataLoader keywords that need no worker processes are taken
    loader = make(None, 4, pin_memory=True, persistent_workers=True, prefetch_factor=3, timeout=0,
                  generator=torch.Generator().manual_seed(9), in_order=True)
    assert loader.prefetch_factor == 3 and sorted(np.concatenate(epoch(loader))) == list(range(N))


def test_a_generator_seeds_the_order_as_seed_does():
    first = np.concatenate(epoch(make(None, 8, shuffle=True, generator=torch.Generator().manual_seed(5))))
    again = np.concatenate(epoch(make(None, 8, shuffle=True, generator=torch.Generator().manual_seed(5))))
    assert np.array_equal(first, again) and not np.array_equal(first, np.arange(N))


def test_a_generator_is_drawn_from_at_the_first_pass_as_random_sampler_draws():
    """Two loaders sharing one generator get different orders, as two DataLoaders would; making
    a loader leaves the generator as it was, the first pass draws from it."""
    shared = torch.Generator().manual_seed(5)
    first, second = (make(None, 8, shuffle=True, generator=shared) for _ in range(2))
    untouched = torch.Generator().manual_seed(5).get_state()
    assert torch.equal(shared.get_state(), untouched)
    orders = [np.concatenate(epoch(loader)) for loader in (first, second)]
    assert not torch.equal(shared.get_state(), untouched)
    assert not np.array_equal(orders[0], orders[1])
    assert all(sorted(order) == list(range(N)) for order in orders)
    # the twin draws its seed from the generator first too (DataLoader draws its workers' seed after)
    twin = TorchLoader(indexed(), 8, shuffle=True, generator=torch.Generator().manual_seed(5), transform=TO_TENSOR)
    assert np.array_equal(np.concatenate(epoch(twin)), orders[0])


def test_torchs_reproducibility_recipe_runs_unchanged_its_worker_init_fn_not_called():
    """worker_init_fn=seed_worker, generator=g (torch's docs): no worker process on the DALI path,
    as none with DataLoader's num_workers=0, so the function is not called; said once."""
    called = []

    def seed_worker(worker_id):
        called.append(worker_id)

    orders = []
    for _ in range(2):
        with pytest.warns(UserWarning, match="worker_init_fn is not called"):
            loader = make(None, 6, True, num_workers=2, worker_init_fn=seed_worker,
                          generator=torch.Generator().manual_seed(0))
        orders.append(np.concatenate(epoch(loader)))
    assert called == [] and np.array_equal(orders[0], orders[1])


def test_torch_manual_seed_makes_an_unseeded_order_reproducible_as_in_dataloader():
    orders = []
    for seed in (0, 0, 1):
        torch.manual_seed(seed)
        orders.append(np.concatenate(epoch(make(None, 6, True))))
    assert np.array_equal(orders[0], orders[1]) and not np.array_equal(orders[0], orders[2])
    assert sorted(orders[2]) == list(range(N))


def test_images_of_several_sizes_without_a_resize_are_named_with_the_fix(tmp_path):
    """A recipe that leaves the images' own sizes: DataLoader's stack fails, and so does DALI's
    batch, saying what to add instead of DALI's assertion."""
    from PIL import Image
    from torchvision.datasets import ImageFolder

    (tmp_path / "a").mkdir()
    for k, size in enumerate([(20, 16), (24, 18)]):
        Image.new("RGB", size).save(tmp_path / "a" / f"{k}.png")
    dataset = ImageFolder(str(tmp_path), transform=TO_TENSOR)
    with pytest.raises(RuntimeError, match="stack expects each tensor to be equal size"):
        next(iter(torch.utils.data.DataLoader(dataset, batch_size=2)))
    with pytest.raises(RuntimeError, match=r"^the images of a batch came out in different sizes.*Resize\(\(h, w\)\)"):
        next(iter(DaliLoader(dataset, batch_size=2, device="cpu")))


def test_torchs_device_names_are_read_as_the_loaders():
    from dali_loaders.loader.options import torch_device

    assert torch_device(torch.device("cpu"), None) == ("cpu", None)
    assert torch_device("cuda", None) == ("gpu", None) and torch_device("cuda:1", None) == ("gpu", 1)
    assert torch_device(torch.device("cuda", 2), 2) == ("gpu", 2) and torch_device("gpu", 0) == ("gpu", 0)
    with pytest.raises(ValueError, match="name two GPUs"):
        torch_device("cuda:1", 0)
    with pytest.raises(ValueError, match="CPU or on a CUDA GPU"):
        torch_device(torch.device("meta"), None)
    assert sorted(np.concatenate(epoch(make(None, 8, device=torch.device("cpu"))))) == list(range(N))


def test_a_state_from_another_dali_version_is_refused_naming_both():
    loader = make(None, 4, shuffle=True, seed=2)
    iterator = iter(loader)
    next(iterator)
    next(iterator)
    state = loader.state_dict()
    assert state["versions"]["dali"] and state["dali"] is not None
    state["versions"] = dict(state["versions"], dali="1.0.0")
    with pytest.raises(ValueError, match=r"saved under dali 1\.0\.0, and this is dali \d"):
        make(None, 4, shuffle=True, seed=2).load_state_dict(state)


def test_a_second_loop_over_one_loader_is_named_not_garbled():
    loader = make(None, 4)
    first = iter(loader)
    next(first)
    second = iter(loader)
    assert index_of(next(second)[0]).tolist() == [0, 1, 2, 3]
    with pytest.raises(RuntimeError, match="overtaken by a newer loop"):
        next(first)
    assert len(list(second)) == len(loader) - 1


def test_transform_given_twice_is_refused_and_a_dataset_without_one_takes_transform():
    from torchvision.datasets import FakeData

    with pytest.raises(ValueError, match="transform of its own and transform= was passed too"):
        DaliLoader(FakeData(size=4, image_size=(3, 8, 8), transform=v2.ToImage()), 2, device="cpu",
                   transform=v2.ToImage())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PythonPathNote)
        loader = DaliLoader(FakeData(size=4, image_size=(3, 8, 8)), 2, device="cpu", transform=v2.ToImage())
    assert next(iter(loader))[0].shape == (2, 3, 8, 8)   # transform= applied where the dataset has none


def test_an_iterable_dataset_is_refused_by_both_loaders_saying_what_to_pass():
    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter([(torch.zeros(3, 4, 4), 0)] * 4)

        def __len__(self):   # a length does not make it indexable
            return 4

    for make in (DaliLoader, TorchLoader):
        with pytest.raises(TypeError, match=r"Stream is an IterableDataset.*picks samples by index.*map-style"):
            make(Stream(), 2)


def test_the_twin_passes_batches_that_are_not_pairs_through():
    class Named(Dataset):
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return {"x": torch.full((2,), float(i)), "i": i}

    batches = list(TorchLoader(Named(), 2))
    assert [b["i"].tolist() for b in batches] == [[0, 1], [2, 3], [4]]
