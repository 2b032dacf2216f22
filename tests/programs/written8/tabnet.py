# In the manner of dreamquark-ai/tabnet's pytorch_tabnet/tab_network.py and
# sparsemax.py (MIT licence): sparsemax and entmax-1.5 written as
# ``torch.autograd.Function``s (``ctx.save_for_backward``, ``ctx.dim``, ``grad_output.clone()``,
# ``grad_input[output == 0] = 0``, a threshold from ``torch.sort(descending=True)``,
# ``cumsum``, ``_make_ix_like`` by ``torch.arange(1, d + 1).view(view).transpose(0, dim)``,
# ``support.sum(dim=dim).unsqueeze(dim)`` and ``gather``), modules that call
# ``Function.apply``, ghost batch normalisation over ``x.chunk(int(np.ceil(x.shape[0] /
# self.virtual_batch_size)), 0)``, GLU layers by ``torch.mul(x[:, :n], torch.sigmoid(x[:, n:]))``
# with ``* torch.sqrt(torch.FloatTensor([0.5]))`` residual scaling, an attentive transformer
# with a prior ``torch.mul(self.gamma - M, prior)``, the sparsity loss ``torch.mean(torch.sum(
# torch.mul(M, torch.log(M + self.epsilon)), dim=1))``, ``initialize_glu`` gains from
# ``np.sqrt((input_dim + output_dim) / np.sqrt(4 * input_dim))`` with
# ``torch.nn.init.xavier_normal_``, and Adam with ``clip_grad_norm_``.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
from torch import nn
from torch.autograd import Function
import torch.nn.functional as F


def _make_ix_like(input, dim=0):
    d = input.size(dim)
    rho = torch.arange(1, d + 1, device=input.device, dtype=input.dtype)
    view = [1] * input.dim()
    view[0] = -1
    return rho.view(view).transpose(0, dim)


class SparsemaxFunction(Function):
    @staticmethod
    def forward(ctx, input, dim=-1):
        ctx.dim = dim
        max_val, _ = input.max(dim=dim, keepdim=True)
        input -= max_val
        tau, supp_size = SparsemaxFunction._threshold_and_support(input, dim=dim)
        output = torch.clamp(input - tau, min=0)
        ctx.save_for_backward(supp_size, output)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        supp_size, output = ctx.saved_tensors
        dim = ctx.dim
        grad_input = grad_output.clone()
        grad_input[output == 0] = 0
        v_hat = grad_input.sum(dim=dim) / supp_size.to(output.dtype).squeeze()
        v_hat = v_hat.unsqueeze(dim)
        grad_input = torch.where(output != 0, grad_input - v_hat, grad_input)
        return grad_input, None

    @staticmethod
    def _threshold_and_support(input, dim=-1):
        input_srt, _ = torch.sort(input, descending=True, dim=dim)
        input_cumsum = input_srt.cumsum(dim) - 1
        rhos = _make_ix_like(input, dim)
        support = rhos * input_srt > input_cumsum
        support_size = support.sum(dim=dim).unsqueeze(dim)
        tau = input_cumsum.gather(dim, support_size - 1)
        tau /= support_size.to(input.dtype)
        return tau, support_size


sparsemax = SparsemaxFunction.apply


class Sparsemax(nn.Module):
    def __init__(self, dim=-1):
        self.dim = dim
        super(Sparsemax, self).__init__()

    def forward(self, input):
        return sparsemax(input, self.dim)


class Entmax15Function(Function):
    @staticmethod
    def forward(ctx, input, dim=-1):
        ctx.dim = dim
        max_val, _ = input.max(dim=dim, keepdim=True)
        input = input - max_val
        input = input / 2
        tau_star, _ = Entmax15Function._threshold_and_support(input, dim)
        output = torch.clamp(input - tau_star, min=0) ** 2
        ctx.save_for_backward(output)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        Y, = ctx.saved_tensors
        gppr = Y.sqrt()
        dX = grad_output * gppr
        q = dX.sum(ctx.dim) / gppr.sum(ctx.dim)
        q = q.unsqueeze(ctx.dim)
        dX -= q * gppr
        return dX, None

    @staticmethod
    def _threshold_and_support(input, dim=-1):
        Xsrt, _ = torch.sort(input, descending=True, dim=dim)
        rho = _make_ix_like(input, dim)
        mean = Xsrt.cumsum(dim) / rho
        mean_sq = (Xsrt ** 2).cumsum(dim) / rho
        ss = rho * (mean_sq - mean ** 2)
        delta = (1 - ss) / rho
        delta_nz = torch.clamp(delta, 0)
        tau = mean - torch.sqrt(delta_nz)
        support_size = (tau <= Xsrt).sum(dim).unsqueeze(dim)
        tau_star = tau.gather(dim, support_size - 1)
        return tau_star, support_size


class Entmax15(nn.Module):
    def __init__(self, dim=-1):
        self.dim = dim
        super(Entmax15, self).__init__()

    def forward(self, input):
        return Entmax15Function.apply(input, self.dim)


def initialize_non_glu(module, input_dim, output_dim):
    gain_value = np.sqrt((input_dim + output_dim) / np.sqrt(4 * input_dim))
    torch.nn.init.xavier_normal_(module.weight, gain=gain_value)


def initialize_glu(module, input_dim, output_dim):
    gain_value = np.sqrt((input_dim + output_dim) / np.sqrt(input_dim))
    torch.nn.init.xavier_normal_(module.weight, gain=gain_value)


class GBN(torch.nn.Module):
    def __init__(self, input_dim, virtual_batch_size=128, momentum=0.01):
        super(GBN, self).__init__()
        self.input_dim = input_dim
        self.virtual_batch_size = virtual_batch_size
        self.bn = nn.BatchNorm1d(self.input_dim, momentum=momentum)

    def forward(self, x):
        chunks = x.chunk(int(np.ceil(x.shape[0] / self.virtual_batch_size)), 0)
        res = [self.bn(x_) for x_ in chunks]
        return torch.cat(res, dim=0)


class GLU_Layer(torch.nn.Module):
    def __init__(self, input_dim, output_dim, virtual_batch_size=128, momentum=0.02):
        super(GLU_Layer, self).__init__()
        self.output_dim = output_dim
        self.fc = nn.Linear(input_dim, 2 * output_dim, bias=False)
        initialize_glu(self.fc, input_dim, 2 * output_dim)
        self.bn = GBN(2 * output_dim, virtual_batch_size=virtual_batch_size, momentum=momentum)

    def forward(self, x):
        x = self.fc(x)
        x = self.bn(x)
        out = torch.mul(x[:, : self.output_dim], torch.sigmoid(x[:, self.output_dim:]))
        return out


class FeatTransformer(torch.nn.Module):
    def __init__(self, input_dim, output_dim, n_glu=2, virtual_batch_size=4, momentum=0.02):
        super(FeatTransformer, self).__init__()
        self.glu_layers = torch.nn.ModuleList()
        for i in range(n_glu):
            self.glu_layers.append(GLU_Layer(input_dim if i == 0 else output_dim, output_dim,
                                             virtual_batch_size=virtual_batch_size, momentum=momentum))

    def forward(self, x):
        scale = torch.sqrt(torch.FloatTensor([0.5]).to(x.device))
        x = self.glu_layers[0](x)
        for glu_id in range(1, len(self.glu_layers)):
            x = torch.add(x, self.glu_layers[glu_id](x))
            x = x * scale
        return x


class AttentiveTransformer(torch.nn.Module):
    def __init__(self, input_dim, group_dim, virtual_batch_size=4, momentum=0.02, mask_type="sparsemax"):
        super(AttentiveTransformer, self).__init__()
        self.fc = nn.Linear(input_dim, group_dim, bias=False)
        initialize_non_glu(self.fc, input_dim, group_dim)
        self.bn = GBN(group_dim, virtual_batch_size=virtual_batch_size, momentum=momentum)
        if mask_type == "sparsemax":
            self.selector = Sparsemax(dim=-1)
        elif mask_type == "entmax":
            self.selector = Entmax15(dim=-1)
        else:
            raise NotImplementedError("Please choose either sparsemax or entmax as masktype")

    def forward(self, priors, processed_feat):
        x = self.fc(processed_feat)
        x = self.bn(x)
        x = torch.mul(x, priors)
        x = self.selector(x)
        return x


class TabNetEncoder(torch.nn.Module):
    def __init__(self, input_dim, n_d=4, n_a=4, n_steps=2, gamma=1.3, epsilon=1e-15,
                 virtual_batch_size=4, mask_type="sparsemax"):
        super(TabNetEncoder, self).__init__()
        self.n_d, self.n_a, self.n_steps, self.gamma, self.epsilon = n_d, n_a, n_steps, gamma, epsilon
        self.initial_bn = nn.BatchNorm1d(input_dim, momentum=0.01)
        self.initial_splitter = FeatTransformer(input_dim, n_d + n_a, virtual_batch_size=virtual_batch_size)
        self.feat_transformers = torch.nn.ModuleList()
        self.att_transformers = torch.nn.ModuleList()
        for step in range(n_steps):
            self.feat_transformers.append(FeatTransformer(input_dim, n_d + n_a, virtual_batch_size=virtual_batch_size))
            self.att_transformers.append(AttentiveTransformer(n_a, input_dim, virtual_batch_size=virtual_batch_size,
                                                              mask_type=mask_type))

    def forward(self, x, prior=None):
        x = self.initial_bn(x)
        if prior is None:
            prior = torch.ones(x.shape).to(x.device)
        M_loss = 0
        att = self.initial_splitter(x)[:, self.n_d:]
        steps_output = []
        for step in range(self.n_steps):
            M = self.att_transformers[step](prior, att)
            M_loss += torch.mean(torch.sum(torch.mul(M, torch.log(M + self.epsilon)), dim=1))
            prior = torch.mul(self.gamma - M, prior)
            masked_x = torch.mul(M, x)
            out = self.feat_transformers[step](masked_x)
            d = F.relu(out[:, : self.n_d])
            steps_output.append(d)
            att = out[:, self.n_d:]
        M_loss /= self.n_steps
        return steps_output, M_loss


class TabNet(torch.nn.Module):
    def __init__(self, input_dim, output_dim, n_d=4, mask_type="sparsemax"):
        super(TabNet, self).__init__()
        self.encoder = TabNetEncoder(input_dim, n_d=n_d, mask_type=mask_type)
        self.final_mapping = nn.Linear(n_d, output_dim, bias=False)
        initialize_non_glu(self.final_mapping, n_d, output_dim)

    def forward(self, x):
        steps_output, M_loss = self.encoder(x)
        res = torch.sum(torch.stack(steps_output, dim=0), dim=0)
        return self.final_mapping(res), M_loss


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(810)
    models = {"sparse": TabNet(6, 3), "entmax": TabNet(6, 3, mask_type="entmax")}
    if weights is not None:
        for name, model in models.items():
            model.load_state_dict({k[len(name) + 1:]: torch.tensor(v) for k, v in weights.items()
                                   if k.startswith(name + ".")})
    w = {f"{name}.{k}": v.detach().numpy().copy() for name, model in models.items()
         for k, v in model.state_dict().items()}
    lambda_sparse = 1e-3
    data = [(torch.tensor(rng.normal(size=(8, 6)).astype(np.float32)),
             torch.tensor(rng.integers(0, 3, size=8))) for _ in range(3)]
    steps = []
    for model in models.values():
        optimizer = torch.optim.Adam(model.parameters(), lr=2e-2)

        def train_batch(X, y, model=model, optimizer=optimizer):
            for param in model.parameters():
                param.grad = None
            output, M_loss = model(X)
            loss = F.cross_entropy(output, y)
            loss = loss - lambda_sparse * M_loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            return loss

        steps.append(torch.compile(train_batch) if compiled else train_batch)
    z = torch.tensor([[1.0, 0.8, -1.0, 0.1], [0.2, 0.1, 0.15, 3.0]])
    losses = sparsemax(z.clone(), -1).flatten().tolist() + Entmax15()(z).flatten().tolist()
    for model in models.values():
        model.train()
    for epoch in range(3):
        for X, y in data:
            for step in steps:
                losses.append(step(X, y).item())
    with torch.no_grad():
        for model in models.values():
            model.eval()
            out, m_loss = model(data[0][0])
            losses += out[0].tolist() + [m_loss.item()]
    # the hand-written backward against finite differences, in float64
    x = torch.tensor(rng.normal(size=(3, 5)), dtype=torch.float64, requires_grad=True)
    losses.append(float(torch.autograd.gradcheck(lambda t: sparsemax(t * 1.0, -1), (x,))))
    losses.append(float(torch.autograd.gradcheck(lambda t: Entmax15Function.apply(t, -1), (x,))))
    return {"losses": losses, "weights": w, "fn": steps}
