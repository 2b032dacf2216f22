# In the manner of the PyTorch tutorial "Knowledge Distillation": a teacher trained with
# CrossEntropyLoss(label_smoothing=), then a smaller student trained on a weighted sum of
# the soft-target loss (softmax / log_softmax at a temperature, KL divergence as
# nn.KLDivLoss(reduction="batchmean") and as log_target=True, scaled by T**2) and the
# hard-label loss, with the teacher frozen in eval() under no_grad.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset

device = "cuda" if torch.cuda.is_available() else "cpu"


class DeepNN(nn.Module):
    def __init__(self, num_classes=4):
        super(DeepNN, self).__init__()
        self.features = nn.Sequential(
            nn.Linear(12, 48), nn.ReLU(), nn.Linear(48, 48), nn.ReLU(), nn.Linear(48, 32), nn.ReLU())
        self.classifier = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Dropout(0.0), nn.Linear(32, num_classes))

    def forward(self, x):
        x = self.features(x)
        x = torch.flatten(x, 1)
        x = self.classifier(x)
        return x


class LightNN(nn.Module):
    def __init__(self, num_classes=4):
        super(LightNN, self).__init__()
        self.features = nn.Sequential(nn.Linear(12, 16), nn.ReLU())
        self.classifier = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Dropout(0.0), nn.Linear(16, num_classes))

    def forward(self, x):
        x = self.features(x)
        x = torch.flatten(x, 1)
        x = self.classifier(x)
        return x


def train(model, train_loader, epochs, learning_rate, device, losses, compiled):
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    optimizer = optim.Adam(model.parameters(), lr=learning_rate)

    def step(inputs, labels):
        optimizer.zero_grad()
        outputs = model(inputs)
        loss = criterion(outputs, labels)
        loss.backward()
        optimizer.step()
        return loss

    fn = torch.compile(step) if compiled else step
    model.train()
    for epoch in range(epochs):
        running_loss = 0.0
        for inputs, labels in train_loader:
            inputs, labels = inputs.to(device), labels.to(device)
            loss = fn(inputs, labels)
            running_loss += loss.item()
        losses.append(running_loss / len(train_loader))
    return fn


def train_knowledge_distillation(teacher, student, train_loader, epochs, learning_rate, T,
                                 soft_target_loss_weight, ce_loss_weight, device, losses, compiled):
    ce_loss = nn.CrossEntropyLoss()
    kl = nn.KLDivLoss(reduction="batchmean", log_target=True)
    optimizer = optim.Adam(student.parameters(), lr=learning_rate)

    def step(inputs, labels):
        optimizer.zero_grad()
        with torch.no_grad():
            teacher_logits = teacher(inputs)
        student_logits = student(inputs)
        soft_targets = nn.functional.softmax(teacher_logits / T, dim=-1)
        soft_prob = nn.functional.log_softmax(student_logits / T, dim=-1)
        soft_targets_loss = torch.sum(soft_targets * (soft_targets.log() - soft_prob)) / soft_prob.size()[0] * (T**2)
        kl_loss = kl(soft_prob, F.log_softmax(teacher_logits / T, dim=-1)) * (T**2)
        label_loss = ce_loss(student_logits, labels)
        loss = soft_target_loss_weight * soft_targets_loss + ce_loss_weight * label_loss
        loss.backward()
        optimizer.step()
        return loss, kl_loss

    fn = torch.compile(step) if compiled else step
    teacher.eval()
    student.train()
    for epoch in range(epochs):
        running_loss = 0.0
        for inputs, labels in train_loader:
            inputs, labels = inputs.to(device), labels.to(device)
            loss, kl_loss = fn(inputs, labels)
            running_loss += loss.item()
            losses.append(kl_loss.item())
        losses.append(running_loss / len(train_loader))
    return fn


def test(model, test_loader, device):
    model.to(device)
    model.eval()
    correct = 0
    total = 0
    with torch.no_grad():
        for inputs, labels in test_loader:
            inputs, labels = inputs.to(device), labels.to(device)
            outputs = model(inputs)
            _, predicted = torch.max(outputs.data, 1)
            total += labels.size(0)
            correct += (predicted == labels).sum().item()
    accuracy = 100 * correct / total
    return accuracy


def run(weights=None, compiled=False):
    torch.manual_seed(42)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((96, 12)).astype(np.float32)
    Y = (np.argmax(X[:, :4] + 0.5 * X[:, 4:8], 1)).astype(np.int64)
    train_loader = DataLoader(TensorDataset(torch.from_numpy(X[:64]), torch.from_numpy(Y[:64])), batch_size=16, shuffle=False)
    test_loader = DataLoader(TensorDataset(torch.from_numpy(X[64:]), torch.from_numpy(Y[64:])), batch_size=16, shuffle=False)
    nn_deep = DeepNN(num_classes=4).to(device)
    nn_light = LightNN(num_classes=4).to(device)
    if weights is not None:
        nn_deep.load_state_dict({k[2:]: torch.tensor(v) for k, v in weights.items() if k.startswith("T.")})
        nn_light.load_state_dict({k[2:]: torch.tensor(v) for k, v in weights.items() if k.startswith("S.")})
    w = {"T." + k: v.detach().numpy().copy() for k, v in nn_deep.state_dict().items()}
    w.update({"S." + k: v.detach().numpy().copy() for k, v in nn_light.state_dict().items()})
    total_params_deep = "{:,}".format(sum(p.numel() for p in nn_deep.parameters()))
    losses = [float(total_params_deep.replace(",", ""))]
    f1 = train(nn_deep, train_loader, epochs=3, learning_rate=0.003, device=device, losses=losses, compiled=compiled)
    losses.append(test(nn_deep, test_loader, device))
    f2 = train_knowledge_distillation(teacher=nn_deep, student=nn_light, train_loader=train_loader, epochs=3,
                                      learning_rate=0.003, T=2, soft_target_loss_weight=0.25, ce_loss_weight=0.75,
                                      device=device, losses=losses, compiled=compiled)
    losses.append(test(nn_light, test_loader, device))
    return {"losses": losses, "weights": w, "fn": [f1, f2]}
