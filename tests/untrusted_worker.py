"""Runs each file of a folder alone through both backends' image-folder loaders, in its own
process (a crash or a hang fails the test that started it, not the test run), and writes
what happened to each as JSON: python untrusted_worker.py FOLDER OUT.json"""
import json
import os
import shutil
import sys
import tempfile

import numpy as np
from PIL import Image
from torchvision.transforms import v2

from dali_loaders import (
    ImageDecodeError,
    get_imagefolder_iter_dali,
    get_imagefolder_iter_torch,
)


def pil_reference(path):
    """PIL's RGB decode of the file (what torchvision's ImageFolder serves), or None."""
    try:
        with Image.open(path) as image:
            return np.asarray(image.convert("RGB"))
    except Exception:  # PIL raises many kinds on bad files: then there is nothing to compare
        return None


def outcome(factory, root, reference):
    """["decoded", max |difference| from PIL or -1 if PIL cannot decode it],
    ["refused", message] (ImageDecodeError), or ["other", what was raised]."""
    try:
        images = [x for x, _ in factory(root, 1, False, 1, transform=v2.PILToTensor())]
    except ImageDecodeError as e:
        return ["refused", str(e)]
    except Exception as e:  # anything else is a failure the test reports
        return ["other", f"{type(e).__name__}: {e}"]
    served = images[0][0].permute(1, 2, 0).numpy().astype(int)
    if reference is None or reference.shape != served.shape:
        return ["decoded", -1]
    return ["decoded", int(np.abs(served - reference).max())]


def main(folder, out):
    results = {}
    for name in sorted(os.listdir(folder)):
        with tempfile.TemporaryDirectory() as root:
            os.makedirs(os.path.join(root, "c"))
            shutil.copy(os.path.join(folder, name), os.path.join(root, "c", name))
            reference = pil_reference(os.path.join(folder, name))
            results[name] = {backend: outcome(factory, root, reference) for backend, factory in
                             (("dali", get_imagefolder_iter_dali), ("torch", get_imagefolder_iter_torch))}
        with open(out, "w") as f:   # after each file: a crash still leaves the files done
            json.dump(results, f)


if __name__ == "__main__":
    main(*sys.argv[1:])
