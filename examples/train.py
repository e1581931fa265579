"""Train torchvision's ResNet-18 with a dali_loaders loader, or its torchvision twin.

    python examples/train.py --data cifar10 --root /data/cifar --loader dali --epochs 30
    python examples/train.py --data folder --root /data/flowers/train --val-root /data/flowers/val --use-dali
    python examples/train.py --root /data/cifar --device-variant    # the DALI tutorial's three devices

--device-variant trains and evaluates once per DALI device variant (cpu; cpu-decode: CPU decode,
GPU augmentation; gpu: GPU decode and augmentation) and prints a table of the train and
inference time per epoch and the time spent waiting for data; a variant this machine cannot
run is listed as unavailable.

Per epoch it prints the epoch's time, the part of it spent waiting for data, the training
loss and accuracy and the validation accuracy; then it times one inference pass over the
validation set. Under torchrun every process reads its own shard and the accuracies are
summed over ranks.
"""
import argparse
import time

import torch
import torchvision

from dali_loaders import (
    get_cifar_iter_dali,
    get_cifar_iter_torch,
    get_imagefolder_iter_dali,
    get_imagefolder_iter_torch,
)


def make_loaders(args, **options):
    """(train, val) loaders; `options` (device=) go to both factories."""
    dali = args.loader == "dali"
    if args.data in ("cifar10", "cifar100"):
        make = get_cifar_iter_dali if dali else get_cifar_iter_torch
        common = dict(num_threads=args.threads, dataset=args.data, seed=args.seed, **options)
        return (make("train", args.root, args.batch_size, **common),
                make("val", args.root, args.batch_size, **common))
    if not args.val_root:
        raise SystemExit("--data folder needs --val-root (the validation folder)")
    make = get_imagefolder_iter_dali if dali else get_imagefolder_iter_torch
    common = dict(num_threads=args.threads, crop=args.crop, val_size=args.val_size, seed=args.seed, **options)
    return (make(args.root, args.batch_size, True, **common), make(args.val_root, args.batch_size, False, **common))


def class_count(args, train) -> int:
    if args.data in ("cifar10", "cifar100"):
        return 10 if args.data == "cifar10" else 100
    return len(train.dataset.classes)  # the folder's classes, on either loader's dataset


def timed_batches(loader, device):
    """The loader's batches on `device`, and, once exhausted, the seconds spent waiting for them."""
    waited = [0.0]

    def batches():
        it = iter(loader)
        while True:
            start = time.perf_counter()
            try:
                images, labels = next(it)
            except StopIteration:
                return
            images, labels = images.to(device, non_blocking=True), labels.to(device, non_blocking=True)
            waited[0] += time.perf_counter() - start
            yield images, labels

    return batches(), waited


def summed(*values) -> list:
    """Sums over all processes (one process: the values themselves)."""
    totals = torch.tensor(values, dtype=torch.float64)
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.all_reduce(totals)
    return totals.tolist()


def evaluate(model, loader, device):
    """(accuracy over all ranks, images, seconds) of one pass in eval mode."""
    model.eval()
    correct = seen = 0
    start = time.perf_counter()
    with torch.no_grad():
        batches, _ = timed_batches(loader, device)
        for images, labels in batches:
            correct += (model(images).argmax(1) == labels).sum().item()
            seen += len(labels)
    seconds = time.perf_counter() - start
    correct, total = summed(correct, seen)
    return correct / max(total, 1), seen, seconds


def train_epoch(model, optimizer, scheduler, loader, device):
    """One epoch: (seconds, seconds waiting for data, loss sum, correct, images) on this rank."""
    model.train()
    start = time.perf_counter()
    batches, waited = timed_batches(loader, device)
    loss_sum = correct = seen = 0
    for images, labels in batches:
        outputs = model(images)
        loss = torch.nn.functional.cross_entropy(outputs, labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        scheduler.step()
        loss_sum += loss.item() * len(labels)
        correct += (outputs.argmax(1) == labels).sum().item()
        seen += len(labels)
    return time.perf_counter() - start, waited[0], loss_sum, correct, seen


def setup(args, model_device, **options):
    train, val = make_loaders(args, **options)
    model = torchvision.models.resnet18(num_classes=class_count(args, train)).to(model_device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs * len(train))
    return train, val, model, optimizer, scheduler


VARIANTS = ("cpu", "cpu-decode", "gpu")


def compare_device_variants(args, device) -> None:
    """Seed 001's comparison: per DALI device variant, train and inference seconds per epoch
    and the data wait per training epoch (means over --epochs)."""
    print(f"ResNet-18, {args.data}, DALI device variants, {args.epochs} epoch(s), batch {args.batch_size}, "
          f"{args.threads} thread(s), model on {device}")
    print(f"{'variant':<12}{'train s/epoch':>15}{'inference s':>13}{'data wait s/epoch':>19}")
    args.loader = "dali"
    for variant in VARIANTS:
        if variant != "cpu" and not torch.cuda.is_available():
            print(f"{variant:<12}unavailable: needs a CUDA GPU (torch.cuda.is_available() is False)")
            continue
        train, val, model, optimizer, scheduler = setup(args, device, device=variant)
        train_s = wait_s = infer_s = 0.0
        for epoch in range(args.epochs):
            train.set_epoch(epoch)
            seconds, waited, *_ = train_epoch(model, optimizer, scheduler, train, device)
            train_s, wait_s = train_s + seconds, wait_s + waited
            infer_s += evaluate(model, val, device)[2]
        n = args.epochs
        print(f"{variant:<12}{train_s / n:>15.2f}{infer_s / n:>13.2f}{wait_s / n:>13.2f} ({wait_s / train_s:.0%})")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", choices=["cifar10", "cifar100", "folder"], default="cifar10")
    parser.add_argument("--root", required=True, help="CIFAR folder, or the training image folder")
    parser.add_argument("--val-root", help="--data folder: the validation image folder")
    parser.add_argument("--loader", choices=["dali", "torch"], default="dali")
    parser.add_argument("--use-dali", "--use_dali", dest="loader", action="store_const", const="dali",
                        help="the same as --loader dali")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--threads", type=int, default=2, help="DALI threads, or the twin's DataLoader workers")
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--crop", type=int, default=224, help="--data folder: training crop")
    parser.add_argument("--val-size", type=int, default=256, help="--data folder: validation resize")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device-variant", "--device_variant", dest="device_variant", action="store_true",
                        help="compare DALI's device variants (cpu, cpu-decode, gpu) and print their table")
    args = parser.parse_args(argv)

    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if args.device_variant:
        return compare_device_variants(args, device)
    train, val, model, optimizer, scheduler = setup(args, device)
    print(f"ResNet-18, {args.data}, loader={args.loader} ({type(train).__name__}), {len(train.dataset)} train / "
          f"{len(val.dataset)} val images, batch {args.batch_size}, {args.threads} thread(s), {device}")

    for epoch in range(args.epochs):
        train.set_epoch(epoch)
        epoch_seconds, waited, loss_sum, correct, seen = train_epoch(model, optimizer, scheduler, train, device)
        loss_sum, correct, total = summed(loss_sum, correct, seen)
        val_accuracy, _, _ = evaluate(model, val, device)
        print(f"epoch {epoch}: {epoch_seconds:.1f} s, waiting for data {waited:.2f} s "
              f"({waited / epoch_seconds:.0%}), {seen} images, train loss {loss_sum / total:.3f}, "
              f"train accuracy {correct / total:.1%}, val accuracy {val_accuracy:.1%}")

    accuracy, images, seconds = evaluate(model, val, device)
    print(f"inference: {images} images in {seconds:.2f} s ({images / seconds:.0f} images/s), "
          f"accuracy {accuracy:.1%}")


if __name__ == "__main__":
    main()
