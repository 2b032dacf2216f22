# In the manner of pytorch/examples reinforcement_learning/reinforce.py.
# Written for dualgraph's tests with the public program's idioms, not copied from it; it
# keeps their style (super(Class, self), unused loop variables), so ruff leaves it alone.
# ruff: noqa
import sys
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


class Policy(nn.Module):
    def __init__(self):
        super(Policy, self).__init__()
        self.affine1 = nn.Linear(4, 128)
        self.dropout = nn.Dropout(p=0.6)
        self.affine2 = nn.Linear(128, 2)

        self.saved_log_probs = []
        self.rewards = []

    def forward(self, x):
        x = self.affine1(x)
        x = self.dropout(x)
        x = F.relu(x)
        action_scores = self.affine2(x)
        return F.softmax(action_scores, dim=1)


policy = Policy()
optimizer = optim.Adam(policy.parameters(), lr=1e-2)
eps = np.finfo(np.float32).eps.item()
forward = policy


def select_action(state):
    state = torch.from_numpy(state).float().unsqueeze(0)
    probs = forward(state)
    m = Categorical(probs)
    action = m.sample() if not GREEDY else probs.argmax(1)
    policy.saved_log_probs.append(m.log_prob(action))
    return action.item()


def finish_episode():
    policy_loss = []
    returns = torch.tensor(discounted_returns(policy.rewards, gamma))
    returns = (returns - returns.mean()) / (returns.std() + eps)
    for log_prob, R in zip(policy.saved_log_probs, returns):
        policy_loss.append(-log_prob * R)
    optimizer.zero_grad()
    policy_loss = torch.cat(policy_loss).sum()
    policy_loss.backward()
    optimizer.step()
    del policy.rewards[:]
    del policy.saved_log_probs[:]
    return policy_loss.item()


GREEDY = True


def run(weights=None, compiled=False, greedy=True):
    global forward, GREEDY
    GREEDY = greedy
    if weights is not None:
        policy.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in policy.state_dict().items()}
    policy.dropout.p = 0.0 if greedy else 0.6  # the random streams differ between libraries
    forward = torch.compile(policy) if compiled else policy
    losses = train_episodes(env, select_action, policy.rewards, finish_episode)
    return {"losses": losses, "weights": w, "fn": forward}
