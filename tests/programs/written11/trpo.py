# In the manner of ikostrikov/pytorch-trpo (MIT licence): a Gaussian ``Policy`` whose
# ``action_log_std`` is an ``nn.Parameter`` expanded to the mean's shape, the
# ``normal_log_density`` written out, generalised advantage estimation over a batch by a
# reversed Python loop into ``torch.Tensor(actions.size(0), 1)`` buffers, advantages
# normalised by ``(advantages - advantages.mean()) / advantages.std()``; the surrogate
# ``get_loss(volatile=False)`` with ``torch.exp(log_prob - Variable(fixed_log_prob))``, the
# KL to a detached copy of the policy (``Variable(mean1.data)``), ``get_flat_params_from``/
# ``set_flat_params_to`` by ``param.data.copy_(flat_params[prev_ind:prev_ind +
# flat_size].view(param.size()))``, ``get_flat_grad_from``, the Fisher-vector product
# ``Fvp`` through ``torch.autograd.grad(kl, model.parameters(), create_graph=True)``, ``torch.cat(
# [grad.view(-1) for grad in grads])`` and a second ``autograd.grad`` with ``.data``,
# ``conjugate_gradients`` with ``torch.dot``, a backtracking ``linesearch`` deciding with
# ``.item()``, ``nn.utils.parameters_to_vector``/``vector_to_parameters`` to check the
# update, and the value network fitted by ``LBFGS`` with a closure and ``pow(2)`` weight
# decay. States and actions come from a linear stand-in environment driven by NumPy noise.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import math

import numpy as np
import torch
import torch.autograd as autograd
import torch.nn as nn
from torch.autograd import Variable


class Policy(nn.Module):
    def __init__(self, num_inputs, num_outputs):
        super(Policy, self).__init__()
        self.affine1 = nn.Linear(num_inputs, 16)
        self.affine2 = nn.Linear(16, 16)
        self.action_mean = nn.Linear(16, num_outputs)
        self.action_mean.weight.data.mul_(0.1)
        self.action_mean.bias.data.mul_(0.0)
        self.action_log_std = nn.Parameter(torch.zeros(1, num_outputs))

    def forward(self, x):
        x = torch.tanh(self.affine1(x))
        x = torch.tanh(self.affine2(x))
        action_mean = self.action_mean(x)
        action_log_std = self.action_log_std.expand_as(action_mean)
        action_std = torch.exp(action_log_std)
        return action_mean, action_log_std, action_std


class Value(nn.Module):
    def __init__(self, num_inputs):
        super(Value, self).__init__()
        self.affine1 = nn.Linear(num_inputs, 16)
        self.affine2 = nn.Linear(16, 16)
        self.value_head = nn.Linear(16, 1)
        self.value_head.weight.data.mul_(0.1)
        self.value_head.bias.data.mul_(0.0)

    def forward(self, x):
        x = torch.tanh(self.affine1(x))
        x = torch.tanh(self.affine2(x))
        return self.value_head(x)


def normal_log_density(x, mean, log_std, std):
    var = std.pow(2)
    log_density = -(x - mean).pow(2) / (2 * var) - 0.5 * math.log(2 * math.pi) - log_std
    return log_density.sum(1, keepdim=True)


def get_flat_params_from(model):
    params = []
    for param in model.parameters():
        params.append(param.data.view(-1))
    return torch.cat(params)


def set_flat_params_to(model, flat_params):
    prev_ind = 0
    for param in model.parameters():
        flat_size = int(np.prod(list(param.size())))
        param.data.copy_(flat_params[prev_ind:prev_ind + flat_size].view(param.size()))
        prev_ind += flat_size


def get_flat_grad_from(net, grad_grad=False):
    grads = []
    for param in net.parameters():
        if grad_grad:
            grads.append(param.grad.grad.view(-1))
        else:
            grads.append(param.grad.view(-1))
    return torch.cat(grads)


def conjugate_gradients(Avp, b, nsteps, residual_tol=1e-10):
    x = torch.zeros(b.size())
    r = b.clone()
    p = b.clone()
    rdotr = torch.dot(r, r)
    for i in range(nsteps):
        _Avp = Avp(p)
        alpha = rdotr / torch.dot(p, _Avp)
        x += alpha * p
        r -= alpha * _Avp
        new_rdotr = torch.dot(r, r)
        betta = new_rdotr / rdotr
        p = r + betta * p
        rdotr = new_rdotr
        if rdotr < residual_tol:
            break
    return x


def linesearch(model, f, x, fullstep, expected_improve_rate, max_backtracks=6, accept_ratio=.1):
    fval = f(True).data
    for (_n_backtracks, stepfrac) in enumerate(.5 ** np.arange(max_backtracks)):
        xnew = x + stepfrac * fullstep
        set_flat_params_to(model, xnew)
        newfval = f(True).data
        actual_improve = fval - newfval
        expected_improve = expected_improve_rate * stepfrac
        ratio = actual_improve / expected_improve
        if ratio.item() > accept_ratio and actual_improve.item() > 0:
            return True, xnew
    return False, x


def trpo_step(model, get_loss, get_kl, max_kl, damping, fvp):
    loss = get_loss()
    grads = torch.autograd.grad(loss, model.parameters())
    loss_grad = torch.cat([grad.view(-1) for grad in grads]).data
    stepdir = conjugate_gradients(fvp, -loss_grad, 5)
    shs = 0.5 * (stepdir * fvp(stepdir)).sum(0, keepdim=True)
    lm = torch.sqrt(shs / max_kl)
    fullstep = stepdir / lm[0]
    neggdotstepdir = (-loss_grad * stepdir).sum(0, keepdim=True)
    prev_params = get_flat_params_from(model)
    success, new_params = linesearch(model, get_loss, prev_params, fullstep, neggdotstepdir / lm[0])
    set_flat_params_to(model, new_params)
    return loss, success


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(1110)
    num_inputs, num_actions = 3, 2
    gamma, tau, l2_reg, max_kl, damping = 0.99, 0.97, 1e-3, 1e-2, 1e-1
    policy_net = Policy(num_inputs, num_actions)
    value_net = Value(num_inputs)
    models = {"policy": policy_net, "value": value_net}
    w = {}
    for name, m in models.items():
        if weights is not None:
            m.load_state_dict({k[len(name) + 1:]: torch.tensor(v) for k, v in weights.items()
                               if k.startswith(name + ".")})
        w.update({f"{name}.{k}": v.detach().numpy().copy() for k, v in m.state_dict().items()})
    A = rng.standard_normal((num_inputs, num_inputs)) * 0.3
    B = rng.standard_normal((num_actions, num_inputs)) * 0.3
    losses = []
    fvps = []
    for i_episode in range(3):
        # a batch of transitions from a linear stand-in environment, actions from the mean
        # plus NumPy noise scaled by the policy's std
        states, actions, rewards, masks = [], [], [], []
        state = rng.standard_normal(num_inputs)
        for t in range(12):
            with torch.no_grad():
                mean, _, std = policy_net(torch.from_numpy(state).float().unsqueeze(0))
            action = (mean + std * torch.from_numpy(rng.standard_normal((1, num_actions))).float())[0].numpy()
            next_state = np.tanh(A @ state + B.T @ action)
            reward = -float(np.sum(next_state ** 2)) - 0.01 * float(np.sum(action ** 2))
            done = (t + 1) % 6 == 0
            states.append(state.astype(np.float32))
            actions.append(action.astype(np.float32))
            rewards.append(reward)
            masks.append(0.0 if done else 1.0)
            state = rng.standard_normal(num_inputs) if done else next_state
        rewards = torch.Tensor(rewards)
        masks = torch.Tensor(masks)
        actions = torch.Tensor(np.stack(actions))
        states = torch.Tensor(np.stack(states))
        values = value_net(Variable(states))

        returns = torch.Tensor(actions.size(0), 1)
        deltas = torch.Tensor(actions.size(0), 1)
        advantages = torch.Tensor(actions.size(0), 1)
        prev_return = 0
        prev_value = 0
        prev_advantage = 0
        for i in reversed(range(rewards.size(0))):
            returns[i] = rewards[i] + gamma * prev_return * masks[i]
            deltas[i] = rewards[i] + gamma * prev_value * masks[i] - values.data[i]
            advantages[i] = deltas[i] + gamma * tau * prev_advantage * masks[i]
            prev_return = returns[i, 0]
            prev_value = values.data[i, 0]
            prev_advantage = advantages[i, 0]
        targets = Variable(returns)

        def get_value_loss():
            value_optimizer.zero_grad()
            values_ = value_net(Variable(states))
            value_loss = (values_ - targets).pow(2).mean()
            for param in value_net.parameters():
                value_loss += param.pow(2).sum() * l2_reg
            value_loss.backward()
            return value_loss

        value_optimizer = torch.optim.LBFGS(value_net.parameters(), lr=0.5, max_iter=5)
        value_loss = value_optimizer.step(get_value_loss)
        losses.append(value_loss.item())

        advantages = (advantages - advantages.mean()) / advantages.std()
        action_means, action_log_stds, action_stds = policy_net(Variable(states))
        fixed_log_prob = normal_log_density(Variable(actions), action_means, action_log_stds, action_stds).data.clone()

        def get_loss(volatile=False):
            if volatile:
                with torch.no_grad():
                    action_means, action_log_stds, action_stds = policy_net(Variable(states))
            else:
                action_means, action_log_stds, action_stds = policy_net(Variable(states))
            log_prob = normal_log_density(Variable(actions), action_means, action_log_stds, action_stds)
            action_loss = -Variable(advantages) * torch.exp(log_prob - Variable(fixed_log_prob))
            return action_loss.mean()

        def get_kl():
            mean1, log_std1, std1 = policy_net(Variable(states))
            mean0 = Variable(mean1.data)
            log_std0 = Variable(log_std1.data)
            std0 = Variable(std1.data)
            kl = log_std1 - log_std0 + (std0.pow(2) + (mean0 - mean1).pow(2)) / (2.0 * std1.pow(2)) - 0.5
            return kl.sum(1, keepdim=True)

        def Fvp(v):
            kl = get_kl()
            kl = kl.mean()
            grads = torch.autograd.grad(kl, policy_net.parameters(), create_graph=True)
            flat_grad_kl = torch.cat([grad.view(-1) for grad in grads])
            kl_v = (flat_grad_kl * Variable(v)).sum()
            grads = torch.autograd.grad(kl_v, policy_net.parameters())
            flat_grad_grad_kl = torch.cat([grad.contiguous().view(-1) for grad in grads]).data
            return flat_grad_grad_kl + v * damping

        fvp = torch.compile(Fvp) if compiled else Fvp
        fvps.append(fvp)
        before = nn.utils.parameters_to_vector(policy_net.parameters()).clone()
        loss, success = trpo_step(policy_net, get_loss, get_kl, max_kl, damping, fvp)
        after = nn.utils.parameters_to_vector(policy_net.parameters())
        losses += [loss.item(), float(success), (after - before).norm().item(), get_loss(True).item(),
                   rewards.sum().item()]
    probe = torch.ones(sum(p.numel() for p in policy_net.parameters())) * 0.01
    nn.utils.vector_to_parameters(get_flat_params_from(policy_net) + probe, policy_net.parameters())
    losses.append(policy_net.action_log_std.sum().item())
    return {"losses": losses, "weights": w, "fn": fvps}
