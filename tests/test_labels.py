"""Labels beyond one integer from a folder name: target_transform as torchvision calls it,
labels from a callable on the path, text and multi-integer label files, and fixed-length
sequence labels (B, L) with lengths, on both backends, each label on its own image."""
import os

import pytest
import torch
from image_data import image_id, solid_colour, write_solid_folder
from PIL import Image
from torchvision.datasets import ImageFolder
from torchvision.transforms import v2

from dali_loaders import (
    DaliLoader,
    get_files_iter_dali,
    get_files_iter_torch,
    get_imagefolder_iter_dali,
    get_imagefolder_iter_torch,
)

TO_FLOAT = v2.Compose([v2.Resize((16, 16)), v2.ToImage(), v2.ToDtype(torch.float32, scale=True)])
ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"
BACKENDS = [pytest.param(get_files_iter_dali, 1, id="dali"), pytest.param(get_files_iter_torch, 0, id="torch")]


def ids_of(images: torch.Tensor) -> list:
    return [image_id((image * 255).mean(dim=(1, 2)).tolist()) for image in images]


def word_of(image_index: int) -> str:
    """A different word, 2 to 5 characters long, for each image."""
    return "".join(ALPHABET[(image_index * 7 + k * 3) % len(ALPHABET)] for k in range(2 + image_index % 4))


@pytest.fixture(scope="module")
def words_dir(tmp_path_factory):
    """Flat-colour image i saved as <word_of(i)>.png: its label is in its name, its index in its pixels."""
    root = str(tmp_path_factory.mktemp("words"))
    for i in range(19):
        Image.new("RGB", (20 + i, 24), solid_colour(i)).save(os.path.join(root, f"{word_of(i)}.png"))
    return root


@pytest.fixture(scope="module")
def solid_dir(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("solid"))
    write_solid_folder(root, {"cat": 5, "dog": 4, "eel": 4})
    return root


def encode(word: str) -> list:
    return [ALPHABET.index(c) + 1 for c in word]


def check_sequences(batches, length):
    """Every image once, its label its own word padded with 0s, its length the word's."""
    seen = []
    for images, labels, lengths in batches:
        assert labels.dtype == lengths.dtype == torch.int64 and labels.shape == (len(images), length)
        for i, label, n in zip(ids_of(images), labels.tolist(), lengths.tolist()):
            word = encode(word_of(i))
            assert n == len(word) and label == word + [0] * (length - len(word))
            seen.append(i)
    assert sorted(seen) == list(range(19))
    return seen


@pytest.mark.parametrize("make, threads", BACKENDS)
def test_sequence_labels_from_the_file_name(words_dir, make, threads):
    loader = make(words_dir, 4, True, threads, label_fn=lambda p: os.path.splitext(os.path.basename(p))[0],
                  alphabet=ALPHABET, transform=TO_FLOAT, seed=2)
    assert check_sequences(loader, 5) != check_sequences(loader, 5)   # two epochs, two orders
    fixed = make(words_dir, 4, False, threads, label_fn=lambda p: os.path.basename(p)[:-4],
                 alphabet=ALPHABET, label_length=7, transform=TO_FLOAT)
    check_sequences(fixed, 7)


def test_both_backends_serve_the_same_order_and_labels(words_dir):
    kwargs = dict(label_fn=lambda p: os.path.basename(p)[:-4], alphabet=ALPHABET, transform=TO_FLOAT, seed=5)
    for (a, la, na), (b, lb, nb) in zip(get_files_iter_dali(words_dir, 6, True, 1, **kwargs),
                                        get_files_iter_torch(words_dir, 6, True, 0, **kwargs), strict=True):
        assert ids_of(a) == ids_of(b) and torch.equal(la, lb) and torch.equal(na, nb)


def test_resume_keeps_each_label_on_its_image(words_dir):
    kwargs = dict(label_fn=lambda p: os.path.basename(p)[:-4], alphabet=ALPHABET, transform=TO_FLOAT, seed=9)
    loader = get_files_iter_dali(words_dir, 4, True, 1, **kwargs)
    epoch = iter(loader)
    first = next(epoch)
    state = loader.state_dict()
    rest = list(epoch)
    again = get_files_iter_dali(words_dir, 4, True, 1, **kwargs)
    again.load_state_dict(state)
    resumed = list(again)
    assert [ids_of(b[0]) for b in resumed] == [ids_of(b[0]) for b in rest]
    check_sequences([first] + resumed, 5)


def test_sequence_labels_in_dict_output(words_dir):
    loader = get_files_iter_dali(words_dir, 8, False, 1, label_fn=lambda p: os.path.basename(p)[:-4],
                                 alphabet=ALPHABET, transform=TO_FLOAT, output="dict")
    check_sequences([(b["data"], b["label"], b["label_length"]) for [b] in loader], 5)


def test_a_subset_of_files_labelled_by_a_table_keeps_its_table_and_a_concat_is_refused(words_dir):
    """Their DALI labels are rows of a table: cut, the rows keep their table (each image its own
    word); joined, two tables would clash, so that is refused rather than relabelled."""
    from torch.utils.data import ConcatDataset, Subset

    source = get_files_iter_dali(words_dir, 4, False, 1, label_fn=lambda p: os.path.basename(p)[:-4],
                                 alphabet=ALPHABET, transform=TO_FLOAT).dataset
    picked = [7, 2, 11, 0, 18]
    (images, labels, lengths), = list(DaliLoader(Subset(source, picked), 5, transform=TO_FLOAT))
    ids = ids_of(images)
    assert ids == ids_of_files(source, picked)   # in the Subset's order
    for i, label, n in zip(ids, labels.tolist(), lengths.tolist()):
        word = encode(word_of(i))
        assert n == len(word) and label[:n] == word and not any(label[n:])
    with pytest.raises(TypeError, match="ConcatDataset of this library's sources: .*table of its own"):
        DaliLoader(ConcatDataset([source, source]), 2, transform=TO_FLOAT)


def ids_of_files(source, positions) -> list:
    """The ids the images at these positions of the source say (read with PIL)."""
    return [image_id(Image.open(source.files[k]).convert("RGB").getpixel((0, 0))) for k in positions]


def test_label_file_with_text_and_with_several_integers(words_dir, tmp_path):
    names = sorted(os.listdir(words_dir))
    text = tmp_path / "text.txt"
    text.write_text("".join(f"{name} {name[:-4]}\n" for name in names))
    loader = get_files_iter_dali(words_dir, 5, False, 1, label_file=str(text), alphabet=ALPHABET, transform=TO_FLOAT)
    check_sequences(loader, 5)
    numbers = tmp_path / "numbers.txt"
    numbers.write_text("".join(f"{name} {' '.join(map(str, encode(name[:-4])))}\n" for name in names))
    check_sequences(get_files_iter_torch(words_dir, 5, False, 0, label_file=str(numbers), transform=TO_FLOAT), 5)


@pytest.mark.parametrize("make, threads", BACKENDS)
def test_one_integer_from_a_callable(solid_dir, make, threads):
    """label_fn returning an int: labels (B,), each the image's own (here its index * 3)."""
    paths = sorted(os.path.join(here, n) for here, _, names in os.walk(solid_dir) for n in names)
    index_of = {p: i for i, p in enumerate(paths)}
    loader = make(paths, 4, True, threads, label_fn=lambda p: index_of[p] * 3, transform=TO_FLOAT, seed=1)
    seen = []
    for images, labels in loader:
        assert labels.shape == (len(images),)
        ids = ids_of(images)
        assert labels.tolist() == [i * 3 for i in ids]
        seen += ids
    assert sorted(seen) == list(range(13))


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(label_fn=lambda p: "ab"), ValueError, "pass alphabet="),
    (dict(label_fn=lambda p: "a!", alphabet=ALPHABET), ValueError, r"characters \['!'\]"),
    (dict(label_fn=lambda p: [1, 2, 3, 4, 5, 6], label_length=5), ValueError, "longer than label_length=5"),
    (dict(label_fn=lambda p: -1), ValueError, "negative"),
    (dict(), ValueError, "exactly one of label_fn"),
])
def test_bad_labels_name_the_file(words_dir, kwargs, error, match):
    with pytest.raises(error, match=match):
        get_files_iter_dali(words_dir, 4, False, 1, transform=TO_FLOAT, **kwargs)


# -- target_transform, against torchvision's ImageFolder -----------------------------------

def one_hot_times_ten(label: int) -> torch.Tensor:
    return torch.nn.functional.one_hot(torch.tensor(label), 3) * 10


@pytest.mark.parametrize("make, threads", [(get_imagefolder_iter_dali, 1), (get_imagefolder_iter_torch, 0)])
@pytest.mark.parametrize("target_transform", [one_hot_times_ten, lambda y: 2 - y])
def test_target_transform_as_imagefolder_calls_it(solid_dir, make, threads, target_transform):
    reference = ImageFolder(solid_dir, target_transform=target_transform)
    loader = make(solid_dir, 4, True, threads, seed=6, transform=TO_FLOAT, target_transform=target_transform)
    seen = []
    for images, labels in loader:
        ids = ids_of(images)
        expected = torch.stack([torch.as_tensor(reference[i][1]) for i in ids])
        assert torch.equal(labels, expected)
        seen += ids
    assert sorted(seen) == list(range(13))


@pytest.mark.parametrize("make, threads", [(get_imagefolder_iter_dali, 1), (get_imagefolder_iter_torch, 0)])
def test_target_transform_to_class_names_gives_dataloaders_tuple(solid_dir, make, threads):
    reference = ImageFolder(solid_dir)
    loader = make(solid_dir, 4, True, threads, seed=6, transform=TO_FLOAT, target_transform=lambda y: f"class {y}")
    for images, labels in loader:
        assert type(labels) is tuple   # as DataLoader's default_collate hands back strings
        assert list(labels) == [f"class {reference[i][1]}" for i in ids_of(images)]


def test_target_transform_refuses_batch_transform(solid_dir):
    with pytest.raises(ValueError, match="batch_transform"):
        get_imagefolder_iter_dali(solid_dir, 4, True, 1, transform=TO_FLOAT, target_transform=lambda y: y,
                                  batch_transform=v2.MixUp(num_classes=3))


def test_image_folder_label_file_points_to_the_files_factory(words_dir, tmp_path):
    name = sorted(os.listdir(words_dir))[0]
    for line, match in ((f"{name} a3kx\n", "text labels: get_files_iter_dali"),
                        (f"{name} 1 2 3\n", "has several labels")):
        (tmp_path / "labels.txt").write_text(line)
        with pytest.raises(ValueError, match=match):
            get_imagefolder_iter_dali(words_dir, 4, False, 1, label_file=str(tmp_path / "labels.txt"))
