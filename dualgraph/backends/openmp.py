"""``torch.backends.openmp``: not available in dualgraph."""


def is_available() -> bool:
    return False


def is_built() -> bool:
    return False
