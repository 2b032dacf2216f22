# A stand-in for gym's CartPole-v1 (its equations of motion), deterministic from its seed.
# Written for dualgraph's tests with the public program's idioms, not copied from it; it
# keeps their style (super(Class, self), unused loop variables), so ruff leaves it alone.
# ruff: noqa
import math

import numpy as np


class CartPole:
    """A CartPole-v1 stand-in (gym's equations), deterministic from its seed."""

    def __init__(self):
        self.rng = np.random.default_rng(0)

    def reset(self, seed=None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.state = self.rng.uniform(-0.05, 0.05, 4)
        self.t = 0
        return self.state.copy(), {}

    def step(self, action):
        x, x_dot, th, th_dot = self.state
        force = 10.0 if action == 1 else -10.0
        c, s = math.cos(th), math.sin(th)
        temp = (force + 0.05 * th_dot ** 2 * s) / 1.1
        thacc = (9.8 * s - c * temp) / (0.5 * (4.0 / 3.0 - 0.1 * c ** 2 / 1.1))
        xacc = temp - 0.05 * thacc * c / 1.1
        x, x_dot = x + 0.02 * x_dot, x_dot + 0.02 * xacc
        th, th_dot = th + 0.02 * th_dot, th_dot + 0.02 * thacc
        self.state = np.array([x, x_dot, th, th_dot])
        self.t += 1
        done = bool(x < -2.4 or x > 2.4 or th < -0.2095 or th > 0.2095)
        return self.state.copy(), 1.0, done, self.t >= 30, {}
