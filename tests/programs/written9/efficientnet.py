# In the manner of lukemelas/EfficientNet-PyTorch (Apache licence) and timm's
# efficientnet blocks (Apache licence): ``MemoryEfficientSwish`` as an
# ``torch.autograd.Function`` saving its input, ``Conv2dStaticSamePadding`` (an
# ``nn.Conv2d`` subclass padding with ``nn.ZeroPad2d`` sized by ``math.ceil`` and calling
# ``F.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation,
# self.groups)``), ``round_filters``/``round_repeats``, ``MBConvBlock`` (expansion,
# depthwise conv, squeeze-and-excitation by ``F.adaptive_avg_pool2d(x, 1)`` and
# ``torch.sigmoid(x_squeezed) * x``, BatchNorm with ``momentum=1 - 0.99, eps=1e-3``),
# ``drop_connect`` by ``keep_prob + torch.rand([batch_size, 1, 1, 1], dtype=, device=)``
# and ``torch.floor``, ``set_swish(memory_efficient=False)`` to ``nn.SiLU``, a timm-style
# ``DropPath`` with ``x.new_empty(shape).bernoulli_`` at rate 0, ``nn.Flatten`` head, and
# RMSprop (``alpha=0.9, eps=1e-3, momentum=0.9``) with label smoothing and an eval pass.
# The drop-connect rate is tiny so that every sample is kept (torch's and dualgraph's
# random streams differ), which keeps ``torch.rand``/``floor`` in the step.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import collections
import math

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

BlockArgs = collections.namedtuple('BlockArgs', [
    'num_repeat', 'kernel_size', 'stride', 'expand_ratio',
    'input_filters', 'output_filters', 'se_ratio', 'id_skip'])
GlobalParams = collections.namedtuple('GlobalParams', [
    'width_coefficient', 'depth_coefficient', 'image_size', 'dropout_rate',
    'num_classes', 'batch_norm_momentum', 'batch_norm_epsilon',
    'drop_connect_rate', 'depth_divisor', 'min_depth'])


class SwishImplementation(torch.autograd.Function):
    @staticmethod
    def forward(ctx, i):
        result = i * torch.sigmoid(i)
        ctx.save_for_backward(i)
        return result

    @staticmethod
    def backward(ctx, grad_output):
        i = ctx.saved_tensors[0]
        sigmoid_i = torch.sigmoid(i)
        return grad_output * (sigmoid_i * (1 + i * (1 - sigmoid_i)))


class MemoryEfficientSwish(nn.Module):
    def forward(self, x):
        return SwishImplementation.apply(x)


def round_filters(filters, global_params):
    multiplier = global_params.width_coefficient
    if not multiplier:
        return filters
    divisor = global_params.depth_divisor
    min_depth = global_params.min_depth
    filters *= multiplier
    min_depth = min_depth or divisor
    new_filters = max(min_depth, int(filters + divisor / 2) // divisor * divisor)
    if new_filters < 0.9 * filters:
        new_filters += divisor
    return int(new_filters)


def round_repeats(repeats, global_params):
    multiplier = global_params.depth_coefficient
    if not multiplier:
        return repeats
    return int(math.ceil(multiplier * repeats))


def drop_connect(inputs, p, training):
    assert 0 <= p <= 1, 'p must be in range of [0,1]'
    if not training:
        return inputs
    batch_size = inputs.shape[0]
    keep_prob = 1 - p
    random_tensor = keep_prob
    random_tensor += torch.rand([batch_size, 1, 1, 1], dtype=inputs.dtype, device=inputs.device)
    binary_tensor = torch.floor(random_tensor)
    output = inputs / keep_prob * binary_tensor
    return output


def drop_path(x, drop_prob: float = 0., training: bool = False, scale_by_keep: bool = True):
    if drop_prob == 0. or not training:
        return x
    keep_prob = 1 - drop_prob
    shape = (x.shape[0],) + (1,) * (x.ndim - 1)
    random_tensor = x.new_empty(shape).bernoulli_(keep_prob)
    if keep_prob > 0.0 and scale_by_keep:
        random_tensor.div_(keep_prob)
    return x * random_tensor


class DropPath(nn.Module):
    def __init__(self, drop_prob: float = 0., scale_by_keep: bool = True):
        super(DropPath, self).__init__()
        self.drop_prob = drop_prob
        self.scale_by_keep = scale_by_keep

    def forward(self, x):
        return drop_path(x, self.drop_prob, self.training, self.scale_by_keep)

    def extra_repr(self):
        return f'drop_prob={round(self.drop_prob, 3):0.3f}'


class Conv2dStaticSamePadding(nn.Conv2d):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, image_size=None, **kwargs):
        super().__init__(in_channels, out_channels, kernel_size, stride, **kwargs)
        self.stride = self.stride if len(self.stride) == 2 else [self.stride[0]] * 2
        assert image_size is not None
        ih, iw = (image_size, image_size) if isinstance(image_size, int) else image_size
        kh, kw = self.weight.size()[-2:]
        sh, sw = self.stride
        oh, ow = math.ceil(ih / sh), math.ceil(iw / sw)
        pad_h = max((oh - 1) * self.stride[0] + (kh - 1) * self.dilation[0] + 1 - ih, 0)
        pad_w = max((ow - 1) * self.stride[1] + (kw - 1) * self.dilation[1] + 1 - iw, 0)
        if pad_h > 0 or pad_w > 0:
            self.static_padding = nn.ZeroPad2d((pad_w // 2, pad_w - pad_w // 2,
                                                pad_h // 2, pad_h - pad_h // 2))
        else:
            self.static_padding = nn.Identity()

    def forward(self, x):
        x = self.static_padding(x)
        x = F.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)
        return x


def calculate_output_image_size(input_image_size, stride):
    if input_image_size is None:
        return None
    if isinstance(input_image_size, int):
        image_height, image_width = input_image_size, input_image_size
    else:
        image_height, image_width = input_image_size
    stride = stride if isinstance(stride, int) else stride[0]
    image_height = int(math.ceil(image_height / stride))
    image_width = int(math.ceil(image_width / stride))
    return [image_height, image_width]


class MBConvBlock(nn.Module):
    def __init__(self, block_args, global_params, image_size=None):
        super().__init__()
        self._block_args = block_args
        self._bn_mom = 1 - global_params.batch_norm_momentum
        self._bn_eps = global_params.batch_norm_epsilon
        self.has_se = (self._block_args.se_ratio is not None) and (0 < self._block_args.se_ratio <= 1)
        self.id_skip = block_args.id_skip

        inp = self._block_args.input_filters
        oup = self._block_args.input_filters * self._block_args.expand_ratio
        if self._block_args.expand_ratio != 1:
            self._expand_conv = Conv2dStaticSamePadding(inp, oup, 1, bias=False, image_size=image_size)
            self._bn0 = nn.BatchNorm2d(num_features=oup, momentum=self._bn_mom, eps=self._bn_eps)
        k = self._block_args.kernel_size
        s = self._block_args.stride
        self._depthwise_conv = Conv2dStaticSamePadding(
            in_channels=oup, out_channels=oup, groups=oup,
            kernel_size=k, stride=s, bias=False, image_size=image_size)
        self._bn1 = nn.BatchNorm2d(num_features=oup, momentum=self._bn_mom, eps=self._bn_eps)
        image_size = calculate_output_image_size(image_size, s)
        if self.has_se:
            num_squeezed_channels = max(1, int(self._block_args.input_filters * self._block_args.se_ratio))
            self._se_reduce = Conv2dStaticSamePadding(oup, num_squeezed_channels, 1, image_size=[1, 1])
            self._se_expand = Conv2dStaticSamePadding(num_squeezed_channels, oup, 1, image_size=[1, 1])
        final_oup = self._block_args.output_filters
        self._project_conv = Conv2dStaticSamePadding(oup, final_oup, 1, bias=False, image_size=image_size)
        self._bn2 = nn.BatchNorm2d(num_features=final_oup, momentum=self._bn_mom, eps=self._bn_eps)
        self._swish = MemoryEfficientSwish()

    def forward(self, inputs, drop_connect_rate=None):
        x = inputs
        if self._block_args.expand_ratio != 1:
            x = self._expand_conv(inputs)
            x = self._bn0(x)
            x = self._swish(x)
        x = self._depthwise_conv(x)
        x = self._bn1(x)
        x = self._swish(x)
        if self.has_se:
            x_squeezed = F.adaptive_avg_pool2d(x, 1)
            x_squeezed = self._se_reduce(x_squeezed)
            x_squeezed = self._swish(x_squeezed)
            x_squeezed = self._se_expand(x_squeezed)
            x = torch.sigmoid(x_squeezed) * x
        x = self._project_conv(x)
        x = self._bn2(x)
        input_filters, output_filters = self._block_args.input_filters, self._block_args.output_filters
        if self.id_skip and self._block_args.stride == 1 and input_filters == output_filters:
            if drop_connect_rate:
                x = drop_connect(x, p=drop_connect_rate, training=self.training)
            x = x + inputs
        return x

    def set_swish(self, memory_efficient=True):
        self._swish = MemoryEfficientSwish() if memory_efficient else nn.SiLU()


class EfficientNet(nn.Module):
    def __init__(self, blocks_args=None, global_params=None):
        super().__init__()
        self._global_params = global_params
        self._blocks_args = blocks_args
        bn_mom = 1 - self._global_params.batch_norm_momentum
        bn_eps = self._global_params.batch_norm_epsilon
        image_size = global_params.image_size
        in_channels = 3
        out_channels = round_filters(8, self._global_params)
        self._conv_stem = Conv2dStaticSamePadding(in_channels, out_channels, kernel_size=3, stride=2, bias=False,
                                                  image_size=image_size)
        self._bn0 = nn.BatchNorm2d(num_features=out_channels, momentum=bn_mom, eps=bn_eps)
        image_size = calculate_output_image_size(image_size, 2)
        self._blocks = nn.ModuleList([])
        for block_args in self._blocks_args:
            block_args = block_args._replace(
                input_filters=round_filters(block_args.input_filters, self._global_params),
                output_filters=round_filters(block_args.output_filters, self._global_params),
                num_repeat=round_repeats(block_args.num_repeat, self._global_params))
            self._blocks.append(MBConvBlock(block_args, self._global_params, image_size=image_size))
            image_size = calculate_output_image_size(image_size, block_args.stride)
            if block_args.num_repeat > 1:
                block_args = block_args._replace(input_filters=block_args.output_filters, stride=1)
            for _ in range(block_args.num_repeat - 1):
                self._blocks.append(MBConvBlock(block_args, self._global_params, image_size=image_size))
        in_channels = block_args.output_filters
        out_channels = round_filters(32, self._global_params)
        self._conv_head = Conv2dStaticSamePadding(in_channels, out_channels, kernel_size=1, bias=False,
                                                  image_size=image_size)
        self._bn1 = nn.BatchNorm2d(num_features=out_channels, momentum=bn_mom, eps=bn_eps)
        self._avg_pooling = nn.AdaptiveAvgPool2d(1)
        self._dropout = nn.Dropout(self._global_params.dropout_rate)
        self._fc = nn.Linear(out_channels, self._global_params.num_classes)
        self._swish = MemoryEfficientSwish()
        self.drop_path = DropPath(0.0)
        self.flatten = nn.Flatten(start_dim=1)

    def set_swish(self, memory_efficient=True):
        self._swish = MemoryEfficientSwish() if memory_efficient else nn.SiLU()
        for block in self._blocks:
            block.set_swish(memory_efficient)

    def extract_features(self, inputs):
        x = self._swish(self._bn0(self._conv_stem(inputs)))
        for idx, block in enumerate(self._blocks):
            drop_connect_rate = self._global_params.drop_connect_rate
            if drop_connect_rate:
                drop_connect_rate *= float(idx) / len(self._blocks)
            x = block(x, drop_connect_rate=drop_connect_rate)
        x = self._swish(self._bn1(self._conv_head(x)))
        return x

    def forward(self, inputs):
        x = self.extract_features(inputs)
        x = self._avg_pooling(x)
        x = self.flatten(self.drop_path(x))
        x = self._dropout(x)
        x = self._fc(x)
        return x


def efficientnet_params():
    blocks_args = [
        BlockArgs(num_repeat=1, kernel_size=3, stride=1, expand_ratio=1, input_filters=8, output_filters=8,
                  se_ratio=0.25, id_skip=True),
        BlockArgs(num_repeat=2, kernel_size=3, stride=2, expand_ratio=4, input_filters=8, output_filters=12,
                  se_ratio=0.25, id_skip=True),
        BlockArgs(num_repeat=1, kernel_size=5, stride=1, expand_ratio=2, input_filters=12, output_filters=12,
                  se_ratio=0.25, id_skip=True),
    ]
    global_params = GlobalParams(width_coefficient=1.0, depth_coefficient=1.0, image_size=16, dropout_rate=0.0,
                                 num_classes=5, batch_norm_momentum=0.99, batch_norm_epsilon=1e-3,
                                 drop_connect_rate=1e-7, depth_divisor=4, min_depth=None)
    return blocks_args, global_params


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(902)
    device = 'cuda' if torch.cuda.is_available() else 'cpu'
    model = EfficientNet(*efficientnet_params()).to(device)
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().cpu().numpy().copy() for k, v in model.state_dict().items()}
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    optimizer = torch.optim.RMSprop(model.parameters(), lr=0.01, alpha=0.9, eps=1e-3, momentum=0.9,
                                    weight_decay=1e-5)
    batches = [(torch.tensor(rng.normal(size=(4, 3, 16, 16)).astype(np.float32)),
                torch.tensor(rng.integers(0, 5, 4))) for _ in range(2)]

    def train_step(images, target):
        output = model(images)
        loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss, output

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    for epoch in range(3):
        model.train()
        for images, target in batches:
            images, target = images.to(device, non_blocking=True), target.to(device, non_blocking=True)
            loss, output = step(images, target)
            losses.append(loss.item())
            losses.append((output.argmax(1) == target).float().mean().item())
    model.set_swish(memory_efficient=False)
    model.eval()
    with torch.no_grad():
        out = model(batches[0][0])
        losses += out[0].tolist()
        losses.append(model._blocks[1]._bn1.running_var.sum().item())
    return {"losses": losses, "weights": w, "fn": step}
