# In the manner of the BiLSTM-CRF taggers built on kmkurn/pytorch-crf (MIT licence): a
# ``CRF`` module with ``start_transitions``/``end_transitions``/``transitions``
# parameters from ``torch.empty`` and ``nn.init.uniform_(-0.1, 0.1)``, ``batch_first``
# handled by ``transpose(0, 1)``, the gold path's score by ``emissions[i,
# torch.arange(batch_size), tags[i]]`` and ``self.transitions[tags[i - 1], tags[i]] *
# mask[i]``, the last tags by ``tags[seq_ends, torch.arange(batch_size)]``, the partition
# function by broadcast ``unsqueeze(2)``/``unsqueeze(1)`` sums, ``torch.logsumexp`` and
# ``torch.where(mask[i].unsqueeze(1), next_score, score)``, ``reduction`` of ``'sum'``,
# ``'mean'`` and ``'token_mean'``, and Viterbi decoding with ``max(dim=1)`` histories walked
# back with ``.item()`` over ``reversed(history[:seq_ends[idx]])``; emissions from an
# embedding, a ``bidirectional=True, batch_first=True`` LSTM and ``nn.Dropout``; the loss
# as the negative log likelihood, Adam with ``clip_grad_norm_``, and token accuracy from
# decoded paths in ``model.eval()`` under ``torch.no_grad()``.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
from typing import List, Optional

import numpy as np
import torch
import torch.nn as nn


class CRF(nn.Module):
    def __init__(self, num_tags: int, batch_first: bool = False) -> None:
        if num_tags <= 0:
            raise ValueError(f'invalid number of tags: {num_tags}')
        super().__init__()
        self.num_tags = num_tags
        self.batch_first = batch_first
        self.start_transitions = nn.Parameter(torch.empty(num_tags))
        self.end_transitions = nn.Parameter(torch.empty(num_tags))
        self.transitions = nn.Parameter(torch.empty(num_tags, num_tags))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.uniform_(self.start_transitions, -0.1, 0.1)
        nn.init.uniform_(self.end_transitions, -0.1, 0.1)
        nn.init.uniform_(self.transitions, -0.1, 0.1)

    def __repr__(self) -> str:
        return f'{self.__class__.__name__}(num_tags={self.num_tags})'

    def forward(self, emissions: torch.Tensor, tags: torch.LongTensor,
                mask: Optional[torch.ByteTensor] = None, reduction: str = 'sum') -> torch.Tensor:
        if reduction not in ('none', 'sum', 'mean', 'token_mean'):
            raise ValueError(f'invalid reduction: {reduction}')
        if mask is None:
            mask = torch.ones_like(tags, dtype=torch.bool)
        if mask.dtype != torch.bool:
            mask = mask.bool()
        if self.batch_first:
            emissions = emissions.transpose(0, 1)
            tags = tags.transpose(0, 1)
            mask = mask.transpose(0, 1)
        numerator = self._compute_score(emissions, tags, mask)
        denominator = self._compute_normalizer(emissions, mask)
        llh = numerator - denominator
        if reduction == 'none':
            return llh
        if reduction == 'sum':
            return llh.sum()
        if reduction == 'mean':
            return llh.mean()
        return llh.sum() / mask.float().sum()

    def decode(self, emissions: torch.Tensor, mask: Optional[torch.ByteTensor] = None) -> List[List[int]]:
        if mask is None:
            mask = emissions.new_ones(emissions.shape[:2], dtype=torch.bool)
        if mask.dtype != torch.bool:
            mask = mask.bool()
        if self.batch_first:
            emissions = emissions.transpose(0, 1)
            mask = mask.transpose(0, 1)
        return self._viterbi_decode(emissions, mask)

    def _compute_score(self, emissions, tags, mask):
        seq_length, batch_size = tags.shape
        mask = mask.type_as(emissions)
        score = self.start_transitions[tags[0]]
        score += emissions[0, torch.arange(batch_size), tags[0]]
        for i in range(1, seq_length):
            score += self.transitions[tags[i - 1], tags[i]] * mask[i]
            score += emissions[i, torch.arange(batch_size), tags[i]] * mask[i]
        seq_ends = mask.long().sum(dim=0) - 1
        last_tags = tags[seq_ends, torch.arange(batch_size)]
        score += self.end_transitions[last_tags]
        return score

    def _compute_normalizer(self, emissions, mask):
        seq_length = emissions.size(0)
        score = self.start_transitions + emissions[0]
        for i in range(1, seq_length):
            broadcast_score = score.unsqueeze(2)
            broadcast_emissions = emissions[i].unsqueeze(1)
            next_score = broadcast_score + self.transitions + broadcast_emissions
            next_score = torch.logsumexp(next_score, dim=1)
            score = torch.where(mask[i].unsqueeze(1), next_score, score)
        score += self.end_transitions
        return torch.logsumexp(score, dim=1)

    def _viterbi_decode(self, emissions, mask):
        seq_length, batch_size = mask.shape
        score = self.start_transitions + emissions[0]
        history = []
        for i in range(1, seq_length):
            broadcast_score = score.unsqueeze(2)
            broadcast_emission = emissions[i].unsqueeze(1)
            next_score = broadcast_score + self.transitions + broadcast_emission
            next_score, indices = next_score.max(dim=1)
            score = torch.where(mask[i].unsqueeze(1), next_score, score)
            history.append(indices)
        score += self.end_transitions
        seq_ends = mask.long().sum(dim=0) - 1
        best_tags_list = []
        for idx in range(batch_size):
            _, best_last_tag = score[idx].max(dim=0)
            best_tags = [best_last_tag.item()]
            for hist in reversed(history[:seq_ends[idx]]):
                best_last_tag = hist[idx][best_tags[-1]]
                best_tags.append(best_last_tag.item())
            best_tags.reverse()
            best_tags_list.append(best_tags)
        return best_tags_list


class BiLSTMCRF(nn.Module):
    def __init__(self, vocab_size, num_tags, embedding_dim=8, hidden_dim=12, dropout=0.0, pad_idx=0):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embedding_dim, padding_idx=pad_idx)
        self.lstm = nn.LSTM(embedding_dim, hidden_dim // 2, num_layers=1, bidirectional=True, batch_first=True)
        self.dropout = nn.Dropout(dropout)
        self.hidden2tag = nn.Linear(hidden_dim, num_tags)
        self.crf = CRF(num_tags, batch_first=True)

    def _get_emissions(self, words):
        embeds = self.dropout(self.embedding(words))
        lstm_out, _ = self.lstm(embeds)
        return self.hidden2tag(self.dropout(lstm_out))

    def neg_log_likelihood(self, words, tags, mask, reduction='mean'):
        return -self.crf(self._get_emissions(words), tags, mask=mask, reduction=reduction)

    def forward(self, words, mask):
        return self.crf.decode(self._get_emissions(words), mask=mask)


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(1109)
    vocab, num_tags, seq_len, batch = 12, 4, 6, 4
    model = BiLSTMCRF(vocab, num_tags)
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    batches = []
    for _ in range(3):
        lengths = rng.integers(3, seq_len + 1, batch)
        words = rng.integers(1, vocab, (batch, seq_len))
        tags = words % num_tags
        mask = np.arange(seq_len)[None, :] < lengths[:, None]
        words, tags = np.where(mask, words, 0), np.where(mask, tags, 0)
        batches.append((torch.from_numpy(words), torch.from_numpy(tags), torch.from_numpy(mask.astype(np.uint8))))

    def train_step(words, tags, mask):
        model.zero_grad()
        loss = model.neg_log_likelihood(words, tags, mask)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        optimizer.step()
        return loss

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    for epoch in range(3):
        model.train()
        for words, tags, mask in batches:
            losses.append(step(words, tags, mask).item())
        model.eval()
        with torch.no_grad():
            correct = total = 0
            for words, tags, mask in batches:
                for path, gold, m in zip(model(words, mask), tags.tolist(), mask.tolist()):
                    n = sum(m)
                    correct += sum(int(p == g) for p, g in zip(path, gold[:n]))
                    total += n
            losses.append(correct / total)
    with torch.no_grad():
        words, tags, mask = batches[0]
        emissions = model._get_emissions(words)
        for reduction in ('none', 'sum', 'token_mean'):
            losses += torch.atleast_1d(model.crf(emissions, tags, mask=mask, reduction=reduction)).tolist()
    return {"losses": losses, "weights": w, "fn": step}
