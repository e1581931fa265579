"""Batches of views (a list of (B, C, H, W) tensors per batch) compared with a reference loader's."""
import torch


def assert_views_near(ours, theirs, levels: int = 1) -> int:
    """Batch for batch: the same labels, and each view of the same shape and within `levels`
    uint8 levels of the reference's; returns how many batches were compared."""
    batches = 0
    for (views, labels), (expected, expected_labels) in zip(ours, theirs, strict=True):
        assert torch.equal(labels, expected_labels)
        for view, want in zip(views, expected, strict=True):
            assert view.shape == want.shape
            assert int((view.int() - want.int()).abs().max()) <= levels
        batches += 1
    return batches


def assert_resumes_bit_for_bit(make) -> list:
    """A loader from `make()` saved after the first batch of epoch 1, and one resumed from that
    state, hand out the same rest of the epoch bit for bit; returns the resumed batches."""
    loader = make()
    loader.set_epoch(1)
    batches = iter(loader)
    next(batches)
    state = loader.state_dict()
    rest = [(list(views), labels) for views, labels in batches]
    resumed = make()
    resumed.load_state_dict(state)
    again = [(list(views), labels) for views, labels in resumed]
    assert len(again) == len(rest) == len(loader) - 1
    for (views, labels), (want, want_labels) in zip(again, rest, strict=True):
        assert torch.equal(labels, want_labels)
        assert all(torch.equal(view, other) for view, other in zip(views, want, strict=True))
    return again
