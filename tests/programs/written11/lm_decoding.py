# In the manner of the decoding loops written around small language models (Hugging Face's
# ``top_k_top_p_filtering`` as copied into countless generation scripts, Apache-2.0; beam
# search as in the seq2seq tutorials and OpenNMT-style ``Beam`` helpers, MIT): a
# ``batch_first`` LSTM language model trained with ``clip_grad_norm_``, then generation
# under ``@torch.inference_mode()`` and ``torch.no_grad()``: top-k by ``torch.topk(logits,
# top_k)[0][..., -1, None]``, nucleus filtering by ``torch.sort(descending=True)``,
# ``torch.cumsum`` of ``F.softmax``, the shifted ``sorted_indices_to_remove[..., 1:] =
# ...[..., :-1].clone()`` and ``scatter(1, sorted_indices, ...)`` back to vocabulary order,
# ``masked_fill(..., -float("Inf"))``, tokens appended by ``torch.cat`` in a loop, and beam
# search over the flattened ``(beams * vocab)`` scores by ``topk``, ``torch.div(...,
# rounding_mode="floor")`` and ``%``, ``index_select`` of the LSTM state per surviving beam,
# finished hypotheses with a length penalty ``((5 + len) / 6) ** alpha``. Sampling draws its
# uniforms from NumPy and picks by the cumulative distribution (a test device: torch's
# and dualgraph's ``multinomial`` streams differ).
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class LSTMLM(nn.Module):
    def __init__(self, vocab_size, emb=12, hidden=16, num_layers=2):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, emb)
        self.lstm = nn.LSTM(emb, hidden, num_layers=num_layers, batch_first=True)
        self.proj = nn.Linear(hidden, vocab_size)

    def forward(self, x, state=None):
        out, state = self.lstm(self.embed(x), state)
        return self.proj(out), state


def top_k_top_p_filtering(logits, top_k=0, top_p=1.0, filter_value=-float("Inf"), min_tokens_to_keep=1):
    if top_k > 0:
        top_k = min(max(top_k, min_tokens_to_keep), logits.size(-1))
        indices_to_remove = logits < torch.topk(logits, top_k)[0][..., -1, None]
        logits[indices_to_remove] = filter_value
    if top_p < 1.0:
        sorted_logits, sorted_indices = torch.sort(logits, descending=True)
        cumulative_probs = torch.cumsum(F.softmax(sorted_logits, dim=-1), dim=-1)
        sorted_indices_to_remove = cumulative_probs > top_p
        if min_tokens_to_keep > 1:
            sorted_indices_to_remove[..., :min_tokens_to_keep] = 0
        sorted_indices_to_remove[..., 1:] = sorted_indices_to_remove[..., :-1].clone()
        sorted_indices_to_remove[..., 0] = 0
        indices_to_remove = sorted_indices_to_remove.scatter(1, sorted_indices, sorted_indices_to_remove)
        logits = logits.masked_fill(indices_to_remove, filter_value)
    return logits


@torch.inference_mode()
def sample_sequence(model, context, length, uniforms, temperature=1.0, top_k=0, top_p=1.0):
    generated = context
    logits, state = model(context)
    entropies = []
    for t in range(length):
        next_token_logits = logits[:, -1, :] / (temperature if temperature > 0 else 1.0)
        filtered_logits = top_k_top_p_filtering(next_token_logits, top_k=top_k, top_p=top_p)
        probs = F.softmax(filtered_logits, dim=-1)
        entropies.append(-(probs * torch.log(probs.clamp_min(1e-12))).sum(-1).mean().item())
        u = torch.from_numpy(uniforms[t]).unsqueeze(-1)
        next_token = (torch.cumsum(probs, dim=-1) < u).sum(-1, keepdim=True).clamp(max=probs.size(-1) - 1)
        generated = torch.cat((generated, next_token), dim=1)
        logits, state = model(next_token, state)
    return generated, entropies


def beam_search(model, bos, eos, beam_size=3, max_len=6, alpha=0.7):
    model.eval()
    with torch.no_grad():
        seqs = torch.full((1, 1), bos, dtype=torch.long)
        scores = torch.zeros(1)
        logits, (h, c) = model(seqs)
        finished = []
        for step in range(max_len):
            log_probs = F.log_softmax(logits[:, -1, :], dim=-1)
            vocab = log_probs.size(-1)
            cand = (scores.unsqueeze(1) + log_probs).view(-1)
            top_scores, top_idx = cand.topk(beam_size, dim=0, largest=True, sorted=True)
            beam_idx = torch.div(top_idx, vocab, rounding_mode="floor")
            token_idx = top_idx % vocab
            seqs = torch.cat([seqs[beam_idx], token_idx.unsqueeze(1)], dim=1)
            h, c = h.index_select(1, beam_idx), c.index_select(1, beam_idx)
            scores = top_scores
            is_eos = token_idx.eq(eos)
            if is_eos.any():
                for i in is_eos.nonzero(as_tuple=False).view(-1).tolist():
                    lp = ((5 + seqs.size(1)) / 6) ** alpha
                    finished.append((scores[i].item() / lp, seqs[i].tolist()))
                scores = scores.masked_fill(is_eos, -1e9)
            logits, (h, c) = model(token_idx.unsqueeze(1), (h, c))
        for i in range(seqs.size(0)):
            lp = ((5 + seqs.size(1)) / 6) ** alpha
            finished.append((scores[i].item() / lp, seqs[i].tolist()))
        finished.sort(key=lambda x: x[0], reverse=True)
    return finished[:beam_size]


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(1104)
    vocab, block = 11, 8
    model = LSTMLM(vocab)
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    # sequences that count up modulo the vocabulary, from random starts
    starts = rng.integers(0, vocab, (6, 4, 1))
    data = [torch.from_numpy((s + np.arange(block + 1)) % vocab) for s in starts]

    def train_step(seq):
        x, y = seq[:, :-1], seq[:, 1:]
        logits, _ = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return loss, norm

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    model.train()
    for seq in data:
        loss, norm = step(seq)
        losses += [loss.item(), norm.item()]
    model.eval()
    context = torch.tensor([[1, 2, 3], [7, 8, 9]])
    uniforms = rng.uniform(size=(5, 2))
    for top_k, top_p in ((0, 0.9), (4, 1.0), (3, 0.7)):
        generated, entropies = sample_sequence(model, context, 5, uniforms, temperature=0.8, top_k=top_k, top_p=top_p)
        losses += generated[:, context.size(1):].flatten().tolist() + entropies
    for score, tokens in beam_search(model, bos=0, eos=5):
        losses += [score] + tokens
    return {"losses": losses, "weights": w, "fn": step}
