"""`python -m benchmarks.first_build`: how long a TrivialAugmentWide CIFAR loader takes to
its first batch in a fresh process (graph definition and build included), and a later epoch's
first batch (the aim: at most 2 s on a 2-core machine)."""
import argparse
import tempfile
import time


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.first_build", description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    from dali_loaders.testing.synthetic import write_cifar

    with tempfile.TemporaryDirectory(prefix="first_build_") as folder:   # nothing left in /tmp
        measure(write_cifar(folder, n_train=512, n_test=64), args.threads)


def measure(root: str, threads: int) -> None:
    import torch
    from torchvision.transforms import v2

    from dali_loaders import get_cifar_iter_dali

    recipe = v2.Compose([v2.RandomCrop(32, padding=4), v2.RandomHorizontalFlip(), v2.TrivialAugmentWide(),
                         v2.ToImage(), v2.ToDtype(torch.float32, scale=True), v2.Normalize([0.5] * 3, [0.25] * 3)])
    start = time.perf_counter()
    loader = get_cifar_iter_dali("train", root, 64, threads, seed=0, transform=recipe)
    epoch = iter(loader)
    next(epoch)
    first = time.perf_counter() - start
    for _ in epoch:
        pass
    start = time.perf_counter()
    next(iter(loader))
    later = time.perf_counter() - start
    fused = b"DaliLoadersAugment" in loader.pipeline.serialize()
    print(f"first loader's first batch: {first:.2f} s; a later epoch's first batch: {later:.3f} s; "
          f"fused augment operator: {'yes' if fused else 'no (the conditional path)'}")


if __name__ == "__main__":
    main()
