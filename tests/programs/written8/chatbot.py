# In the manner of the PyTorch chatbot tutorial (pytorch/tutorials beginner_source/
# chatbot_tutorial.py, BSD licence): a Voc of words, ``zeroPadding`` by
# ``itertools.zip_longest(*l, fillvalue=PAD_token)``, ``binaryMatrix`` turned into a
# ``torch.BoolTensor`` mask, batches sorted by length, an EncoderRNN with a bidirectional
# ``nn.GRU`` over ``nn.utils.rnn.pack_padded_sequence(embedded, input_lengths.cpu())`` and
# ``pad_packed_sequence``, its directions summed (``outputs[:, :, :self.hidden_size] +
# outputs[:, : ,self.hidden_size:]``), Luong attention (``dot``, ``general`` and ``concat``
# scores, ``F.softmax(attn_energies, dim=1).unsqueeze(1)``), a decoder stepping one token at
# a time (``attn_weights.bmm(encoder_outputs.transpose(0, 1))``, ``torch.cat((rnn_output,
# context), 1)``, ``torch.tanh``), ``maskNLLLoss`` through ``torch.gather`` and
# ``crossEntropy.masked_select(mask).mean()``, teacher forcing by ``random.random()``,
# ``topk(1)`` feedback of ``torch.LongTensor([[topi[i][0] for i in range(batch_size)]])``,
# ``clip_grad_norm_`` of both halves, two Adam optimizers, and GreedySearchDecoder.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import itertools
import random

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

PAD_token = 0
SOS_token = 1
EOS_token = 2
device = torch.device("cpu")


def zeroPadding(l, fillvalue=PAD_token):
    return list(itertools.zip_longest(*l, fillvalue=fillvalue))


def binaryMatrix(l, value=PAD_token):
    m = []
    for i, seq in enumerate(l):
        m.append([])
        for token in seq:
            if token == PAD_token:
                m[i].append(0)
            else:
                m[i].append(1)
    return m


def inputVar(indexes_batch):
    lengths = torch.tensor([len(indexes) for indexes in indexes_batch])
    padList = zeroPadding(indexes_batch)
    padVar = torch.LongTensor(padList)
    return padVar, lengths


def outputVar(indexes_batch):
    max_target_len = max([len(indexes) for indexes in indexes_batch])
    padList = zeroPadding(indexes_batch)
    mask = binaryMatrix(padList)
    mask = torch.BoolTensor(mask)
    padVar = torch.LongTensor(padList)
    return padVar, mask, max_target_len


def batch2TrainData(pair_batch):
    pair_batch.sort(key=lambda x: len(x[0]), reverse=True)
    input_batch, output_batch = [], []
    for pair in pair_batch:
        input_batch.append(pair[0])
        output_batch.append(pair[1])
    inp, lengths = inputVar(input_batch)
    output, mask, max_target_len = outputVar(output_batch)
    return inp, lengths, output, mask, max_target_len


class EncoderRNN(nn.Module):
    def __init__(self, hidden_size, embedding, n_layers=1, dropout=0):
        super(EncoderRNN, self).__init__()
        self.n_layers = n_layers
        self.hidden_size = hidden_size
        self.embedding = embedding
        self.gru = nn.GRU(hidden_size, hidden_size, n_layers,
                          dropout=(0 if n_layers == 1 else dropout), bidirectional=True)

    def forward(self, input_seq, input_lengths, hidden=None):
        embedded = self.embedding(input_seq)
        packed = nn.utils.rnn.pack_padded_sequence(embedded, input_lengths.cpu())
        outputs, hidden = self.gru(packed, hidden)
        outputs, _ = nn.utils.rnn.pad_packed_sequence(outputs)
        outputs = outputs[:, :, :self.hidden_size] + outputs[:, : ,self.hidden_size:]
        return outputs, hidden


class Attn(nn.Module):
    def __init__(self, method, hidden_size):
        super(Attn, self).__init__()
        self.method = method
        if self.method not in ['dot', 'general', 'concat']:
            raise ValueError(self.method, "is not an appropriate attention method.")
        self.hidden_size = hidden_size
        if self.method == 'general':
            self.attn = nn.Linear(self.hidden_size, hidden_size)
        elif self.method == 'concat':
            self.attn = nn.Linear(self.hidden_size * 2, hidden_size)
            self.v = nn.Parameter(torch.FloatTensor(hidden_size))
            nn.init.uniform_(self.v, -0.1, 0.1)

    def dot_score(self, hidden, encoder_output):
        return torch.sum(hidden * encoder_output, dim=2)

    def general_score(self, hidden, encoder_output):
        energy = self.attn(encoder_output)
        return torch.sum(hidden * energy, dim=2)

    def concat_score(self, hidden, encoder_output):
        energy = self.attn(torch.cat((hidden.expand(encoder_output.size(0), -1, -1), encoder_output), 2)).tanh()
        return torch.sum(self.v * energy, dim=2)

    def forward(self, hidden, encoder_outputs):
        if self.method == 'general':
            attn_energies = self.general_score(hidden, encoder_outputs)
        elif self.method == 'concat':
            attn_energies = self.concat_score(hidden, encoder_outputs)
        elif self.method == 'dot':
            attn_energies = self.dot_score(hidden, encoder_outputs)
        attn_energies = attn_energies.t()
        return F.softmax(attn_energies, dim=1).unsqueeze(1)


class LuongAttnDecoderRNN(nn.Module):
    def __init__(self, attn_model, embedding, hidden_size, output_size, n_layers=1, dropout=0.1):
        super(LuongAttnDecoderRNN, self).__init__()
        self.attn_model = attn_model
        self.hidden_size = hidden_size
        self.output_size = output_size
        self.n_layers = n_layers
        self.dropout = dropout
        self.embedding = embedding
        self.embedding_dropout = nn.Dropout(dropout)
        self.gru = nn.GRU(hidden_size, hidden_size, n_layers, dropout=(0 if n_layers == 1 else dropout))
        self.concat = nn.Linear(hidden_size * 2, hidden_size)
        self.out = nn.Linear(hidden_size, output_size)
        self.attn = Attn(attn_model, hidden_size)

    def forward(self, input_step, last_hidden, encoder_outputs):
        embedded = self.embedding(input_step)
        embedded = self.embedding_dropout(embedded)
        rnn_output, hidden = self.gru(embedded, last_hidden)
        attn_weights = self.attn(rnn_output, encoder_outputs)
        context = attn_weights.bmm(encoder_outputs.transpose(0, 1))
        rnn_output = rnn_output.squeeze(0)
        context = context.squeeze(1)
        concat_input = torch.cat((rnn_output, context), 1)
        concat_output = torch.tanh(self.concat(concat_input))
        output = self.out(concat_output)
        output = F.softmax(output, dim=1)
        return output, hidden


def maskNLLLoss(inp, target, mask):
    nTotal = mask.sum()
    crossEntropy = -torch.log(torch.gather(inp, 1, target.view(-1, 1)).squeeze(1))
    loss = crossEntropy.masked_select(mask).mean()
    loss = loss.to(device)
    return loss, nTotal.item()


class GreedySearchDecoder(nn.Module):
    def __init__(self, encoder, decoder):
        super(GreedySearchDecoder, self).__init__()
        self.encoder = encoder
        self.decoder = decoder

    def forward(self, input_seq, input_length, max_length):
        encoder_outputs, encoder_hidden = self.encoder(input_seq, input_length)
        decoder_hidden = encoder_hidden[:self.decoder.n_layers]
        decoder_input = torch.ones(1, 1, device=device, dtype=torch.long) * SOS_token
        all_tokens = torch.zeros([0], device=device, dtype=torch.long)
        all_scores = torch.zeros([0], device=device)
        for _ in range(max_length):
            decoder_output, decoder_hidden = self.decoder(decoder_input, decoder_hidden, encoder_outputs)
            decoder_scores, decoder_input = torch.max(decoder_output, dim=1)
            all_tokens = torch.cat((all_tokens, decoder_input), dim=0)
            all_scores = torch.cat((all_scores, decoder_scores), dim=0)
            decoder_input = torch.unsqueeze(decoder_input, 0)
        return all_tokens, all_scores


def make_train(encoder, decoder, encoder_optimizer, decoder_optimizer, batch_size, clip,
               teacher_forcing_ratio):
    def train(input_variable, lengths, target_variable, mask, max_target_len):
        encoder_optimizer.zero_grad()
        decoder_optimizer.zero_grad()
        loss = 0
        print_losses = []
        n_totals = 0
        encoder_outputs, encoder_hidden = encoder(input_variable, lengths)
        decoder_input = torch.LongTensor([[SOS_token for _ in range(batch_size)]])
        decoder_input = decoder_input.to(device)
        decoder_hidden = encoder_hidden[:decoder.n_layers]
        use_teacher_forcing = True if random.random() < teacher_forcing_ratio else False
        if use_teacher_forcing:
            for t in range(max_target_len):
                decoder_output, decoder_hidden = decoder(decoder_input, decoder_hidden, encoder_outputs)
                decoder_input = target_variable[t].view(1, -1)
                mask_loss, nTotal = maskNLLLoss(decoder_output, target_variable[t], mask[t])
                loss += mask_loss
                print_losses.append(mask_loss.item() * nTotal)
                n_totals += nTotal
        else:
            for t in range(max_target_len):
                decoder_output, decoder_hidden = decoder(decoder_input, decoder_hidden, encoder_outputs)
                _, topi = decoder_output.topk(1)
                decoder_input = torch.LongTensor([[topi[i][0] for i in range(batch_size)]])
                decoder_input = decoder_input.to(device)
                mask_loss, nTotal = maskNLLLoss(decoder_output, target_variable[t], mask[t])
                loss += mask_loss
                print_losses.append(mask_loss.item() * nTotal)
                n_totals += nTotal
        loss.backward()
        _ = nn.utils.clip_grad_norm_(encoder.parameters(), clip)
        _ = nn.utils.clip_grad_norm_(decoder.parameters(), clip)
        encoder_optimizer.step()
        decoder_optimizer.step()
        return sum(print_losses) / n_totals

    return train


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    random.seed(7)
    rng = np.random.default_rng(807)
    voc_words, hidden_size, batch_size = 11, 8, 3
    embedding = nn.Embedding(voc_words, hidden_size)
    encoder = EncoderRNN(hidden_size, embedding, n_layers=2, dropout=0.0)
    decoder = LuongAttnDecoderRNN('general', embedding, hidden_size, voc_words, n_layers=2, dropout=0.0)
    concat_attn = Attn('concat', hidden_size)
    models = {"encoder": encoder, "decoder": decoder, "concat": concat_attn}
    if weights is not None:
        for name, model in models.items():
            model.load_state_dict({k[len(name) + 1:]: torch.tensor(v) for k, v in weights.items()
                                   if k.startswith(name + ".")})
    w = {f"{name}.{k}": v.detach().numpy().copy() for name, model in models.items()
         for k, v in model.state_dict().items()}
    pairs = []
    for _ in range(9):
        src = rng.integers(3, voc_words, size=int(rng.integers(2, 5))).tolist() + [EOS_token]
        tgt = src[::-1][1:] + [EOS_token]
        pairs.append([src, tgt])
    batches = [batch2TrainData([pairs[i + j] for j in range(batch_size)]) for i in range(0, 9, batch_size)]
    encoder_optimizer = torch.optim.Adam(encoder.parameters(), lr=0.005)
    decoder_optimizer = torch.optim.Adam(decoder.parameters(), lr=0.005 * 5.0)
    train = make_train(encoder, decoder, encoder_optimizer, decoder_optimizer, batch_size, 50.0, 0.5)
    step = torch.compile(train) if compiled else train
    encoder.train()
    decoder.train()
    losses = [float(b[4]) for b in batches] + batches[0][3].float().sum(0).tolist()
    for iteration in range(3):
        for inp, lengths, out, mask, max_target_len in batches:
            losses.append(step(inp, lengths, out, mask, max_target_len))
    encoder.eval()
    decoder.eval()
    searcher = GreedySearchDecoder(encoder, decoder)
    with torch.no_grad():
        seq = torch.LongTensor([pairs[0][0]]).transpose(0, 1)
        tokens, scores = searcher(seq, torch.tensor([len(pairs[0][0])]), 4)
        losses += tokens.tolist() + scores.tolist()
        enc_out, enc_hidden = encoder(seq, torch.tensor([len(pairs[0][0])]))
        losses += concat_attn(enc_hidden[-1:], enc_out).flatten().tolist()
    return {"losses": losses, "weights": w, "fn": step}
