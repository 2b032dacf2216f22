# In the manner of pytorch/examples reinforcement_learning/actor_critic.py.
# Written for dualgraph's tests with the public program's idioms, not copied from it; it
# keeps their style (super(Class, self), unused loop variables), so ruff leaves it alone.
# ruff: noqa
import sys
from collections import namedtuple
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.distributions import Categorical

sys.path.insert(0, str(Path(__file__).parent))
from rl_common import CartPole, discounted_returns, train_episodes  # noqa: E402

gamma = 0.99
env = CartPole()
env.reset(seed=543)
torch.manual_seed(543)

SavedAction = namedtuple('SavedAction', ['log_prob', 'value'])


class Policy(nn.Module):
    def __init__(self):
        super(Policy, self).__init__()
        self.affine1 = nn.Linear(4, 128)
        self.action_head = nn.Linear(128, 2)
        self.value_head = nn.Linear(128, 1)
        self.saved_actions = []
        self.rewards = []

    def forward(self, x):
        x = F.relu(self.affine1(x))
        action_prob = F.softmax(self.action_head(x), dim=-1)
        state_values = self.value_head(x)
        return action_prob, state_values


model = Policy()
optimizer = optim.Adam(model.parameters(), lr=3e-2)
eps = np.finfo(np.float32).eps.item()
forward = model
GREEDY = True


def select_action(state):
    state = torch.from_numpy(state).float()
    probs, state_value = forward(state)
    m = Categorical(probs)
    action = m.sample() if not GREEDY else probs.argmax()
    model.saved_actions.append(SavedAction(m.log_prob(action), state_value))
    return action.item()


def finish_episode():
    saved_actions = model.saved_actions
    policy_losses = []
    value_losses = []
    returns = torch.tensor(discounted_returns(model.rewards, gamma))
    returns = (returns - returns.mean()) / (returns.std() + eps)
    for (log_prob, value), R in zip(saved_actions, returns):
        advantage = R - value.item()
        policy_losses.append(-log_prob * advantage)
        value_losses.append(F.smooth_l1_loss(value, torch.tensor([R])))
    optimizer.zero_grad()
    loss = torch.stack(policy_losses).sum() + torch.stack(value_losses).sum()
    loss.backward()
    optimizer.step()
    del model.rewards[:]
    del model.saved_actions[:]
    return loss.item()


def run(weights=None, compiled=False, greedy=True):
    global forward, GREEDY
    GREEDY = greedy
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    forward = torch.compile(model) if compiled else model
    losses = train_episodes(env, select_action, model.rewards, finish_episode)
    return {"losses": losses, "weights": w, "fn": forward}
