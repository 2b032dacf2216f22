"""``torch.backends.mkldnn``: not used by dualgraph (the flag changes nothing)."""

enabled = False


def is_available() -> bool:
    return False
