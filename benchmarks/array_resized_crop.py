"""`python -m benchmarks.array_resized_crop`: images/s of RandomResizedCrop on images already
in memory (CIFAR-sized arrays, as SimCLR's and MoCo's CIFAR recipes crop them): the window
cut, then resized by the library's resize operator (PIL's arithmetic). Set
DALI_LOADERS_NO_PLUGIN=1 to measure it without the library's operators (DALI's resize).

One loader, built once, a warm-up epoch, then whole epochs; each epoch's rate is printed.
"""
import argparse
import time


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.array_resized_crop", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=20000)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=3, help="measured epochs, after a warm-up one")
    args = parser.parse_args(argv)

    import numpy as np
    import torch
    from torchvision.transforms import v2

    from dali_loaders.loader import dali_loader
    from dali_loaders.sources.arrays import ArraySource

    pixels = np.random.default_rng(0).integers(0, 256, (args.images, 32, 32, 3), dtype=np.uint8)
    source = ArraySource(pixels, np.zeros(args.images, np.int64), "random 32 x 32")
    transform = v2.Compose([v2.RandomResizedCrop(32), v2.RandomHorizontalFlip(), v2.ToImage(),
                            v2.ToDtype(torch.float32, scale=True), v2.Normalize([0.5] * 3, [0.25] * 3)])
    loader = dali_loader(source, transform, train=True, batch_size=args.batch_size, num_threads=args.threads)
    for epoch in range(args.epochs + 1):
        start = time.perf_counter()
        count = sum(len(labels) for _, labels in loader)
        if epoch:
            print(f"epoch {epoch}: {count / (time.perf_counter() - start):,.0f} images/s", flush=True)


if __name__ == "__main__":
    main()
