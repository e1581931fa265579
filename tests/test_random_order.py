"""RandomOrder (v1 and v2) translated into DALI: every output is torchvision's for one order
of the steps (each order applied by torchvision to the same image), and the orders come at
the twin's rates, uniform; on CPU graphs in the augmentation operator and, without it, through
DALI's conditionals."""
import itertools

import numpy as np
import pytest
import torch
from test_transforms import C, both, close, flat
from torchvision import transforms as v1
from torchvision.transforms import v2

from dali_loaders import transforms

pytest.importorskip("nvidia.dali")


def steps_of(api):
    """Three steps whose order shows on a flat grey image of 200 (solarize, halve, invert)."""
    return [api.RandomSolarize(128, p=1.0), api.ColorJitter(brightness=(0.5, 0.5)), api.RandomInvert(1.0)]


def order_rates(outputs, steps, image):
    """Each output's order (a value several orders make counts for all of them, shared), as
    the share of outputs per order; fails on an output no order makes."""
    from PIL import Image

    made = {}
    for order in itertools.permutations(range(len(steps))):
        pil = Image.fromarray(image)
        for k in order:
            pil = steps[k](pil)
        made.setdefault(np.asarray(pil).tobytes(), []).append(order)
    counts = dict.fromkeys(itertools.permutations(range(len(steps))), 0.0)
    for output in outputs:
        key = np.ascontiguousarray(output.astype(np.uint8)).tobytes()
        assert key in made, "an output that no order of the steps makes"
        for order in made[key]:
            counts[order] += 1.0 / len(made[key])
    return np.array(list(counts.values())) / len(outputs)


@pytest.mark.parametrize("api", [v1, v2], ids=["v1", "v2"])
def test_each_order_at_its_rate(api, augment_path):
    image = flat((200, 200, 200))
    steps = steps_of(api)
    transform = api.Compose([api.RandomOrder(steps), api.PILToTensor()])
    ours, theirs = (order_rates(outputs, steps, image) for outputs in both(image, transform))
    for k in range(6):
        close(ours[k], theirs[k], 0.1, f"order {k}")
        assert abs(ours[k] - 1 / 6) < 0.07, ours


def test_inside_random_apply_the_order_is_drawn_where_applied(augment_path):
    image = flat((200, 200, 200))
    transform = C(v2.RandomApply([v2.RandomOrder(steps_of(v2)[:2])], p=0.5), v2.PILToTensor())
    for outputs in both(image, transform):
        values = np.array([int(o[0, 0, 0]) for o in outputs])
        assert set(values) == {200, 27, 100}   # not applied; solarize first; halve first
        assert abs((values == 200).mean() - 0.5) < 0.1 and abs((values == 27).mean() - 0.25) < 0.08


def test_more_than_four_transforms_take_the_python_path_saying_why():
    step = v2.RandomOrder([v2.RandomInvert(1.0)] * 5)
    with pytest.raises(ValueError, match="RandomOrder: 5 transforms"):
        transforms.plan(step, python_fallback=False)


def test_a_step_that_changes_the_type_is_refused_by_name():
    with pytest.raises(ValueError, match="ToDtype inside it"):
        transforms.plan(v2.RandomOrder([v2.RandomInvert(1.0), v2.ToDtype(torch.float32, scale=True)]),
                        python_fallback=False)
