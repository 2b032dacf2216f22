# In the manner of the PyTorch tutorial "Adversarial Example Generation": a small CNN
# trained briefly, then the fast gradient sign attack (data.requires_grad = True,
# model.zero_grad(), data.grad.data, sign, clamp) at several epsilons, counting the
# predictions it flips, with adversarial examples kept through detach().cpu().numpy().
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, 1)
        self.fc1 = nn.Linear(4 * 3 * 3, 16)
        self.fc2 = nn.Linear(16, 10)

    def forward(self, x):
        x = self.conv1(x)
        x = F.relu(x)
        x = F.max_pool2d(x, 2)
        x = torch.flatten(x, 1)
        x = self.fc1(x)
        x = F.relu(x)
        x = self.fc2(x)
        output = F.log_softmax(x, dim=1)
        return output


def fgsm_attack(image, epsilon, data_grad):
    sign_data_grad = data_grad.sign()
    perturbed_image = image + epsilon*sign_data_grad
    perturbed_image = torch.clamp(perturbed_image, 0, 1)
    return perturbed_image


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    images = rng.uniform(0, 1, (48, 1, 8, 8)).astype(np.float32)
    labels = rng.integers(0, 10, 48)
    model = Net().to(device)
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    optimizer = optim.SGD(model.parameters(), lr=0.1, momentum=0.5)

    def train_step(data, target):
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        return loss

    def attack(data, target, epsilon):
        data.requires_grad = True
        output = model(data)
        init_pred = output.max(1, keepdim=True)[1]
        loss = F.nll_loss(output, target)
        model.zero_grad()
        loss.backward()
        data_grad = data.grad.data
        perturbed_data = fgsm_attack(data, epsilon, data_grad)
        output = model(perturbed_data)
        final_pred = output.max(1, keepdim=True)[1]
        return init_pred, final_pred, perturbed_data

    step = torch.compile(train_step) if compiled else train_step
    attack_c = torch.compile(attack) if compiled else attack
    losses = []
    model.train()
    for epoch in range(3):
        for b in range(0, 48, 8):
            data = torch.from_numpy(images[b:b + 8]).to(device)
            target = torch.from_numpy(labels[b:b + 8]).to(device)
            losses.append(step(data, target).item())
    model.eval()
    epsilons = [0, .05, .1, .3]
    for epsilon in epsilons:
        correct = 0
        adv_examples = []
        for b in range(0, 48, 8):
            data = torch.from_numpy(images[b:b + 8]).to(device)
            target = torch.from_numpy(labels[b:b + 8]).to(device)
            init_pred, final_pred, perturbed_data = attack_c(data, target, epsilon)
            for j in range(8):
                if init_pred[j].item() != target[j].item():
                    continue
                if final_pred[j].item() == target[j].item():
                    correct += 1
                else:
                    adv_ex = perturbed_data[j].squeeze().detach().cpu().numpy()
                    adv_examples.append((init_pred[j].item(), final_pred[j].item(), adv_ex))
        final_acc = correct/float(48)
        losses += [final_acc, len(adv_examples)]
        losses += [float(np.abs(ex).sum()) for _, _, ex in adv_examples[:2]]
    return {"losses": losses, "weights": w, "fn": [step, attack_c]}
