# In the manner of pytorch/examples mnist_hogwild (a model in shared memory trained by
# worker processes started with torch.multiprocessing, then tested in the parent), with
# one worker and small synthetic data. The worker sends its losses back through a queue
# (a test device: the public program prints them).
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 4, kernel_size=5)
        self.fc1 = nn.Linear(4 * 4 * 4, 16)
        self.fc2 = nn.Linear(16, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = x.view(-1, 4 * 4 * 4)
        x = F.relu(self.fc1(x))
        x = self.fc2(x)
        return F.log_softmax(x, dim=1)


def make_dataset(seed, n):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 1, 12, 12)).astype(np.float32)
    y = rng.integers(0, 10, n)
    return TensorDataset(torch.from_numpy(x), torch.from_numpy(y))


def train(rank, args, model, device, dataset, dataloader_kwargs, queue):
    torch.manual_seed(args["seed"] + rank)
    train_loader = DataLoader(dataset, **dataloader_kwargs)
    optimizer = optim.SGD(model.parameters(), lr=args["lr"], momentum=args["momentum"])

    def step(data, target):
        optimizer.zero_grad()
        output = model(data.to(device))
        loss = F.nll_loss(output, target.to(device))
        loss.backward()
        optimizer.step()
        return loss

    f = torch.compile(step) if args["compiled"] else step
    losses = []
    for epoch in range(1, args["epochs"] + 1):
        model.train()
        for batch_idx, (data, target) in enumerate(train_loader):
            losses.append(f(data, target).item())
    queue.put(losses)


def test(args, model, device, dataset, dataloader_kwargs):
    test_loader = DataLoader(dataset, **dataloader_kwargs)
    model.eval()
    test_loss = 0
    correct = 0
    with torch.no_grad():
        for data, target in test_loader:
            output = model(data.to(device))
            test_loss += F.nll_loss(output, target.to(device), reduction='sum').item()
            pred = output.max(1)[1]
            correct += pred.eq(target.to(device)).sum().item()
    test_loss /= len(test_loader.dataset)
    return [test_loss, correct]


def run(weights=None, compiled=False):
    args = {"seed": 1, "lr": 0.05, "momentum": 0.5, "epochs": 2, "num_processes": 1,
            "compiled": compiled}
    torch.manual_seed(args["seed"])
    device = torch.device("cpu")
    model = Net().to(device)
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    model.share_memory()  # gradients are allocated lazily, so they are not shared here
    dataset1, dataset2 = make_dataset(0, 32), make_dataset(1, 16)
    kwargs = {'batch_size': 8, 'shuffle': False}
    queue = mp.SimpleQueue()
    processes = []
    for rank in range(args["num_processes"]):
        p = mp.Process(target=train, args=(rank, args, model, device, dataset1, kwargs, queue))
        p.start()
        processes.append(p)
    losses = []
    for p in processes:
        losses += queue.get()
        p.join()
    losses += test(args, model, device, dataset2, kwargs)
    losses.append(float(all(p.is_shared() for p in model.parameters())))
    return {"losses": losses, "weights": w, "fn": []}
