"""Read a captcha set (text labels in the file names) with a Lightning DataModule and train a
small CRNN with CTC loss on it: sequence labels, on DALI or its torchvision twin.

    python examples/captcha.py --root /tmp/captchas --make 2000 --use_dali --epochs 5

--make N draws N training captchas (and N / 4 for validation) with PIL first: random text
of 4 to 5 characters on a noisy background, saved as <index>_<text>.png.
"""
import argparse
import os

import numpy as np
import torch
from PIL import Image, ImageDraw, ImageFont
from torchvision.transforms import v2

ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"
HEIGHT, WIDTH = 32, 96


def make_captchas(folder: str, n: int, seed: int) -> None:
    """n captchas under folder/: text drawn by PIL at a jittered place, grey lines across."""
    rng = np.random.default_rng(seed)
    font = ImageFont.load_default(size=22)
    os.makedirs(folder, exist_ok=True)
    for i in range(n):
        text = "".join(rng.choice(list(ALPHABET), int(rng.integers(4, 6))))
        image = Image.new("RGB", (WIDTH, HEIGHT), tuple(int(c) for c in rng.integers(180, 256, 3)))
        draw = ImageDraw.Draw(image)
        for _ in range(3):
            draw.line([tuple(int(v) for v in rng.integers(0, WIDTH, 2)) for _ in range(2)], fill=(120, 120, 120))
        draw.text((int(rng.integers(0, 12)), int(rng.integers(-4, 4))), text, font=font,
                  fill=tuple(int(c) for c in rng.integers(0, 90, 3)))
        image.save(os.path.join(folder, f"{i:05d}_{text}.png"))


def text_of(path: str) -> str:
    """The label is in the name: <index>_<text>.png."""
    return os.path.splitext(os.path.basename(path))[0].split("_", 1)[1]


def transforms(train: bool) -> v2.Compose:
    jitter = [v2.RandomAffine(degrees=3, translate=(0.03, 0.05))] if train else []
    return v2.Compose([v2.Resize((HEIGHT, WIDTH)), *jitter, v2.Grayscale(1), v2.ToImage(),
                       v2.ToDtype(torch.float32, scale=True), v2.Normalize([0.5], [0.5])])


class CRNN(torch.nn.Module):
    """Convolutions down to one row of features, a bidirectional GRU along the width, and a
    class per column (0: CTC's blank)."""

    def __init__(self, classes: int, hidden: int = 64):
        super().__init__()

        def block(cin, cout, pool):
            return [torch.nn.Conv2d(cin, cout, 3, padding=1), torch.nn.BatchNorm2d(cout), torch.nn.ReLU(),
                    torch.nn.MaxPool2d(pool)]
        self.features = torch.nn.Sequential(*block(1, 32, 2), *block(32, 64, 2), *block(64, 96, (2, 1)),
                                            *block(96, 96, (4, 1)))
        self.rnn = torch.nn.GRU(96, hidden, bidirectional=True, batch_first=True)
        self.head = torch.nn.Linear(2 * hidden, classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        columns = self.features(images).squeeze(2).transpose(1, 2)   # (B, W', C)
        return self.head(self.rnn(columns)[0])                       # (B, W', classes)


def greedy_decode(logits: torch.Tensor) -> list:
    """CTC's best path: the argmax per column, repeats merged, blanks dropped."""
    decoded = []
    for path in logits.argmax(-1).tolist():
        merged = [c for k, c in enumerate(path) if c != 0 and (k == 0 or c != path[k - 1])]
        decoded.append("".join(ALPHABET[c - 1] for c in merged))
    return decoded


def lightning_parts(lr: float):
    """The LightningModule (defined here: Lightning is imported only when training)."""
    import pytorch_lightning as pl

    class CaptchaModel(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = CRNN(len(ALPHABET) + 1)

        def ctc(self, batch):
            images, labels, lengths = batch
            log_probs = self.model(images).log_softmax(-1).transpose(0, 1)   # (T, B, classes)
            steps = torch.full((len(images),), log_probs.shape[0], dtype=torch.int64)
            return torch.nn.functional.ctc_loss(log_probs, labels, steps, lengths, zero_infinity=True)

        def training_step(self, batch, index):
            loss = self.ctc(batch)
            self.log("train_loss", loss, prog_bar=True)
            return loss

        def validation_step(self, batch, index):
            images, labels, lengths = batch
            words = ["".join(ALPHABET[c - 1] for c in row[:n]) for row, n in zip(labels.tolist(), lengths.tolist())]
            exact = sum(a == b for a, b in zip(greedy_decode(self.model(images)), words))
            self.log("val_loss", self.ctc(batch))
            self.log("val_exact", exact / len(words))

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=lr)

    return pl, CaptchaModel


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="holds train/ and val/ (made by --make)")
    parser.add_argument("--make", type=int, default=0, help="draw this many training captchas first")
    parser.add_argument("--use-dali", "--use_dali", dest="use_dali", action="store_true",
                        help="the DALI loader (default: its torchvision twin)")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--max-steps", "--max_steps", dest="max_steps", type=int, default=-1)
    parser.add_argument("--batch-size", "--batch_size", dest="batch_size", type=int, default=32)
    parser.add_argument("--num-workers", "--num_workers", dest="num_workers", type=int, default=1)
    parser.add_argument("--lr", type=float, default=3e-3)
    args = parser.parse_args(argv)

    if args.make:
        make_captchas(os.path.join(args.root, "train"), args.make, seed=0)
        make_captchas(os.path.join(args.root, "val"), max(1, args.make // 4), seed=1)
    from dali_loaders.lightning import FilesDataModule

    data = FilesDataModule(os.path.join(args.root, "train"), args.batch_size, val_root=os.path.join(args.root, "val"),
                           use_dali=args.use_dali, num_workers=args.num_workers, label_fn=text_of,
                           alphabet=ALPHABET, label_length=5, train_transform=transforms(True),
                           val_transform=transforms(False), seed=0)
    pl, CaptchaModel = lightning_parts(args.lr)
    trainer = pl.Trainer(max_epochs=args.epochs, max_steps=args.max_steps, accelerator="auto", devices=1,
                         logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, num_sanity_val_steps=0)
    model = CaptchaModel()
    trainer.fit(model, datamodule=data)
    metrics = {k: float(v) for k, v in trainer.callback_metrics.items()}
    nan = float("nan")
    print(f"loader={type(data.train_dataloader()).__name__} steps={trainer.global_step} "
          f"train_loss={metrics.get('train_loss', nan):.3f} val_loss={metrics.get('val_loss', nan):.3f} "
          f"val_exact={metrics.get('val_exact', 0.0):.1%}")


if __name__ == "__main__":
    main()
