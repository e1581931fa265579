"""`python -m benchmarks.v2_steps`: images/s of recipes holding torchvision v2's detection-style
steps (RandomPhotometricDistort, GaussianNoise, ElasticTransform, RandomShortestSize, RandomZoomOut),
RandomRotation, reflect padding, colour steps and rotations after the conversion to float, TenCrop (its crops as a tuple, or stacked by v1's Lambda), LinearTransformation (a whitening matrix of CIFAR's size, 3072 x 3072), ResNet-50's
weights.transforms() and timm's keep-ratio training crop (create_transform(train_crop_mode="rkrr"),
where timm is installed), DaliLoader against torch's DataLoader over the same ImageFolder and transform object.

Each loader is built once, as its users run it (DataLoader with persistent workers, as many as
`--workers`; DaliLoader with as many threads), takes a warm-up epoch, then whole epochs in
turns, round after round; the medians and their ratio are printed.
"""
import argparse
import os
import statistics
import time


def recipes() -> dict:
    """{name: the v2 steps} of each workload: a plain crop for reference, then each new step."""
    import torch
    from torchvision import transforms as v1
    from torchvision.models import ResNet50_Weights
    from torchvision.transforms import v2

    to_float = [v2.ToImage(), v2.ToDtype(torch.float32, scale=True)]
    normalize = v2.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
    normalize_v1 = v1.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
    crop = [v2.RandomResizedCrop(224), v2.RandomHorizontalFlip()]
    side = 3 * 32 * 32   # a ZCA matrix's: any fixed matrix costs the same
    matrix = torch.randn(side, side, generator=torch.Generator().manual_seed(0)) / side ** 0.5
    return {
        "crop, flip": crop + to_float + [normalize],
        "+ ColorJitter(0.4, 0.4, 0.4, 0.1)": crop + [v2.ColorJitter(0.4, 0.4, 0.4, 0.1)] + to_float + [normalize],
        "+ RandomPhotometricDistort()": crop + [v2.RandomPhotometricDistort()] + to_float + [normalize],
        "+ GaussianNoise() on floats": crop + to_float + [v2.GaussianNoise(), normalize],
        "+ RandomApply(ColorJitter), RandomGrayscale on floats": crop + to_float + [
            v2.RandomApply([v2.ColorJitter(0.4, 0.4, 0.4, 0.1)], p=0.8), v2.RandomGrayscale(0.2), normalize],
        "+ ElasticTransform()": crop + [v2.ElasticTransform()] + to_float + [normalize],
        "+ RandomRotation(15)": crop + [v2.RandomRotation(15)] + to_float + [normalize],
        "+ RandomRotation(15) on floats": crop + to_float + [v2.RandomRotation(15), normalize],
        "+ RandomPerspective(0.3)": crop + [v2.RandomPerspective(0.3)] + to_float + [normalize],
        "+ RandomPerspective(0.3) on floats": crop + to_float + [v2.RandomPerspective(0.3), normalize],
        "+ RandomAffine(15, (0.1, 0.1), (0.9, 1.1), BILINEAR)": crop + [v2.RandomAffine(
            15, (0.1, 0.1), (0.9, 1.1), interpolation=v2.InterpolationMode.BILINEAR)] + to_float + [normalize],
        "+ RandomAffine(15, (0.1, 0.1), (0.9, 1.1), BILINEAR) on uint8 tensors": crop + [v2.ToImage(), v2.RandomAffine(
            15, (0.1, 0.1), (0.9, 1.1), interpolation=v2.InterpolationMode.BILINEAR)] + to_float + [normalize],
        "+ RandomRotation(15, BILINEAR)": crop + [v2.RandomRotation(15, interpolation=v2.InterpolationMode.BILINEAR)]
        + to_float + [normalize],
        "Resize(256), TenCrop(224) (test-time crops)": [v2.Resize(256), v2.TenCrop(224)] + to_float + [normalize],
        "v1 Resize(256), TenCrop(224), stacked by a Lambda": [v1.Resize(256), v1.TenCrop(224), v1.Lambda(
            lambda crops: torch.stack([normalize_v1(v1.ToTensor()(crop)) for crop in crops]))],
        "RandomShortestSize, RandomZoomOut, RandomCrop, flip": [
            v2.RandomShortestSize([256, 288, 320], max_size=400), v2.RandomZoomOut(p=0.5, side_range=(1.0, 1.5)),
            v2.RandomCrop(224), v2.RandomHorizontalFlip()] + to_float + [normalize],
        "Resize(256), RandomCrop(224, padding=16, reflect), flip": [
            v2.Resize(256), v2.RandomCrop(224, padding=16, padding_mode="reflect"), v2.RandomHorizontalFlip()]
        + to_float + [normalize],
        "RandomResizedCrop(32), flip, LinearTransformation (3072)": [
            v2.RandomResizedCrop(32), v2.RandomHorizontalFlip()] + to_float + [v2.LinearTransformation(matrix, torch.zeros(side))],
        "ResNet50_Weights.IMAGENET1K_V2.transforms()": [ResNet50_Weights.IMAGENET1K_V2.transforms()],
        **_timm_recipes(),
    }


def _timm_recipes() -> dict:
    try:
        from timm.data import create_transform
    except ImportError:
        return {}
    return {"timm create_transform(224, train_crop_mode='rkrr')":
            list(create_transform(224, is_training=True, train_crop_mode="rkrr").transforms)}


def images_per_second(loader) -> float:
    count, start = 0, time.perf_counter()
    for _, labels in loader:   # images may be a list of views (TenCrop's crops)
        count += len(labels)
    return count / (time.perf_counter() - start)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.v2_steps", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=1024, help="training JPEGs (300-500 px) in the folder")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--workers", type=int, default=os.cpu_count(), help="DataLoader workers and DALI threads")
    parser.add_argument("--rounds", type=int, default=3, help="epochs each loader runs after its warm-up")
    parser.add_argument("--only", default="", help="the workloads whose names contain this text (default: all)")
    parser.add_argument("--cache-dir", default=os.path.expanduser("~/.cache/dali_loaders/bench"))
    args = parser.parse_args(argv)

    import torch
    from torchvision import datasets
    from torchvision.transforms import v2

    from dali_loaders import DaliLoader
    from dali_loaders.bench.data import make_image_folder

    root = os.path.join(make_image_folder(args.cache_dir, args.images, max(args.images // 4, 1)), "train")
    loaders = {}
    for name, steps in recipes().items():
        if args.only not in name:
            continue
        transform = v2.Compose(steps)
        loaders[name] = (
            DaliLoader(datasets.ImageFolder(root, transform=transform), args.batch_size, shuffle=True,
                       num_workers=args.workers, drop_last=True),
            torch.utils.data.DataLoader(datasets.ImageFolder(root, transform=transform), args.batch_size, shuffle=True,
                                        num_workers=args.workers, persistent_workers=args.workers > 0, drop_last=True))
    for pair in loaders.values():
        for loader in pair:
            images_per_second(loader)
    rates = {name: ([], []) for name in loaders}
    for turn in range(args.rounds):
        for name, pair in loaders.items():
            for k, loader in enumerate(pair):
                rates[name][k].append(images_per_second(loader))
        print(f"round {turn + 1} of {args.rounds} done", flush=True)
    print(f"{'recipe':54s} {'DaliLoader':>11s} {'DataLoader':>11s} {'ratio':>7s}   images/s, median of {args.rounds}")
    for name, (ours, theirs) in rates.items():
        ours, theirs = statistics.median(ours), statistics.median(theirs)
        print(f"{name:54s} {ours:11.0f} {theirs:11.0f} {ours / theirs:6.2f}x")


if __name__ == "__main__":
    main()
