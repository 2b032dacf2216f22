"""The layers of `dg.nn`, one module per family as in `torch.nn.modules`."""

from __future__ import annotations

from . import (
    activation,
    attention,
    container,
    conv,
    distance,
    dropout,
    flatten,
    fold,
    linear,
    loss,
    module,
    normalization,
    padding,
    pixelshuffle,
    pooling,
    sparse,
    upsampling,
)
from .activation import *  # noqa: F403
from .attention import *  # noqa: F403
from .container import *  # noqa: F403
from .conv import *  # noqa: F403
from .distance import *  # noqa: F403
from .dropout import *  # noqa: F403
from .flatten import *  # noqa: F403
from .fold import *  # noqa: F403
from .linear import *  # noqa: F403
from .loss import *  # noqa: F403
from .module import *  # noqa: F403
from .normalization import *  # noqa: F403
from .padding import *  # noqa: F403
from .pixelshuffle import *  # noqa: F403
from .pooling import *  # noqa: F403
from .sparse import *  # noqa: F403
from .upsampling import *  # noqa: F403

__all__ = sorted(name for family in (activation, attention, container, conv, distance, dropout,
                                     flatten, fold, linear, loss, module, normalization,
                                     padding, pixelshuffle, pooling, sparse, upsampling)
                 for name in family.__all__)
