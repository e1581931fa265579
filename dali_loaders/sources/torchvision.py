"""torchvision's dataset objects read as sources (placeholder until the adapters land)."""


def adapt(dataset):
    return None
