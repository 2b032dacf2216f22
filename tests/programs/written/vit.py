# In the manner of pytorch/examples vision_transformer/main.py.
# Written for dualgraph's tests with the public program's idioms, not copied from it; it
# keeps their style (super(Class, self), unused loop variables), so ruff leaves it alone.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim


class PatchExtractor(nn.Module):
    def __init__(self, patch_size=16):
        super().__init__()
        self.patch_size = patch_size

    def forward(self, input_data):
        batch_size, channels, height, width = input_data.size()
        assert height % self.patch_size == 0 and width % self.patch_size == 0, \
            f"Input height ({height}) and width ({width}) must be divisible by patch size ({self.patch_size})"
        num_patches_h = height // self.patch_size
        num_patches_w = width // self.patch_size
        num_patches = num_patches_h * num_patches_w
        patches = input_data.unfold(2, self.patch_size, self.patch_size). \
            unfold(3, self.patch_size, self.patch_size). \
            permute(0, 2, 3, 1, 4, 5). \
            contiguous(). \
            view(batch_size, num_patches, -1)
        return patches


class InputEmbedding(nn.Module):
    def __init__(self, args):
        super(InputEmbedding, self).__init__()
        self.patch_size = args.patch_size
        self.n_channels = args.n_channels
        self.latent_size = args.latent_size
        use_cuda = not args.no_cuda and torch.cuda.is_available()
        self.device = torch.device("cuda" if use_cuda else "cpu")
        self.batch_size = args.batch_size
        self.input_size = self.patch_size * self.patch_size * self.n_channels
        self.LinearProjection = nn.Linear(self.input_size, self.latent_size)
        self.class_token = nn.Parameter(torch.randn(self.batch_size, 1, self.latent_size)).to(self.device)
        self.pos_embedding = nn.Parameter(torch.randn(self.batch_size, 1, self.latent_size)).to(self.device)

    def forward(self, input_data):
        input_data = input_data.to(self.device)
        patchify = PatchExtractor(patch_size=self.patch_size)
        patches = patchify(input_data)
        linear_projection = self.LinearProjection(patches).to(self.device)
        b, n, _ = linear_projection.shape
        linear_projection = torch.cat((self.class_token, linear_projection), dim=1)
        pos_embed = self.pos_embedding[:, :n + 1, :]
        linear_projection += pos_embed
        return linear_projection


class EncoderBlock(nn.Module):
    def __init__(self, args):
        super(EncoderBlock, self).__init__()
        self.latent_size = args.latent_size
        self.num_heads = args.num_heads
        self.dropout = args.dropout
        self.norm = nn.LayerNorm(self.latent_size)
        self.attention = nn.MultiheadAttention(self.latent_size, self.num_heads, dropout=self.dropout)
        self.enc_MLP = nn.Sequential(
            nn.Linear(self.latent_size, self.latent_size * 4),
            nn.GELU(),
            nn.Dropout(self.dropout),
            nn.Linear(self.latent_size * 4, self.latent_size),
            nn.Dropout(self.dropout),
        )

    def forward(self, emb_patches):
        first_norm = self.norm(emb_patches)
        attention_out = self.attention(first_norm, first_norm, first_norm)[0]
        first_added = attention_out + emb_patches
        second_norm = self.norm(first_added)
        mlp_out = self.enc_MLP(second_norm)
        output = mlp_out + first_added
        return output


class ViT(nn.Module):
    def __init__(self, args):
        super(ViT, self).__init__()
        self.num_encoders = args.num_encoders
        self.latent_size = args.latent_size
        self.num_classes = args.num_classes
        self.dropout = args.dropout
        self.embedding = InputEmbedding(args)
        self.encStack = nn.ModuleList([EncoderBlock(args) for i in range(self.num_encoders)])
        self.MLP_head = nn.Sequential(
            nn.LayerNorm(self.latent_size),
            nn.Linear(self.latent_size, self.latent_size),
            nn.Linear(self.latent_size, self.num_classes),
        )

    def forward(self, test_input):
        enc_output = self.embedding(test_input)
        for enc_layer in self.encStack:
            enc_output = enc_layer(enc_output)
        cls_token_embedding = enc_output[:, 0]
        return self.MLP_head(cls_token_embedding)


class Args:
    patch_size = 8
    n_channels = 3
    latent_size = 16
    num_heads = 2
    num_encoders = 2
    dropout = 0.0
    num_classes = 10
    batch_size = 4
    no_cuda = False
    lr = 1e-2
    weight_decay = 3e-2


class TrainEval:
    def __init__(self, args, model, train_dataloader, optimizer, criterion, device, compiled):
        self.model = model
        self.train_dataloader = train_dataloader
        self.optimizer = optimizer
        self.criterion = criterion
        self.device = device
        self.args = args
        self.step = torch.compile(self.train_step) if compiled else self.train_step

    def train_step(self, images, labels):
        self.optimizer.zero_grad()
        logits = self.model(images)
        loss = self.criterion(logits, labels)
        loss.backward()
        self.optimizer.step()
        return loss

    def train_fn(self):
        self.model.train()
        losses = []
        for t, data in enumerate(self.train_dataloader):
            images, labels = data
            images, labels = images.to(self.device), labels.to(self.device)
            losses.append(self.step(images, labels).item())
        return losses


def run(weights=None, compiled=False):
    args = Args()
    torch.manual_seed(0)
    model = ViT(args).to("cpu")
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    rng = np.random.default_rng(0)
    x = torch.tensor(rng.random((40, 3, 16, 16), dtype=np.float32))
    y = torch.tensor(rng.integers(0, 10, 40))
    dl = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=args.batch_size)
    optimizer = optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    criterion = nn.CrossEntropyLoss()
    te = TrainEval(args, model, dl, optimizer, criterion, torch.device("cpu"), compiled)
    losses = te.train_fn()
    return {"losses": losses, "weights": w, "fn": te.step}
