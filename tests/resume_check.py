"""A check several source tests share: a state taken mid-epoch, loaded by a new loader, gives
the very batches the first one still had to give."""
import torch


def assert_resume_gives_the_rest(make, taken: int = 3, epoch: int = 1):
    """Takes `taken` batches of epoch `epoch` of make()'s loader, then its state; a new loader
    from make() loading that state must yield the rest, batch for batch. Returns both loaders
    (each past that epoch) for checks of what follows."""
    loader = make()
    loader.set_epoch(epoch)
    batches = iter(loader)
    for _ in range(taken):
        next(batches)
    state = loader.state_dict()
    rest = list(batches)
    resumed = make()
    resumed.load_state_dict(state)
    again = list(resumed)
    assert len(again) == len(rest) == len(loader) - taken
    for (x, y), (u, v) in zip(again, rest, strict=True):
        assert torch.equal(y, v) and torch.equal(x, u)
    return loader, resumed
