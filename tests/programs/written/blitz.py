# In the manner of the PyTorch "60 minute blitz" tutorials: tensors, autograd,
# Written for dualgraph's tests with the public program's idioms, not copied from it; it
# keeps their style (super(Class, self), unused loop variables), so ruff leaves it alone.
# ruff: noqa
# neural networks, the CIFAR-10 classifier (random data).
import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


def tensors():
    out = []
    data = [[1, 2], [3, 4]]
    x_data = torch.tensor(data)
    np_array = np.array(data)
    x_np = torch.from_numpy(np_array)
    x_ones = torch.ones_like(x_data)
    x_rand = torch.rand_like(x_data, dtype=torch.float)
    out += [x_ones.sum().item(), float(x_rand.shape[0]), float(x_np.sum())]
    shape = (2, 3,)
    rand_tensor = torch.rand(shape)
    ones_tensor = torch.ones(shape)
    zeros_tensor = torch.zeros(shape)
    out += [float(rand_tensor.dtype == torch.float32), ones_tensor.sum().item(), zeros_tensor.sum().item()]
    tensor = torch.ones(4, 4)
    out.append(float(tensor.device.type == "cpu"))
    if torch.cuda.is_available():
        tensor = tensor.to("cuda")
    if torch.accelerator.is_available():
        tensor = tensor.to(torch.accelerator.current_accelerator())
    tensor[:, 1] = 0
    out += [tensor[0].sum().item(), tensor[:, 0].sum().item(), tensor[..., -1].sum().item()]
    t1 = torch.cat([tensor, tensor, tensor], dim=1)
    out.append(float(t1.shape[1]))
    y1 = tensor @ tensor.T
    y2 = tensor.matmul(tensor.T)
    y3 = torch.rand_like(y1)
    torch.matmul(tensor, tensor.T, out=y3)
    z1 = tensor * tensor
    z2 = tensor.mul(tensor)
    z3 = torch.rand_like(tensor)
    torch.mul(tensor, tensor, out=z3)
    out += [y1.sum().item(), y2.sum().item(), y3.sum().item(), z1.sum().item(), z2.sum().item(), z3.sum().item()]
    agg = tensor.sum()
    agg_item = agg.item()
    out.append(agg_item)
    tensor.add_(5)
    out.append(tensor.sum().item())
    t = torch.ones(5)
    n = t.numpy()
    t.add_(1)
    out.append(float(n.sum()))
    n = np.ones(5)
    t = torch.from_numpy(n)
    np.add(n, 1, out=n)
    out.append(t.sum().item())
    return out


def autograd():
    out = []
    a = torch.tensor([2., 3.], requires_grad=True)
    b = torch.tensor([6., 4.], requires_grad=True)
    Q = 3 * a ** 3 - b ** 2
    external_grad = torch.tensor([1., 1.])
    Q.backward(gradient=external_grad)
    out += [float(all(9 * a ** 2 == a.grad)), float(all(-2 * b == b.grad))]
    x = torch.rand(5, 5)
    y = torch.rand(5, 5)
    z = torch.rand((5, 5), requires_grad=True)
    a = x + y
    out.append(float(a.requires_grad))
    b = x + z
    out.append(float(b.requires_grad))
    x = torch.ones(2, 2, requires_grad=True)
    y = x + 2
    out.append(float(y.grad_fn is not None))
    z = y * y * 3
    o = z.mean()
    o.backward()
    out.append(x.grad.sum().item())
    x = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    y = x * 2
    while y.data.norm() < 1000:
        y = y * 2
    v = torch.tensor([0.1, 1.0, 0.0001], dtype=torch.float)
    y.backward(v)
    out += x.grad.tolist()
    with torch.no_grad():
        out.append(float((x ** 2).requires_grad))
    y = x.detach()
    out.append(float(y.requires_grad))
    out.append(float(x.eq(y).all()))
    return out


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        x = self.fc3(x)
        return x


class LeNet(nn.Module):
    def __init__(self):
        super(LeNet, self).__init__()
        self.conv1 = nn.Conv2d(1, 6, 5)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, input):
        c1 = F.relu(self.conv1(input))
        s2 = F.max_pool2d(c1, (2, 2))
        c3 = F.relu(self.conv2(s2))
        s4 = F.max_pool2d(c3, 2)
        s4 = torch.flatten(s4, 1)
        f5 = F.relu(self.fc1(s4))
        f6 = F.relu(self.fc2(f5))
        output = self.fc3(f6)
        return output


def run(weights=None, compiled=False):
    out = {"losses": tensors()[:1] + autograd(), "weights": {}}
    torch.manual_seed(0)
    net = LeNet()
    if weights is not None:
        net.load_state_dict({k[6:]: torch.tensor(v) for k, v in weights.items() if k.startswith("lenet.")})
    out["weights"].update({"lenet." + k: v.detach().numpy().copy() for k, v in net.state_dict().items()})
    params = list(net.parameters())
    out["losses"].append(float(len(params)))
    out["losses"].append(float(params[0].size()[0]))
    rng = np.random.default_rng(0)
    input = torch.tensor(rng.standard_normal((1, 1, 32, 32)), dtype=torch.float32)
    o = net(input)
    net.zero_grad()
    o.backward(torch.tensor(rng.standard_normal((1, 10)), dtype=torch.float32))
    out["losses"].append(net.conv1.bias.grad.sum().item())
    target = torch.tensor(rng.standard_normal(10), dtype=torch.float32)
    target = target.view(1, -1)
    criterion = nn.MSELoss()
    loss = criterion(net(input), target)
    out["losses"].append(loss.item())
    print(loss.grad_fn)  # MSELoss
    print(loss.grad_fn.next_functions[0][0])  # Linear
    net.zero_grad()
    loss.backward()
    learning_rate = 0.01
    for f in net.parameters():
        f.data.sub_(f.grad.data * learning_rate)
    optimizer = optim.SGD(net.parameters(), lr=0.01)
    optimizer.zero_grad()
    output = net(input)
    loss = criterion(output, target)
    loss.backward()
    optimizer.step()
    out["losses"].append(criterion(net(input), target).item())

    torch.manual_seed(1)
    net = Net()
    if weights is not None:
        net.load_state_dict({k[4:]: torch.tensor(v) for k, v in weights.items() if k.startswith("net.")})
    out["weights"].update({"net." + k: v.detach().numpy().copy() for k, v in net.state_dict().items()})
    criterion = nn.CrossEntropyLoss()
    optimizer = optim.SGD(net.parameters(), lr=0.001, momentum=0.9)
    xs = rng.standard_normal((40, 3, 32, 32)).astype(np.float32)
    ys = rng.integers(0, 10, 40)
    trainloader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.tensor(xs), torch.tensor(ys)), batch_size=4,
        shuffle=False, num_workers=2)

    def train_step(inputs, labels):
        optimizer.zero_grad()
        outputs = net(inputs)
        loss = criterion(outputs, labels)
        loss.backward()
        optimizer.step()
        return loss
    step = torch.compile(train_step) if compiled else train_step
    out["fn"] = step
    for epoch in range(1):
        running_loss = 0.0
        for i, data in enumerate(trainloader, 0):
            inputs, labels = data
            loss = step(inputs, labels)
            running_loss += loss.item()
            out["losses"].append(loss.item())
    out["losses"].append(running_loss)
    PATH = os.path.join(tempfile.mkdtemp(), "cifar_net.pth")
    torch.save(net.state_dict(), PATH)
    net = Net()
    net.load_state_dict(torch.load(PATH, weights_only=True))
    correct = 0
    total = 0
    with torch.no_grad():
        for data in trainloader:
            images, labels = data
            outputs = net(images)
            _, predicted = torch.max(outputs.data, 1)
            total += labels.size(0)
            correct += (predicted == labels).sum().item()
    out["losses"].append(100 * correct // total)
    classes = ('plane', 'car', 'bird', 'cat', 'deer', 'dog', 'frog', 'horse', 'ship', 'truck')
    correct_pred = {classname: 0 for classname in classes}
    total_pred = {classname: 0 for classname in classes}
    with torch.no_grad():
        for data in trainloader:
            images, labels = data
            outputs = net(images)
            _, predictions = torch.max(outputs, 1)
            for label, prediction in zip(labels, predictions):
                if label == prediction:
                    correct_pred[classes[label]] += 1
                total_pred[classes[label]] += 1
    out["losses"] += [float(correct_pred[c]) for c in classes]
    return out
