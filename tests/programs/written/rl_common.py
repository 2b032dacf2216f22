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


def discounted_returns(rewards, gamma):
    """Each step's return: its reward plus the discounted return after it."""
    R = 0
    returns = []
    for r in rewards[::-1]:
        R = r + gamma * R
        returns.append(R)
    return returns[::-1]


def train_episodes(env, select_action, rewards, finish_episode, episodes=6, max_steps=30):
    """pytorch/examples' episode loop: play each episode for at most ``max_steps``,
    recording rewards, then ``finish_episode()``; the losses, then the running reward."""
    running_reward = 10
    losses = []
    for i_episode in range(episodes):
        state, _ = env.reset()
        ep_reward = 0
        for t in range(1, 10000):
            action = select_action(state)
            state, reward, done, _, _ = env.step(action)
            rewards.append(reward)
            ep_reward += reward
            if done or t >= max_steps:
                break
        running_reward = 0.05 * ep_reward + (1 - 0.05) * running_reward
        losses.append(finish_episode())
    losses.append(running_reward)
    return losses
