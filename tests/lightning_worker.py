"""A Lightning run that records which samples each rank saw, for tests/test_frameworks.py.

    python lightning_worker.py JOBS_JSON OUT_DIR

JOBS_JSON maps names to jobs, run in turn. A job names the data (a CIFAR-format set whose images encode their own index), how the
loaders are made ("factory": built before the Trainer, passed to fit(); "module": the
DataModule, use_dali true/false) and the Trainer's settings. Under strategy="ddp"
Lightning runs this script again in a second process; every rank writes
OUT_DIR/rank<r>.json: {job name: {"train": [[indices per batch] per epoch], "val": [[indices] per
validation run], "sanity": [...], "test": [...], "predict": [...], "resumed": {...}}}.
"""
import json
import os
import sys

import pytorch_lightning as pl
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from dist_worker import decode_indices, recipe_mean_std  # noqa: E402

CIFAR_CODE = {"base": 256, "step": 1, "offset": 0}


class Recorder(pl.LightningModule):
    """A linear classifier that notes the index every image encodes, per stage and epoch."""

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(3 * 32 * 32, 10)
        self.mean, self.std = recipe_mean_std("cifar", {})
        self.seen = {"train": {}, "val": [], "sanity": [], "test": [], "predict": []}

    def indices(self, images):
        return decode_indices(images, self.mean, self.std, CIFAR_CODE)

    def training_step(self, batch, batch_idx):
        images, labels = batch
        self.seen["train"].setdefault(str(self.current_epoch), []).append(self.indices(images))
        return torch.nn.functional.cross_entropy(self.layer(images.flatten(1)), labels)

    def on_validation_epoch_start(self):
        (self.seen["sanity"] if self.trainer.sanity_checking else self.seen["val"]).append([])

    def validation_step(self, batch, batch_idx):
        (self.seen["sanity"] if self.trainer.sanity_checking else self.seen["val"])[-1].append(
            self.indices(batch[0]))

    def test_step(self, batch, batch_idx):
        self.seen["test"].append(self.indices(batch[0]))

    def predict_step(self, batch, batch_idx):
        self.seen["predict"].append(self.indices(batch[0]))
        return batch[1]

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def make_data(job):
    """(train loader, val loader) or a DataModule, as the job says; built in every process
    before the Trainer exists, as a user's script does."""
    kwargs = dict(num_threads=job.get("num_threads", 1), seed=job.get("seed"))
    if job["loaders"] == "module":
        from dali_loaders.lightning import CIFAR10DataModule
        return CIFAR10DataModule(job["root"], job["batch_size"], use_dali=job["use_dali"], **kwargs)
    from dali_loaders import get_cifar_iter_dali, get_cifar_iter_torch
    factory = get_cifar_iter_dali if job["use_dali"] else get_cifar_iter_torch
    return (factory("train", job["root"], job["batch_size"], **kwargs),
            factory("val", job["root"], job["batch_size"], **kwargs))


def trainer(job, out_dir, **settings):
    from pytorch_lightning.callbacks import ModelCheckpoint

    callbacks = []
    if job.get("checkpoint_step"):
        callbacks.append(ModelCheckpoint(dirpath=out_dir, filename="{step}", every_n_train_steps=job[
            "checkpoint_step"], save_top_k=-1, save_last=False))
    return pl.Trainer(accelerator="cpu", devices=job.get("devices", 1), strategy=job.get("strategy", "auto"),
                      logger=False, enable_progress_bar=False, enable_model_summary=False,
                      enable_checkpointing=bool(callbacks), callbacks=callbacks, **settings)


def fit(job, out_dir, model, ckpt_path=None):
    data = make_data(job)
    run = trainer(job, out_dir, **job.get("trainer", {}))
    if isinstance(data, tuple):
        run.fit(model, train_dataloaders=data[0], val_dataloaders=data[1], ckpt_path=ckpt_path)
    else:
        run.fit(model, datamodule=data, ckpt_path=ckpt_path)
    return run, data


def run(job, out_dir):
    """One job's fit (then validate, test, predict; then a resumed fit): what this rank saw."""
    model = Recorder()
    trained, data = fit(job, out_dir, model)
    if job.get("evaluate"):
        evaluation = dict(dataloaders=data[1]) if isinstance(data, tuple) else dict(datamodule=data)
        trained.validate(model, **evaluation)
        trained.test(model, **evaluation)
        trained.predict(model, **evaluation)
    report = {"rank": trained.global_rank, "world_size": trained.world_size, **model.seen}
    if job.get("resume_from"):  # a new model and new loaders, as after a restart, from that checkpoint
        resumed = Recorder()
        fit(dict(job, checkpoint_step=None), out_dir, resumed, ckpt_path=os.path.join(out_dir, job["resume_from"]))
        report["resumed"] = resumed.seen
    return report


def main(jobs_path, out_dir):
    """Runs every job of the list in turn (one launch: Lightning's import and ddp start-up are slow)."""
    with open(jobs_path) as f:
        jobs = json.load(f)
    reports = {}
    for name, job in jobs.items():
        os.makedirs(os.path.join(out_dir, name), exist_ok=True)
        reports[name] = run(job, os.path.join(out_dir, name))
    rank = next(iter(reports.values()))["rank"]
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(reports, f)


if __name__ == "__main__":
    main(*sys.argv[1:])
