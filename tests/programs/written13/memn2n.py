# In the manner of the PyTorch End-To-End Memory Networks for bAbI (nmhkahn/
# MemN2N-pytorch and similar): stories as ``(batch, memories, words)`` token ids embedded by
# ``self.A[hop](story.view(story.size(0), -1)).view(story.size() + (-1,))``, the position
# encoding matrix from ``encoding = 1 + 4 * (k - (embedding_size + 1) / 2) * (j -
# (sentence_size + 1) / 2) / ...`` multiplied in and summed over words, temporal encoding
# ``nn.Parameter`` rows added per memory, adjacent weight tying (``self.C[hop]`` is
# ``self.A[hop + 1]``: the embeddings kept in ``nn.ModuleList`` and shared by reference),
# ``padding_idx=0`` with ``weight.data.normal_(0, 0.1)`` re-zeroing the padding row,
# attention ``F.softmax(torch.sum(m_A * u.unsqueeze(1).expand_as(m_A), 2), dim=1)``,
# ``u = u + o`` across hops, the answer logits ``u @ self.C[-1].weight.transpose(0, 1)``,
# SGD with ``clip_grad_norm_(params, 40.0)``, the learning rate halved by hand every few
# epochs through ``param_groups``, and accuracy by ``torch.max(logits, 1)[1] == answer``.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def position_encoding(sentence_size, embedding_dim):
    encoding = np.ones((embedding_dim, sentence_size), dtype=np.float32)
    ls = sentence_size + 1
    le = embedding_dim + 1
    for i in range(1, le):
        for j in range(1, ls):
            encoding[i - 1, j - 1] = (i - (le - 1) / 2) * (j - (ls - 1) / 2)
    encoding = 1 + 4 * encoding / embedding_dim / sentence_size
    return np.transpose(encoding)


class MemN2N(nn.Module):
    def __init__(self, vocab_size, embedding_dim, sentence_size, memory_size, hops=3):
        super().__init__()
        self.hops = hops
        self.embedding_dim = embedding_dim
        self.A = nn.ModuleList([nn.Embedding(vocab_size, embedding_dim, padding_idx=0) for _ in range(hops + 1)])
        for emb in self.A:
            emb.weight.data.normal_(0, 0.1)
            emb.weight.data[0].zero_()
        self.C = [self.A[hop + 1] for hop in range(hops)]
        self.B = self.A[0]
        self.TA = nn.Parameter(torch.randn(memory_size, embedding_dim) * 0.1)
        self.TC = nn.Parameter(torch.randn(memory_size, embedding_dim) * 0.1)
        self.register_buffer('encoding', torch.from_numpy(position_encoding(sentence_size, embedding_dim)))

    def forward(self, story, query):
        story_size = story.size()
        u = self.B(query) * self.encoding.unsqueeze(0)
        u = torch.sum(u, 1)
        for hop in range(self.hops):
            embed_A = self.A[hop](story.view(story.size(0), -1))
            embed_A = embed_A.view(story_size + (embed_A.size(-1),))
            m_A = torch.sum(embed_A * self.encoding.unsqueeze(0).unsqueeze(1), 2) + self.TA
            embed_C = self.C[hop](story.view(story.size(0), -1))
            embed_C = embed_C.view(story_size + (embed_C.size(-1),))
            m_C = torch.sum(embed_C * self.encoding.unsqueeze(0).unsqueeze(1), 2) + self.TC
            prob = F.softmax(torch.sum(m_A * u.unsqueeze(1).expand_as(m_A), 2), dim=1)
            o = torch.sum(m_C * prob.unsqueeze(2).expand_as(m_C), 1)
            u = u + o
        return u @ self.C[self.hops - 1].weight.transpose(0, 1)


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(1306)
    vocab, sentence, memory = 20, 5, 6
    net = MemN2N(vocab, 12, sentence, memory, hops=3)
    if weights is not None:
        net.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in net.state_dict().items()}
    criterion = nn.CrossEntropyLoss(reduction='sum')
    lr = 0.01
    optimizer = torch.optim.SGD(net.parameters(), lr=lr)
    batches = []
    for _ in range(3):
        story = rng.integers(1, vocab, (4, memory, sentence))
        story[:, :, 3:] *= rng.integers(0, 2, (4, memory, 2))
        query = rng.integers(1, vocab, (4, sentence))
        query[:, 4] = 0
        answer = story[np.arange(4), query[:, 0] % memory, 0]
        batches.append((torch.from_numpy(story), torch.from_numpy(query), torch.from_numpy(answer)))

    def train_step(story, query, answer):
        optimizer.zero_grad()
        logits = net(story, query)
        loss = criterion(logits, answer)
        loss.backward()
        gnorm = nn.utils.clip_grad_norm_(net.parameters(), 40.0)
        optimizer.step()
        correct = torch.max(logits, 1)[1] == answer
        return loss, correct.float().mean(), gnorm

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    for epoch in range(4):
        if epoch and epoch % 2 == 0:
            for pg in optimizer.param_groups:
                pg['lr'] = pg['lr'] / 2
        for story, query, answer in batches:
            loss, acc, gnorm = step(story, query, answer)
            losses += [loss.item(), acc.item(), gnorm.item()]
    losses.append(float(net.A[0].weight[0].abs().sum()))
    return {"losses": losses, "weights": w, "fn": step}
