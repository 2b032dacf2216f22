"""``torch.backends.cpu``: the CPU, which dualgraph runs on."""


def get_cpu_capability() -> str:
    return "DEFAULT"
