"""`dg.distributed`, as on a machine without a process group backend: dualgraph trains in
one process, so ``is_available()`` is False and starting a process group raises
`RuntimeError`. The names exist so that scripts which import them (nanoGPT's train.py
imports ``init_process_group``) run when they do not use them.

>>> dg.distributed.is_available(), dg.distributed.is_initialized()
(False, False)
"""

from __future__ import annotations

from typing import Any, NoReturn


def is_available() -> bool:
    return False


def is_initialized() -> bool:
    return False


def _unavailable(what: str) -> NoReturn:
    raise RuntimeError(f"dg.distributed.{what}: dualgraph has no distributed process group "
                       "(it trains in one process)")


def init_process_group(*args: Any, **kwargs: Any) -> NoReturn:
    _unavailable("init_process_group()")


def destroy_process_group(*args: Any, **kwargs: Any) -> NoReturn:
    _unavailable("destroy_process_group()")


def get_rank(group: Any = None) -> NoReturn:
    _unavailable("get_rank()")


def get_world_size(group: Any = None) -> NoReturn:
    _unavailable("get_world_size()")


def barrier(*args: Any, **kwargs: Any) -> NoReturn:
    _unavailable("barrier()")


def all_reduce(*args: Any, **kwargs: Any) -> NoReturn:
    _unavailable("all_reduce()")
