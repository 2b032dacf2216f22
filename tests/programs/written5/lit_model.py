# In the manner of a PyTorch Lightning "LitModel" written without Lightning: a module
# with training_step / validation_step / configure_optimizers returning an optimizer and
# a CosineAnnealingLR scheduler dict, a hand-written Trainer.fit loop over DataLoaders
# (TensorDataset, shuffle=False, drop_last), self.log-style metric collection into a dict,
# torch.stack of the step outputs at epoch end, gradient clipping by value, early
# stopping on the validation loss, and a ReduceLROnPlateau-free patience counter.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class LitModel(nn.Module):
    def __init__(self, in_dim=10, hidden=24, n_classes=4, lr=1e-2):
        super().__init__()
        self.save_hyperparameters = dict(in_dim=in_dim, hidden=hidden, lr=lr)
        self.l1 = nn.Linear(in_dim, hidden, bias=False)
        self.bn = nn.BatchNorm1d(hidden)
        self.l2 = nn.Linear(hidden, n_classes)
        self.logged = {}

    def forward(self, x):
        return self.l2(F.leaky_relu(self.bn(self.l1(x)), 0.1))

    def log(self, name, value):
        self.logged.setdefault(name, []).append(value.item() if torch.is_tensor(value) else value)

    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        loss = F.cross_entropy(logits, y, label_smoothing=0.05)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        loss = F.cross_entropy(logits, y)
        preds = torch.argmax(logits, dim=1)
        acc = (preds == y).float().mean()
        return {"val_loss": loss, "val_acc": acc}

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.save_hyperparameters["lr"])
        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=4, eta_min=1e-4)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "epoch"}}


class Trainer:
    def __init__(self, max_epochs, gradient_clip_val=None, compiled=False, patience=2):
        self.max_epochs = max_epochs
        self.gradient_clip_val = gradient_clip_val
        self.compiled = compiled
        self.patience = patience
        self.fn = None

    def fit(self, model, train_dataloaders, val_dataloaders):
        conf = model.configure_optimizers()
        optimizer = conf["optimizer"]
        scheduler = conf["lr_scheduler"]["scheduler"]

        def optimizer_step(batch, batch_idx):
            loss = model.training_step(batch, batch_idx)
            optimizer.zero_grad()
            loss.backward()
            if self.gradient_clip_val is not None:
                torch.nn.utils.clip_grad_value_(model.parameters(), self.gradient_clip_val)
            optimizer.step()
            return loss

        self.fn = torch.compile(optimizer_step) if self.compiled else optimizer_step
        best, bad = float("inf"), 0
        for epoch in range(self.max_epochs):
            model.train()
            outs = []
            for batch_idx, batch in enumerate(train_dataloaders):
                loss = self.fn(batch, batch_idx)
                model.log("train_loss", loss)
                outs.append(loss.detach())
            model.log("train_loss_epoch", torch.stack(outs).mean())
            model.eval()
            with torch.no_grad():
                vals = [model.validation_step(b, i) for i, b in enumerate(val_dataloaders)]
            val_loss = torch.stack([v["val_loss"] for v in vals]).mean()
            model.log("val_loss", val_loss)
            model.log("val_acc", torch.stack([v["val_acc"] for v in vals]).mean())
            scheduler.step()
            model.log("lr", scheduler.get_last_lr()[0])
            if val_loss.item() < best - 1e-4:
                best, bad = val_loss.item(), 0
            else:
                bad += 1
                if bad >= self.patience:
                    break


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(17)
    x = rng.normal(size=(96, 10)).astype(np.float32)
    y = (np.argmax(x[:, :4] + 0.3 * x[:, 4:8], axis=1)).astype(np.int64)
    train_ds = TensorDataset(torch.from_numpy(x[:64]), torch.from_numpy(y[:64]))
    val_ds = TensorDataset(torch.from_numpy(x[64:]), torch.from_numpy(y[64:]))
    train_loader = DataLoader(train_ds, batch_size=16, shuffle=False, drop_last=True)
    val_loader = DataLoader(val_ds, batch_size=16)
    model = LitModel()
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    trainer = Trainer(max_epochs=4, gradient_clip_val=0.5, compiled=compiled)
    trainer.fit(model, train_dataloaders=train_loader, val_dataloaders=val_loader)
    losses = []
    for k in ("train_loss", "train_loss_epoch", "val_loss", "val_acc", "lr"):
        losses += model.logged[k]
    return {"losses": losses, "weights": w, "fn": trainer.fn}
