"""`dg.optim`: PyTorch's optimizers and learning-rate schedulers.

Updates are written with tensor ops applied in place under ``no_grad`` (not raw NumPy), so
a traced training step sees them as ops too. Hyperparameters are read from
``param_groups``: eagerly Python numbers; in a compiled step runtime inputs (or guards,
where Python branches on them), so a learning-rate schedule runs one kernel.
"""

from . import lr_scheduler
from .adadelta import Adadelta
from .adagrad import Adagrad
from .adam import Adam
from .adamax import Adamax
from .adamw import AdamW
from .asgd import ASGD
from .lbfgs import LBFGS
from .nadam import NAdam
from .optimizer import Optimizer
from .radam import RAdam
from .rmsprop import RMSprop
from .rprop import Rprop
from .sgd import SGD
from .sparse_adam import SparseAdam

__all__ = ["ASGD", "Adadelta", "Adagrad", "Adam", "AdamW", "Adamax", "LBFGS", "NAdam", "Optimizer",
           "RAdam", "RMSprop", "Rprop", "SGD", "SparseAdam", "lr_scheduler", "swa_utils"]

from . import swa_utils  # noqa: E402 - it builds on the optimizers and lr_scheduler
