# In the manner of the PyTorch Bayes-by-Backprop implementations (Blundell et al. 2015;
# e.g. nitarshan/bayes-by-backprop, the "Weight Uncertainty in Neural Networks" notebooks):
# a ``Gaussian`` variational posterior with ``sigma = torch.log1p(torch.exp(self.rho))``
# and a reparameterised sample ``mu + sigma * epsilon``, its ``log_prob`` written out with
# ``math.log(math.sqrt(2 * math.pi))``, a ``ScaleMixtureGaussian`` prior from two
# ``torch.distributions.Normal(0, sigma)`` combined by ``torch.log(pi * prob1 + (1 - pi) *
# prob2)``, ``BayesianLinear`` layers accumulating ``log_prior``/``log_variational_posterior``
# on ``self``, several samples per step stacked with ``torch.zeros(samples, ...)`` and filled
# by index, the ELBO ``(log_variational_posterior - log_prior) / NUM_BATCHES +
# F.nll_loss(outputs.mean(0), target, reduction="sum")``, a ``kl_divergence`` of two
# ``Normal``s logged, and an ensemble evaluation. The noise ``epsilon`` comes from NumPy
# through a buffer the layer reads (the libraries' random streams differ).
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

PI = 0.5
SIGMA_1 = torch.FloatTensor([math.exp(-0)])
SIGMA_2 = torch.FloatTensor([math.exp(-6)])
SAMPLES = 2
BATCH_SIZE = 8
NUM_BATCHES = 3


class Gaussian(object):
    def __init__(self, mu, rho, noise):
        super().__init__()
        self.mu = mu
        self.rho = rho
        self.noise = noise

    @property
    def sigma(self):
        return torch.log1p(torch.exp(self.rho))

    def sample(self, i):
        epsilon = self.noise[i]
        return self.mu + self.sigma * epsilon

    def log_prob(self, input):
        return (-math.log(math.sqrt(2 * math.pi))
                - torch.log(self.sigma)
                - ((input - self.mu) ** 2) / (2 * self.sigma ** 2)).sum()


class ScaleMixtureGaussian(object):
    def __init__(self, pi, sigma1, sigma2):
        super().__init__()
        self.pi = pi
        self.sigma1 = sigma1
        self.sigma2 = sigma2
        self.gaussian1 = torch.distributions.Normal(0, sigma1)
        self.gaussian2 = torch.distributions.Normal(0, sigma2)

    def log_prob(self, input):
        prob1 = torch.exp(self.gaussian1.log_prob(input))
        prob2 = torch.exp(self.gaussian2.log_prob(input))
        return (torch.log(self.pi * prob1 + (1 - self.pi) * prob2)).sum()


class BayesianLinear(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight_mu = nn.Parameter(torch.Tensor(out_features, in_features).uniform_(-0.2, 0.2))
        self.weight_rho = nn.Parameter(torch.Tensor(out_features, in_features).uniform_(-5, -4))
        self.bias_mu = nn.Parameter(torch.Tensor(out_features).uniform_(-0.2, 0.2))
        self.bias_rho = nn.Parameter(torch.Tensor(out_features).uniform_(-5, -4))
        self.register_buffer("weight_eps", torch.zeros(SAMPLES, out_features, in_features), persistent=False)
        self.register_buffer("bias_eps", torch.zeros(SAMPLES, out_features), persistent=False)
        self.weight = Gaussian(self.weight_mu, self.weight_rho, self.weight_eps)
        self.bias = Gaussian(self.bias_mu, self.bias_rho, self.bias_eps)
        self.weight_prior = ScaleMixtureGaussian(PI, SIGMA_1, SIGMA_2)
        self.bias_prior = ScaleMixtureGaussian(PI, SIGMA_1, SIGMA_2)
        self.log_prior = 0
        self.log_variational_posterior = 0

    def forward(self, input, i=0, sample=False, calculate_log_probs=False):
        if self.training or sample:
            weight = self.weight.sample(i)
            bias = self.bias.sample(i)
        else:
            weight = self.weight.mu
            bias = self.bias.mu
        if self.training or calculate_log_probs:
            self.log_prior = self.weight_prior.log_prob(weight) + self.bias_prior.log_prob(bias)
            self.log_variational_posterior = self.weight.log_prob(weight) + self.bias.log_prob(bias)
        else:
            self.log_prior, self.log_variational_posterior = 0, 0
        return F.linear(input, weight, bias)


class BayesianNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = BayesianLinear(12, 16)
        self.l2 = BayesianLinear(16, 16)
        self.l3 = BayesianLinear(16, 4)

    def forward(self, x, i=0, sample=False):
        x = x.view(-1, 12)
        x = F.relu(self.l1(x, i, sample))
        x = F.relu(self.l2(x, i, sample))
        x = F.log_softmax(self.l3(x, i, sample), dim=1)
        return x

    def log_prior(self):
        return self.l1.log_prior + self.l2.log_prior + self.l3.log_prior

    def log_variational_posterior(self):
        return self.l1.log_variational_posterior + self.l2.log_variational_posterior + self.l3.log_variational_posterior

    def sample_elbo(self, input, target, samples=SAMPLES):
        outputs = torch.zeros(samples, BATCH_SIZE, 4)
        log_priors = torch.zeros(samples)
        log_variational_posteriors = torch.zeros(samples)
        for i in range(samples):
            outputs[i] = self(input, i, sample=True)
            log_priors[i] = self.log_prior()
            log_variational_posteriors[i] = self.log_variational_posterior()
        log_prior = log_priors.mean()
        log_variational_posterior = log_variational_posteriors.mean()
        negative_log_likelihood = F.nll_loss(outputs.mean(0), target, reduction="sum")
        loss = (log_variational_posterior - log_prior) / NUM_BATCHES + negative_log_likelihood
        return loss, log_prior, log_variational_posterior, negative_log_likelihood


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(1203)
    net = BayesianNetwork()
    if weights is not None:
        net.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in net.state_dict().items()}
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
    batches = [(torch.from_numpy(rng.standard_normal((BATCH_SIZE, 3, 4)).astype(np.float32)),
                torch.from_numpy(rng.integers(0, 4, BATCH_SIZE))) for _ in range(NUM_BATCHES)]
    layers = [net.l1, net.l2, net.l3]

    def train_step(data, target):
        net.zero_grad()
        loss, log_prior, log_variational_posterior, negative_log_likelihood = net.sample_elbo(data, target)
        loss.backward()
        optimizer.step()
        return loss, log_prior, negative_log_likelihood

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    for epoch in range(2):
        net.train()
        for data, target in batches:
            for layer in layers:
                layer.weight_eps.copy_(torch.from_numpy(rng.standard_normal(layer.weight_eps.shape).astype(np.float32)))
                layer.bias_eps.copy_(torch.from_numpy(rng.standard_normal(layer.bias_eps.shape).astype(np.float32)))
            loss, log_prior, nll = step(data, target)
            losses += [loss.item(), log_prior.item(), nll.item()]
    with torch.no_grad():
        q = torch.distributions.Normal(net.l1.weight_mu, torch.log1p(torch.exp(net.l1.weight_rho)))
        p = torch.distributions.Normal(torch.zeros_like(net.l1.weight_mu), torch.ones_like(net.l1.weight_mu))
        losses.append(float(torch.distributions.kl_divergence(q, p).sum()))
        net.eval()
        data, target = batches[0]
        output = net(data)
        pred = output.max(1, keepdim=True)[1]
        losses += [pred.eq(target.view_as(pred)).sum().item(), float(output.exp().max(1)[0].mean())]
    return {"losses": losses, "weights": w, "fn": step}
