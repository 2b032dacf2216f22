"""``torch.backends.mkldnn``: not used by dualgraph (the flag changes nothing)."""

from .flags import guard_flags

enabled = False


def is_available() -> bool:
    return False


guard_flags(__name__, ("enabled",))
