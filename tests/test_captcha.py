"""The captcha project's needs: examples/captcha.py (text labels, a CRNN with CTC, a Lightning
DataModule with use_dali) runs; DataModules take a transform per split and num_workers=."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import torch
from cifar_data import write_cifar
from PIL import Image
from subprocess_env import subprocess_env
from torchvision.transforms import v2

pytest.importorskip("pytorch_lightning")
from dali_loaders.lightning import CIFAR10DataModule, FilesDataModule  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "examples"))
import captcha  # noqa: E402


@pytest.fixture(scope="module")
def captchas(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("captcha"))
    captcha.make_captchas(os.path.join(root, "train"), 24, seed=0)
    captcha.make_captchas(os.path.join(root, "val"), 8, seed=1)
    return root


@pytest.mark.subprocess
def test_captcha_example_trains_a_few_steps_on_dali(captchas):
    done = subprocess.run([sys.executable, os.path.join(REPO, "examples", "captcha.py"), "--root", captchas,
                           "--use_dali", "--max_steps", "3", "--batch-size", "8", "--num_workers", "1"],
                          capture_output=True, text=True, timeout=600, env=subprocess_env())
    assert done.returncode == 0, done.stderr[-3000:]
    line = done.stdout.strip().splitlines()[-1]
    found = re.fullmatch(r"loader=DaliLoader steps=(\d+) train_loss=([\d.]+) val_loss=([\d.]+) val_exact=[\d.]+%",
                         line)
    assert found and int(found[1]) == 3, line
    assert 0 < float(found[2]) < 100 and 0 < float(found[3]) < 100


@pytest.mark.parametrize("use_dali", [True, False])
def test_captcha_datamodule_serves_each_text_with_its_image(captchas, use_dali):
    """Each batch's labels spell the words in the names of the very images it holds: the
    loader reads no names, so each word is checked against the image's own pixels."""
    module = FilesDataModule(os.path.join(captchas, "train"), 8, val_root=os.path.join(captchas, "val"),
                             use_dali=use_dali, num_workers=0, label_fn=captcha.text_of,
                             alphabet=captcha.ALPHABET, label_length=5, val_transform=v2.Compose(
                                 [v2.ToImage(), v2.ToDtype(torch.float32, scale=True)]))
    folder = os.path.join(captchas, "val")
    by_pixels = {np.asarray(Image.open(os.path.join(folder, n)).convert("RGB")).tobytes(): captcha.text_of(n)
                 for n in os.listdir(folder)}
    words = []
    for images, labels, lengths in module.val_dataloader():
        for image, label, n in zip(images, labels.tolist(), lengths.tolist()):
            pixels = (image * 255).round().byte().permute(1, 2, 0).numpy().tobytes()
            word = "".join(captcha.ALPHABET[c - 1] for c in label[:n])
            assert by_pixels[pixels] == word and all(c == 0 for c in label[n:])
            words.append(word)
    assert sorted(words) == sorted(by_pixels.values())


def test_datamodule_transform_per_split_and_num_workers(tmp_path):
    root = write_cifar(str(tmp_path), n_train=20, n_test=10)
    small, large = v2.Compose([v2.Resize(8), v2.PILToTensor()]), v2.Compose([v2.Resize(16), v2.PILToTensor()])
    for use_dali in (True, False):
        module = CIFAR10DataModule(root, 5, use_dali=use_dali, num_workers=0, train_transform=small,
                                   val_transform=large, test_transform=v2.PILToTensor())
        shapes = {split: tuple(next(iter(module.loader(split)))[0].shape[2:]) for split in ("train", "val", "test")}
        assert shapes == {"train": (8, 8), "val": (16, 16), "test": (32, 32)}
    twin = CIFAR10DataModule(root, 5, use_dali=False, num_workers=2).train_dataloader()
    assert twin.num_workers == 2
    with pytest.raises(ValueError, match="not both"):
        CIFAR10DataModule(root, 5, num_workers=1, num_threads=1)
