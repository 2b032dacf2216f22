# In the manner of Grad-CAM implementations (jacobgil/pytorch-grad-cam's
# ``ActivationsAndGradients``, and the many tutorials after it; MIT licence): a small CNN
# classifier trained with ``nn.CrossEntropyLoss`` and SGD momentum while a forward hook
# (``register_forward_hook``) keeps ``output.detach()`` of its last conv block; then, under
# ``model.eval()``, Grad-CAM on that block: the forward hook stores activations, a
# ``register_full_backward_hook`` stores ``grad_output[0]`` (and a
# ``output.register_hook`` in a second hook stores the same gradient), ``model.zero_grad()``
# and ``score.backward()`` of a one-hot target, weights by ``grads.mean(dim=(2, 3),
# keepdim=True)``, ``F.relu((weights * acts).sum(1, keepdim=True))``, ``F.interpolate(...,
# mode='bilinear', align_corners=False)`` to the input size, min-max normalisation, and the
# hooks' handles removed with ``handle.remove()``.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self, num_classes=3):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 6, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2),
            nn.Conv2d(6, 8, 3, padding=1), nn.ReLU(inplace=True))
        self.pool = nn.AdaptiveAvgPool2d((1, 1))
        self.classifier = nn.Linear(8, num_classes)

    def forward(self, x):
        x = self.features(x)
        x = self.pool(x)
        x = torch.flatten(x, 1)
        return self.classifier(x)


class ActivationsAndGradients:
    def __init__(self, model, target_layer):
        self.model = model
        self.gradients = []
        self.activations = []
        self.handles = []
        self.handles.append(target_layer.register_forward_hook(self.save_activation))
        self.handles.append(target_layer.register_forward_hook(self.save_gradient))

    def save_activation(self, module, input, output):
        self.activations.append(output.cpu().detach())

    def save_gradient(self, module, input, output):
        def _store_grad(grad):
            self.gradients = [grad.cpu().detach()] + self.gradients
        output.register_hook(_store_grad)

    def __call__(self, x):
        self.gradients = []
        self.activations = []
        return self.model(x)

    def release(self):
        for handle in self.handles:
            handle.remove()


class GradCAM:
    def __init__(self, model, target_layer):
        self.model = model.eval()
        self.activations_and_grads = ActivationsAndGradients(self.model, target_layer)
        self.backward_grads = []
        self.handle = target_layer.register_full_backward_hook(
            lambda m, gin, gout: self.backward_grads.append(gout[0].detach()))

    def __call__(self, input_tensor, targets=None):
        outputs = self.activations_and_grads(input_tensor)
        if targets is None:
            targets = np.argmax(outputs.cpu().data.numpy(), axis=-1)
        self.model.zero_grad()
        one_hot = F.one_hot(torch.tensor(targets), outputs.shape[-1]).float()
        score = (outputs * one_hot).sum()
        score.backward(retain_graph=True)
        acts = self.activations_and_grads.activations[-1]
        grads = self.activations_and_grads.gradients[-1]
        weights = grads.mean(dim=(2, 3), keepdim=True)
        cam = F.relu((weights * acts).sum(1, keepdim=True))
        cam = F.interpolate(cam, size=input_tensor.shape[-2:], mode='bilinear', align_corners=False)
        flat = cam.view(cam.size(0), -1)
        lo = flat.min(1, keepdim=True)[0]
        hi = flat.max(1, keepdim=True)[0]
        cam = ((flat - lo) / (hi - lo + 1e-7)).view_as(cam)
        return cam, (self.backward_grads[-1] - grads).abs().max().item()

    def release(self):
        self.activations_and_grads.release()
        self.handle.remove()


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(1003)
    model = Net()
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    features = {}

    def keep(module, inp, out):
        features["last"] = out.detach()

    handle = model.features.register_forward_hook(keep)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    protos = rng.normal(size=(3, 1, 8, 8)).astype(np.float32)
    data = []
    for _ in range(3):
        y = rng.integers(0, 3, size=6)
        x = protos[y] + 0.5 * rng.normal(size=(6, 1, 8, 8)).astype(np.float32)
        data.append((torch.from_numpy(x), torch.from_numpy(y)))

    def train_step(inputs, labels):
        optimizer.zero_grad()
        outputs = model(inputs)
        loss = criterion(outputs, labels)
        loss.backward()
        optimizer.step()
        return loss

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    model.train()
    for epoch in range(3):
        for inputs, labels in data:
            loss = step(inputs, labels)
            losses.append(loss.item())
        losses.append(float(features["last"].mean()))
    handle.remove()
    cam = GradCAM(model=model, target_layer=model.features)
    grayscale_cam, diff = cam(data[0][0][:4])
    losses += grayscale_cam.sum(dim=(1, 2, 3)).tolist()
    losses.append(diff)
    losses.append(len(cam.activations_and_grads.activations))
    cam.release()
    model(data[0][0])
    losses.append(len(cam.activations_and_grads.activations))
    return {"losses": losses, "weights": w, "fn": step}
