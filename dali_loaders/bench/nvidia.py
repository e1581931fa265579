"""NVIDIA's reference contender: a DALI pipeline written by hand as DALI's own ResNet-50
training example writes it, served through DALI's DALIGenericIterator; and the decode
ceiling of the same files.

Train: readers.file (shuffled), decoders.image_random_crop, resize to crop x crop,
crop_mirror_normalize with a coin-flip mirror. Val: decode, resize the shorter side to 256,
crop_mirror_normalize's centre crop. On a GPU the decode is "mixed" and the rest runs on the
GPU; on the CPU everything runs on the CPU (device_id=None). It is what a user who copies the
example gets: the measure of what this library adds (or costs) over writing the graph yourself.
"""
import os

CROP = 224
VAL_SHORTER = 256
MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]


def example_pipeline(folder: str, train: bool, batch_size: int, threads: int, gpu: bool, seed: int = 0):
    """The example's pipeline over a class-per-folder `folder`, built."""
    from nvidia.dali import fn, pipeline_def, types

    @pipeline_def(batch_size=batch_size, num_threads=threads, device_id=0 if gpu else None, seed=seed)
    def reference():
        encoded, labels = fn.readers.file(file_root=folder, random_shuffle=train, pad_last_batch=True, name="Reader")
        decoder = "mixed" if gpu else "cpu"
        if train:
            images = fn.decoders.image_random_crop(encoded, device=decoder, output_type=types.RGB)
            images = fn.resize(images, resize_x=CROP, resize_y=CROP)
            mirror = fn.random.coin_flip()
        else:
            images = fn.decoders.image(encoded, device=decoder, output_type=types.RGB)
            images = fn.resize(images, resize_shorter=VAL_SHORTER)
            mirror = False
        images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW", crop=(CROP, CROP),
                                          mean=MEAN, std=STD, mirror=mirror)
        return images, (labels.gpu() if gpu else labels)

    pipeline = reference()
    pipeline.build()
    return pipeline


class NvidiaExample:
    """(images, labels) batches of the example's pipeline, one epoch per `iter()`; labels as
    int64 of shape (batch,), as the other contenders give them.

    As the example's users run it: the pipeline and its iterator are built once, at the
    first `iter()`, and the iterator resets itself at each epoch's end (auto_reset), its
    prefetched runs going on into the next epoch. A loop left early goes on where it stopped
    at the next `iter()`."""

    def __init__(self, data: str, split: str, batch_size: int, threads: int, gpu: bool, seed: int = 0):
        self.folder, self.train = os.path.join(data, split), split == "train"
        self.batch_size, self.threads, self.gpu, self.seed = batch_size, threads, gpu, seed
        self.iterator = None

    def __iter__(self):
        if self.iterator is None:
            from nvidia.dali.plugin.base_iterator import LastBatchPolicy
            from nvidia.dali.plugin.pytorch import DALIGenericIterator

            pipeline = example_pipeline(self.folder, self.train, self.batch_size, self.threads, self.gpu, self.seed)
            self.iterator = DALIGenericIterator([pipeline], ["data", "label"], reader_name="Reader",
                                                last_batch_policy=LastBatchPolicy.PARTIAL, auto_reset=True)
        for (batch,) in self.iterator:
            yield batch["data"], batch["label"].reshape(-1).long()
