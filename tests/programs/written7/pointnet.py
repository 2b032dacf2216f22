# In the manner of fxia22/pointnet.pytorch's pointnet/model.py and train_classification.py
# (MIT licence): STN3d and STNkd predicting a transform with Conv1d(k=1) layers,
# BatchNorm1d, ``torch.max(x, 2, keepdim=True)[0]``, ``x.view(-1, 1024)``-style flattening,
# an identity added as ``Variable(torch.from_numpy(np.eye(3).flatten().astype(np.float32)))
# .view(1, 9).repeat(batchsize, 1)`` (moved by ``.cuda()`` when ``x.is_cuda``),
# ``torch.bmm`` of the points by the transform, the feature-transform regulariser
# ``torch.mean(torch.norm(torch.bmm(trans, trans.transpose(2, 1)) - I, dim=(1, 2)))``,
# ``points.transpose(2, 1)``, ``F.log_softmax`` with ``F.nll_loss``, SGD with StepLR (Adam would turn the rounding
# noise in the gradients of the biases that feed a BatchNorm, zero in exact arithmetic, into
# steps of ~lr),
# ``pred.data.max(1)[1]`` and ``pred_choice.eq(target.data).cpu().sum()``.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.nn.parallel
import torch.utils.data
from torch.autograd import Variable
import torch.nn.functional as F

WIDTH = 32


class STN3d(nn.Module):
    def __init__(self):
        super(STN3d, self).__init__()
        self.conv1 = torch.nn.Conv1d(3, 16, 1)
        self.conv2 = torch.nn.Conv1d(16, 32, 1)
        self.conv3 = torch.nn.Conv1d(32, WIDTH, 1)
        self.fc1 = nn.Linear(WIDTH, 16)
        self.fc2 = nn.Linear(16, 8)
        self.fc3 = nn.Linear(8, 9)
        self.relu = nn.ReLU()
        self.bn1 = nn.BatchNorm1d(16)
        self.bn2 = nn.BatchNorm1d(32)
        self.bn3 = nn.BatchNorm1d(WIDTH)
        self.bn4 = nn.BatchNorm1d(16)
        self.bn5 = nn.BatchNorm1d(8)

    def forward(self, x):
        batchsize = x.size()[0]
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = F.relu(self.bn3(self.conv3(x)))
        x = torch.max(x, 2, keepdim=True)[0]
        x = x.view(-1, WIDTH)
        x = F.relu(self.bn4(self.fc1(x)))
        x = F.relu(self.bn5(self.fc2(x)))
        x = self.fc3(x)
        iden = Variable(torch.from_numpy(np.array([1, 0, 0, 0, 1, 0, 0, 0, 1]).astype(np.float32))).view(1, 9).repeat(batchsize, 1)
        if x.is_cuda:
            iden = iden.cuda()
        x = x + iden
        x = x.view(-1, 3, 3)
        return x


class STNkd(nn.Module):
    def __init__(self, k=16):
        super(STNkd, self).__init__()
        self.conv1 = torch.nn.Conv1d(k, 16, 1)
        self.conv2 = torch.nn.Conv1d(16, WIDTH, 1)
        self.fc1 = nn.Linear(WIDTH, 16)
        self.fc2 = nn.Linear(16, k * k)
        self.relu = nn.ReLU()
        self.bn1 = nn.BatchNorm1d(16)
        self.bn2 = nn.BatchNorm1d(WIDTH)
        self.bn3 = nn.BatchNorm1d(16)
        self.k = k

    def forward(self, x):
        batchsize = x.size()[0]
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = torch.max(x, 2, keepdim=True)[0]
        x = x.view(-1, WIDTH)
        x = F.relu(self.bn3(self.fc1(x)))
        x = self.fc2(x)
        iden = Variable(torch.from_numpy(np.eye(self.k).flatten().astype(np.float32))).view(1, self.k * self.k).repeat(batchsize, 1)
        if x.is_cuda:
            iden = iden.cuda()
        x = x + iden
        x = x.view(-1, self.k, self.k)
        return x


class PointNetfeat(nn.Module):
    def __init__(self, global_feat=True, feature_transform=False):
        super(PointNetfeat, self).__init__()
        self.stn = STN3d()
        self.conv1 = torch.nn.Conv1d(3, 16, 1)
        self.conv2 = torch.nn.Conv1d(16, 32, 1)
        self.conv3 = torch.nn.Conv1d(32, WIDTH, 1)
        self.bn1 = nn.BatchNorm1d(16)
        self.bn2 = nn.BatchNorm1d(32)
        self.bn3 = nn.BatchNorm1d(WIDTH)
        self.global_feat = global_feat
        self.feature_transform = feature_transform
        if self.feature_transform:
            self.fstn = STNkd(k=16)

    def forward(self, x):
        n_pts = x.size()[2]
        trans = self.stn(x)
        x = x.transpose(2, 1)
        x = torch.bmm(x, trans)
        x = x.transpose(2, 1)
        x = F.relu(self.bn1(self.conv1(x)))
        if self.feature_transform:
            trans_feat = self.fstn(x)
            x = x.transpose(2, 1)
            x = torch.bmm(x, trans_feat)
            x = x.transpose(2, 1)
        else:
            trans_feat = None
        pointfeat = x
        x = F.relu(self.bn2(self.conv2(x)))
        x = self.bn3(self.conv3(x))
        x = torch.max(x, 2, keepdim=True)[0]
        x = x.view(-1, WIDTH)
        if self.global_feat:
            return x, trans, trans_feat
        else:
            x = x.view(-1, WIDTH, 1).repeat(1, 1, n_pts)
            return torch.cat([x, pointfeat], 1), trans, trans_feat


class PointNetCls(nn.Module):
    def __init__(self, k=2, feature_transform=False):
        super(PointNetCls, self).__init__()
        self.feature_transform = feature_transform
        self.feat = PointNetfeat(global_feat=True, feature_transform=feature_transform)
        self.fc1 = nn.Linear(WIDTH, 16)
        self.fc2 = nn.Linear(16, 8)
        self.fc3 = nn.Linear(8, k)
        self.dropout = nn.Dropout(p=0.0)
        self.bn1 = nn.BatchNorm1d(16)
        self.bn2 = nn.BatchNorm1d(8)
        self.relu = nn.ReLU()

    def forward(self, x):
        x, trans, trans_feat = self.feat(x)
        x = F.relu(self.bn1(self.fc1(x)))
        x = F.relu(self.bn2(self.dropout(self.fc2(x))))
        x = self.fc3(x)
        return F.log_softmax(x, dim=1), trans, trans_feat


class PointNetDenseCls(nn.Module):
    def __init__(self, k=2, feature_transform=False):
        super(PointNetDenseCls, self).__init__()
        self.k = k
        self.feature_transform = feature_transform
        self.feat = PointNetfeat(global_feat=False, feature_transform=feature_transform)
        self.conv1 = torch.nn.Conv1d(WIDTH + 16, 16, 1)
        self.conv2 = torch.nn.Conv1d(16, self.k, 1)
        self.bn1 = nn.BatchNorm1d(16)

    def forward(self, x):
        batchsize = x.size()[0]
        n_pts = x.size()[2]
        x, trans, trans_feat = self.feat(x)
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.conv2(x)
        x = x.transpose(2, 1).contiguous()
        x = F.log_softmax(x.view(-1, self.k), dim=-1)
        x = x.view(batchsize, n_pts, self.k)
        return x, trans, trans_feat


def feature_transform_regularizer(trans):
    d = trans.size()[1]
    batchsize = trans.size()[0]
    I = torch.eye(d)[None, :, :]
    if trans.is_cuda:
        I = I.cuda()
    loss = torch.mean(torch.norm(torch.bmm(trans, trans.transpose(2, 1)) - I, dim=(1, 2)))
    return loss


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(74)
    classifier = PointNetCls(k=3, feature_transform=True)
    if weights is not None:
        classifier.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in classifier.state_dict().items()}
    optimizer = torch.optim.SGD(classifier.parameters(), lr=0.0005, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    data = []
    for _ in range(3):
        target = rng.integers(0, 3, size=8)
        points = (rng.normal(size=(8, 12, 3)) * (1 + target[:, None, None])).astype(np.float32)
        data.append((torch.from_numpy(points), torch.from_numpy(target)))

    def train_step(points, target):
        points = points.transpose(2, 1)
        optimizer.zero_grad()
        classifier = classifier_ref[0]
        classifier = classifier.train()
        pred, trans, trans_feat = classifier(points)
        loss = F.nll_loss(pred, target)
        loss += feature_transform_regularizer(trans_feat) * 0.001
        loss.backward()
        optimizer.step()
        return loss, pred

    classifier_ref = [classifier]
    step = torch.compile(train_step) if compiled else train_step
    losses = []
    for epoch in range(3):
        for i, (points, target) in enumerate(data, 0):
            loss, pred = step(points, target)
            pred_choice = pred.data.max(1)[1]
            correct = pred_choice.eq(target.data).cpu().sum()
            losses += [loss.item(), correct.item() / float(8)]
        scheduler.step()
    seg = PointNetDenseCls(k=2)
    seg.eval()
    with torch.no_grad():
        classifier = classifier.eval()
        points = data[0][0].transpose(2, 1)
        pred, trans, _ = classifier(points)
        losses += pred[0].tolist() + trans[0].flatten().tolist()
        out, _, _ = seg(points)
        losses += list(out.shape)
        losses.append(feature_transform_regularizer(torch.eye(4).repeat(2, 1, 1) * 2).item())
    return {"losses": losses, "weights": w, "fn": step}
