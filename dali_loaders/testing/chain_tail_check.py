"""`python -m dali_loaders.testing.chain_tail_check [--device gpu|cpu]`: the AutoAugment
family's chain with its pixel stages in DaliLoadersChainTail against the same chain in DALI's
operators, on the same images and the same drawn rows, pixel for pixel: a table, exit 1 on any
difference. On a GPU it is the check the GPU operator must pass before GPU graphs use it unasked
(ops/chain_tail.py); on the CPU, the same machinery (the tests run it)."""
import argparse
import contextlib
import sys
from typing import Dict, List, Tuple

import numpy as np

from .. import switches

BATCH, HEIGHT, WIDTH = 64, 45, 52


def _steps() -> Dict[str, object]:
    from torchvision.transforms import v2

    from ..transforms import fused

    steps = {"TrivialAugmentWide": (v2.TrivialAugmentWide(), fused.trivial_augment_slots),
             "RandAugment(2, 13), bilinear, fill 90": (
                 v2.RandAugment(num_ops=2, magnitude=13, interpolation=v2.InterpolationMode.BILINEAR, fill=[90]),
                 fused.rand_augment_slots),
             "AutoAugment SVHN": (v2.AutoAugment(v2.AutoAugmentPolicy.SVHN), fused.auto_augment_slots)}
    try:   # timm's: posterize by bits and solarize-add are its stages alone
        from timm.data import auto_augment as timm_aa
    except ImportError:
        return steps
    hparams = dict(translate_const=9, img_mean=(124, 116, 104))
    steps["timm rand-m9-mstd0.5-inc1"] = (timm_aa.rand_augment_transform("rand-m9-mstd0.5-inc1", hparams), None)
    steps["timm AutoAugment original"] = (timm_aa.auto_augment_transform("original", dict(hparams)), None)
    return steps


@contextlib.contextmanager
def stages_in_operator(on: bool):
    """DALI_LOADERS_CHAIN_TAIL set to ask for the operator, or not, meanwhile."""
    from ..ops import chain_tail

    with switches.overridden(chain_tail.ENV, "1" if on else "0"):
        yield


def _images(seed: int) -> List[np.ndarray]:
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:HEIGHT, 0:WIDTH]
    base = np.stack([x * 5, y * 6, (x + y) * 3], axis=-1)[None] + rng.integers(0, 60, (BATCH, 1, 1, 3))
    return list(np.clip(base + rng.integers(-25, 26, (BATCH, HEIGHT, WIDTH, 3)), 0, 255).astype(np.uint8))


def _run(step, make_slots, kind: str, device: str, seed: int, images: List[np.ndarray]) -> np.ndarray:
    """The chain on `images`, sample i on a row of the step's table drawn from `seed` (or none)."""
    from nvidia.dali import fn, pipeline_def

    from ..transforms import Images, augment_chain, augment_ops

    rows = []   # made once the table is known; DALI asks for them when the pipeline runs

    @pipeline_def(batch_size=BATCH, num_threads=2, device_id=0 if device == "gpu" else None, seed=3 + seed)
    def pipe():
        data = fn.external_source(source=lambda: images, batch=True, layout="HWC")
        row = fn.external_source(source=lambda: rows, batch=True)
        pictures = Images(data.gpu() if device == "gpu" else data, HEIGHT, WIDTH, 3, device, kind=kind)
        if make_slots is None:   # timm's: its own draws (the same in both graphs: made before the chain)
            from ..transforms import timm as timm_translators
            from ..transforms import timm_chain, timm_fused

            ops = timm_fused.flat_ops(step)
            slots = len(timm_fused.slot_indices(step))
            rng = np.random.default_rng(seed)   # the draws given, the same in both graphs
            drawn = [rng.integers(0, len(ops), (BATCH, slots)).astype(np.int32),
                     rng.random((BATCH, slots, 3), dtype=np.float32), rng.standard_normal((BATCH, slots), np.float32)]
            rows.extend(np.int32(0) for _ in range(BATCH))
            given = [fn.external_source(source=_constant(list(d)), batch=True) for d in drawn]
            indices = [given[0][k] for k in range(slots)]
            fill = timm_translators.fill_of([o for o in ops if o is not None])
            timm_chain.apply(step, pictures, timm_chain.graph_draws(step, pictures, indices, given[1], given[2]),
                             timm_translators.warp(fill))
            return pictures.data
        table, _ = make_slots(step, pictures)
        drawn = np.random.default_rng(seed).integers(-1, len(table.labels), BATCH)
        rows.extend(np.int32(r) for r in drawn)
        values = augment_chain.parameter_rows(step, pictures, table)
        present = {name for name, _ in table.labels}
        augment_chain.chain(pictures, augment_chain.gathered(augment_chain.constant_table(values), row), present,
                            augment_ops.warp(pictures, step, lambda matrix: matrix))
        return pictures.data

    pipeline = pipe()
    pipeline.build()
    (out,) = pipeline.run()
    out = out.as_cpu() if device == "gpu" else out
    return np.stack([np.array(t) for t in out])


def _constant(values):
    """An external_source callback giving `values` each time (one without a parameter: DALI
    passes one to a callback that has one)."""
    return lambda: values


def compare(device: str = "gpu") -> List[Tuple[str, str, int, float]]:
    """(step, kind, largest difference in levels, fraction of pixels that differ) per case."""
    from ..ops import chain_tail, plugin

    if not plugin.chain_available() or (device == "gpu" and not plugin.gpu_operator_loaded(plugin.CHAIN.schema)):
        raise RuntimeError(f"DaliLoadersChainTail is not built for {device} here")
    results = []
    for k, (name, (step, make_slots)) in enumerate(_steps().items()):
        for kind in (("pil", "tensor") if make_slots is not None else ("pil",)):
            images = _images(k)
            with stages_in_operator(False):
                reference = _run(step, make_slots, kind, device, k, images)
            with stages_in_operator(True):
                assert chain_tail.usable(device), "the operator is not used"
                in_operator = _run(step, make_slots, kind, device, k, images)
            difference = np.abs(in_operator.astype(int) - reference.astype(int))
            results.append((name, kind, int(difference.max()), float((difference > 0).mean())))
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("gpu", "cpu"), default="gpu")
    args = parser.parse_args(argv)
    results = compare(args.device)
    print(f"DaliLoadersChainTail against DALI's operators ({args.device}), {BATCH} images of {WIDTH} x {HEIGHT}")
    print("| step | images | largest difference | pixels that differ |")
    print("| --- | --- | ---: | ---: |")
    for name, kind, largest, fraction in results:
        print(f"| {name} | {kind} | {largest} | {fraction:.4%} |")
    same = all(largest == 0 for _, _, largest, _ in results)
    print("PASS: the same pixels" if same else "FAIL: the pixels differ")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
