"""`dg.nn.functional`: compositions of registry ops (``dropout`` binds its own op), one
module per family, as `nn.modules` has."""

from __future__ import annotations

from . import (
    activation,
    attention,
    conv,
    distance,
    dropouts,
    linear_maps,
    loss,
    normalization,
    pooling,
    sparse,
    vision,
)
from .activation import *  # noqa: F403
from .attention import *  # noqa: F403
from .conv import *  # noqa: F403
from .distance import *  # noqa: F403
from .dropouts import *  # noqa: F403
from .linear_maps import *  # noqa: F403
from .loss import *  # noqa: F403
from .normalization import *  # noqa: F403
from .pooling import *  # noqa: F403
from .sparse import *  # noqa: F403
from .vision import *  # noqa: F403

__all__ = sorted(name for family in (activation, attention, conv, distance, dropouts,
                                     linear_maps, loss, normalization, pooling, sparse, vision)
                 for name in family.__all__)
