# In the manner of the PyTorch tutorial "Neural Transfer Using PyTorch": ContentLoss and
# StyleLoss modules that store self.loss as they pass their input through, a gram matrix
# of the features, a Normalization module with mean/std as .view(-1, 1, 1) tensors, a
# model rebuilt layer by layer from a CNN's children (add_module, ReLU(inplace=False),
# trimmed after the last loss), LBFGS over the input image (requires_grad_(True), the
# model's requires_grad_(False)), the closure clamping the image in place under no_grad.
# A small random CNN stands in for the pretrained VGG19.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.set_default_device(device)


class ContentLoss(nn.Module):

    def __init__(self, target,):
        super(ContentLoss, self).__init__()
        self.target = target.detach()

    def forward(self, input):
        self.loss = F.mse_loss(input, self.target)
        return input


def gram_matrix(input):
    a, b, c, d = input.size()
    features = input.view(a * b, c * d)
    G = torch.mm(features, features.t())
    return G.div(a * b * c * d)


class StyleLoss(nn.Module):

    def __init__(self, target_feature):
        super(StyleLoss, self).__init__()
        self.target = gram_matrix(target_feature).detach()

    def forward(self, input):
        G = gram_matrix(input)
        self.loss = F.mse_loss(G, self.target)
        return input


class Normalization(nn.Module):
    def __init__(self, mean, std):
        super(Normalization, self).__init__()
        self.mean = torch.tensor(mean).view(-1, 1, 1)
        self.std = torch.tensor(std).view(-1, 1, 1)

    def forward(self, img):
        return (img - self.mean) / self.std


content_layers_default = ['conv_2']
style_layers_default = ['conv_1', 'conv_2', 'conv_3']


def get_style_model_and_losses(cnn, normalization_mean, normalization_std,
                               style_img, content_img,
                               content_layers=content_layers_default,
                               style_layers=style_layers_default):
    normalization = Normalization(normalization_mean, normalization_std)
    content_losses = []
    style_losses = []
    model = nn.Sequential(normalization)

    i = 0
    for layer in cnn.children():
        if isinstance(layer, nn.Conv2d):
            i += 1
            name = 'conv_{}'.format(i)
        elif isinstance(layer, nn.ReLU):
            name = 'relu_{}'.format(i)
            layer = nn.ReLU(inplace=False)
        elif isinstance(layer, nn.MaxPool2d):
            name = 'pool_{}'.format(i)
        elif isinstance(layer, nn.BatchNorm2d):
            name = 'bn_{}'.format(i)
        else:
            raise RuntimeError('Unrecognized layer: {}'.format(layer.__class__.__name__))

        model.add_module(name, layer)

        if name in content_layers:
            target = model(content_img).detach()
            content_loss = ContentLoss(target)
            model.add_module("content_loss_{}".format(i), content_loss)
            content_losses.append(content_loss)

        if name in style_layers:
            target_feature = model(style_img).detach()
            style_loss = StyleLoss(target_feature)
            model.add_module("style_loss_{}".format(i), style_loss)
            style_losses.append(style_loss)

    for i in range(len(model) - 1, -1, -1):
        if isinstance(model[i], ContentLoss) or isinstance(model[i], StyleLoss):
            break

    model = model[:(i + 1)]

    return model, style_losses, content_losses


def get_input_optimizer(input_img):
    # fewer iterations per step than the default 20: float32 rounding grows through
    # L-BFGS's curvature history on this stiff problem
    optimizer = optim.LBFGS([input_img], max_iter=4)
    return optimizer


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    cnn = nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(inplace=True),
        nn.Conv2d(4, 4, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2, 2),
        nn.Conv2d(4, 8, 3, padding=1), nn.ReLU(inplace=True),
        nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(inplace=True)).eval()
    if weights is not None:
        cnn.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in cnn.state_dict().items()}
    cnn_normalization_mean = torch.tensor([0.485, 0.456, 0.406])
    cnn_normalization_std = torch.tensor([0.229, 0.224, 0.225])
    rng = np.random.default_rng(0)
    style_img = torch.from_numpy(rng.uniform(0, 1, (1, 3, 8, 8)).astype(np.float32))
    content_img = torch.from_numpy(rng.uniform(0, 1, (1, 3, 8, 8)).astype(np.float32))
    input_img = content_img.clone()
    assert style_img.size() == content_img.size(), \
        "we need to import style and content images of the same size"

    num_steps, style_weight, content_weight = 6, 1000000, 1
    model, style_losses, content_losses = get_style_model_and_losses(cnn,
        cnn_normalization_mean, cnn_normalization_std, style_img, content_img)
    input_img.requires_grad_(True)
    model.eval()
    model.requires_grad_(False)
    optimizer = get_input_optimizer(input_img)
    losses = []
    run_ = [0]

    def closure():
        with torch.no_grad():
            input_img.clamp_(0, 1)

        optimizer.zero_grad()
        model(input_img)
        style_score = 0
        content_score = 0

        for sl in style_losses:
            style_score += sl.loss
        for cl in content_losses:
            content_score += cl.loss

        style_score *= style_weight
        content_score *= content_weight

        loss = style_score + content_score
        loss.backward()
        return style_score + content_score

    f = torch.compile(closure) if compiled else closure
    # how many times L-BFGS evaluated the closure, and the losses it saw
    def counted():
        run_[0] += 1
        loss = f()
        losses.append(loss.item())
        return loss

    while run_[0] <= num_steps:
        optimizer.step(counted)

    with torch.no_grad():
        input_img.clamp_(0, 1)
    losses.append(float(input_img.sum()))
    torch.set_default_device("cpu")
    return {"losses": losses, "weights": w, "fn": f}
