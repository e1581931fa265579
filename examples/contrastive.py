"""Self-supervised pretraining (SimCLR) with a dali_loaders loader, or its torchvision twin.

    python examples/contrastive.py --root /data/cifar --loader dali --epochs 100
    python examples/contrastive.py --root /data/cifar --loader torch --epochs 1

The views are made as SimCLR's repositories make them: a class of one's own whose `__call__`
returns `[self.base_transform(x) for i in range(self.n_views)]`. The DALI loader reads that
class and runs each view in its DALI graph; each batch is `([view_0, view_1], labels)`, as
DataLoader gives it. Per epoch it prints the time, the part spent waiting for data, the
samples seen and the mean NT-Xent loss.
"""
import argparse
import time

import torch
import torch.nn.functional as F
import torchvision
from torchvision.transforms import v2

from dali_loaders import get_cifar_iter_dali, get_cifar_iter_torch


class ContrastiveViews:
    """n views of each image, each drawn by the same transform."""

    def __init__(self, base_transform, n_views=2):
        self.base_transform = base_transform
        self.n_views = n_views

    def __call__(self, x):
        return [self.base_transform(x) for i in range(self.n_views)]


def simclr_views(size: int = 32):
    """SimCLR's CIFAR augmentations (its blur is left out at 32 px, as the paper does)."""
    return ContrastiveViews(v2.Compose([
        v2.RandomResizedCrop(size, antialias=True), v2.RandomHorizontalFlip(),
        v2.RandomApply([v2.ColorJitter(0.4, 0.4, 0.4, 0.1)], p=0.8), v2.RandomGrayscale(p=0.2),
        v2.ToImage(), v2.ToDtype(torch.float32, scale=True),
        v2.Normalize((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616))]))


def nt_xent(first: torch.Tensor, second: torch.Tensor, temperature: float = 0.5) -> torch.Tensor:
    """SimCLR's loss: each view's partner is the positive, the other 2B - 2 views the negatives."""
    features = F.normalize(torch.cat([first, second]), dim=1)
    similarity = features @ features.T / temperature
    similarity.fill_diagonal_(float("-inf"))
    count = len(first)
    partners = torch.cat([torch.arange(count, 2 * count), torch.arange(count)]).to(features.device)
    return F.cross_entropy(similarity, partners)


def encoder(dim: int = 128) -> torch.nn.Module:
    """ResNet-18 for 32 px images, with SimCLR's projection head."""
    net = torchvision.models.resnet18(num_classes=dim)
    net.conv1 = torch.nn.Conv2d(3, 64, 3, 1, 1, bias=False)
    net.maxpool = torch.nn.Identity()
    hidden = net.fc.in_features
    net.fc = torch.nn.Sequential(torch.nn.Linear(hidden, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, dim))
    return net


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", required=True, help="the folder holding cifar-10-batches-py/")
    parser.add_argument("--loader", choices=["dali", "torch"], default="dali")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--threads", type=int, default=2, help="DALI threads, or DataLoader workers")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    make = get_cifar_iter_dali if args.loader == "dali" else get_cifar_iter_torch
    loader = make("train", args.root, args.batch_size, args.threads, seed=args.seed, transform=simclr_views(),
                  drop_last=True)
    print(f"SimCLR on CIFAR-10, {type(loader).__name__}, {device}")
    model = encoder().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.3, momentum=0.9, weight_decay=1e-6)
    for epoch in range(args.epochs):
        loader.set_epoch(epoch)
        start, waited, samples, total = time.perf_counter(), 0.0, 0, 0.0
        batches = iter(loader)
        while True:
            asked = time.perf_counter()
            try:
                views, _ = next(batches)
            except StopIteration:
                break
            waited += time.perf_counter() - asked
            first, second = (view.to(device, non_blocking=True) for view in views)
            loss = nt_xent(model(first), model(second))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            samples, total = samples + len(first), total + loss.item() * len(first)
        seconds = time.perf_counter() - start
        print(f"epoch {epoch}: {seconds:.1f} s, waiting for data {waited:.1f} s ({100 * waited / seconds:.0f}%), "
              f"{samples} samples, NT-Xent loss {total / max(samples, 1):.3f}")


if __name__ == "__main__":
    main()
