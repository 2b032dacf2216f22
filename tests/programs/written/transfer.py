# In the manner of the PyTorch tutorial "Transfer learning for computer vision",
# Written for dualgraph's tests with the public program's idioms, not copied from it; it
# keeps their style (super(Class, self), unused loop variables), so ruff leaves it alone.
# ruff: noqa
# with a small ResNet and random images.
import copy
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from torch.optim import lr_scheduler

import types
tinyresnet = types.ModuleType('tinyresnet')
exec(open(Path(__file__).parent / 'tinyresnet.py').read(), tinyresnet.__dict__)

device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")


def train_model(model, criterion, optimizer, scheduler, dataloaders, dataset_sizes, num_epochs, losses, step):
    with tempfile.TemporaryDirectory() as tempdir:
        best_model_params_path = os.path.join(tempdir, 'best_model_params.pt')
        torch.save(model.state_dict(), best_model_params_path)
        best_acc = 0.0
        for epoch in range(num_epochs):
            for phase in ['train', 'val']:
                if phase == 'train':
                    model.train()
                else:
                    model.eval()
                running_loss = 0.0
                running_corrects = 0
                for inputs, labels in dataloaders[phase]:
                    inputs = inputs.to(device)
                    labels = labels.to(device)
                    if phase == 'train':
                        loss, preds = step(inputs, labels)
                    else:
                        optimizer.zero_grad()
                        with torch.set_grad_enabled(phase == 'train'):
                            outputs = model(inputs)
                            _, preds = torch.max(outputs, 1)
                            loss = criterion(outputs, labels)
                    losses.append(loss.item())
                    running_loss += loss.item() * inputs.size(0)
                    running_corrects += torch.sum(preds == labels.data)
                if phase == 'train':
                    scheduler.step()
                epoch_loss = running_loss / dataset_sizes[phase]
                epoch_acc = running_corrects.double() / dataset_sizes[phase]
                losses += [epoch_loss, epoch_acc.item()]
                if phase == 'val' and epoch_acc > best_acc:
                    best_acc = epoch_acc
                    torch.save(model.state_dict(), best_model_params_path)
        model.load_state_dict(torch.load(best_model_params_path, weights_only=True))
    best = copy.deepcopy(model.state_dict())
    losses.append(float(sum(v.float().sum().item() for v in best.values())))
    return model


def run(weights=None, compiled=False):
    tinyresnet.torch = torch
    torch.manual_seed(0)
    model_conv = tinyresnet.ResNet()
    if weights is not None:
        model_conv.load_state_dict({k: torch.tensor(v) for k, v in weights.items() if not k.startswith("__")})
    w = {k: v.detach().numpy().copy() for k, v in model_conv.state_dict().items()}
    for param in model_conv.parameters():
        param.requires_grad = False
    num_ftrs = model_conv.fc.in_features
    torch.manual_seed(1)
    model_conv.fc = nn.Linear(num_ftrs, 2)
    if weights is not None:
        model_conv.fc.load_state_dict({"weight": torch.tensor(weights["__fc.weight"]), "bias": torch.tensor(weights["__fc.bias"])})
    w.update({"__fc." + k: v.detach().numpy().copy() for k, v in model_conv.fc.state_dict().items()})
    model_conv = model_conv.to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer_conv = optim.SGD(model_conv.fc.parameters(), lr=0.01, momentum=0.9)
    exp_lr_scheduler = lr_scheduler.StepLR(optimizer_conv, step_size=1, gamma=0.1)
    rng = np.random.default_rng(0)
    data = {p: torch.utils.data.TensorDataset(torch.tensor(rng.standard_normal((n, 3, 32, 32)).astype(np.float32)),
                                              torch.tensor(rng.integers(0, 2, n)))
            for p, n in (("train", 16), ("val", 8))}
    dataloaders = {x: torch.utils.data.DataLoader(data[x], batch_size=4, shuffle=False, num_workers=4) for x in ['train', 'val']}
    dataset_sizes = {x: len(data[x]) for x in ['train', 'val']}

    def train_step(inputs, labels):
        optimizer_conv.zero_grad()
        outputs = model_conv(inputs)
        _, preds = torch.max(outputs, 1)
        loss = criterion(outputs, labels)
        loss.backward()
        optimizer_conv.step()
        return loss, preds
    step = torch.compile(train_step) if compiled else train_step
    losses = []
    train_model(model_conv, criterion, optimizer_conv, exp_lr_scheduler, dataloaders, dataset_sizes, 2, losses, step)
    return {"losses": losses, "weights": w, "fn": step}
