# In the manner of yunjey/pytorch-tutorial's convolutional neural network: two
# nn.Sequential layers of Conv2d/BatchNorm2d/ReLU/MaxPool2d, out.reshape(out.size(0), -1)
# into a Linear, Adam, then model.eval() (BatchNorm's running statistics) in a test loop
# under torch.no_grad().
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn

device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')

num_epochs = 2
num_classes = 10
batch_size = 16
learning_rate = 0.001


class ConvNet(nn.Module):
    def __init__(self, num_classes=10):
        super(ConvNet, self).__init__()
        self.layer1 = nn.Sequential(
            nn.Conv2d(1, 4, kernel_size=5, stride=1, padding=2),
            nn.BatchNorm2d(4),
            nn.ReLU(),
            nn.MaxPool2d(kernel_size=2, stride=2))
        self.layer2 = nn.Sequential(
            nn.Conv2d(4, 8, kernel_size=5, stride=1, padding=2),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.MaxPool2d(kernel_size=2, stride=2))
        self.fc = nn.Linear(3 * 3 * 8, num_classes)

    def forward(self, x):
        out = self.layer1(x)
        out = self.layer2(out)
        out = out.reshape(out.size(0), -1)
        out = self.fc(out)
        return out


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(2)
    images = rng.random((80, 1, 12, 12)).astype(np.float32)
    labels = rng.integers(0, num_classes, 80)
    train_loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.tensor(images[:64]), torch.tensor(labels[:64])),
        batch_size=batch_size, shuffle=False)
    test_loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.tensor(images[64:]), torch.tensor(labels[64:])),
        batch_size=batch_size, shuffle=False)
    model = ConvNet(num_classes).to(device)
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate)

    def train_step(images, labels):
        outputs = model(images)
        loss = criterion(outputs, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    total_step = len(train_loader)
    for epoch in range(num_epochs):
        for i, (images, labels) in enumerate(train_loader):
            images = images.to(device)
            labels = labels.to(device)
            loss = step(images, labels)
            losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        correct = 0
        total = 0
        for images, labels in test_loader:
            outputs = model(images)
            _, predicted = torch.max(outputs.data, 1)
            total += labels.size(0)
            correct += (predicted == labels).sum().item()
    losses += [correct / total, float(model.layer1[1].running_var.mean()),
               int(model.layer2[1].num_batches_tracked)]
    return {"losses": losses, "weights": w, "fn": step}
