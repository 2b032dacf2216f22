# In the manner of the PyTorch tutorials "Classifying Names with a Character-Level RNN" and
# "Generating Names with a Character-Level RNN": ``all_letters = string.ascii_letters + " .,;'"``,
# ``letterToTensor``/``lineToTensor`` filling ``tensor[li][0][letterToIndex(letter)] = 1``, an
# RNN module of ``nn.Linear(input_size + hidden_size, ...)`` layers on ``torch.cat((input,
# hidden), 1)`` with ``nn.LogSoftmax(dim=1)`` and ``initHidden`` returning ``torch.zeros(1,
# hidden_size)``, ``nn.NLLLoss``, a ``train`` function looping over ``line_tensor.size()[0]``,
# ``rnn.zero_grad()`` and the manual update ``p.data.add_(p.grad.data, alpha=-learning_rate)``,
# ``categoryFromOutput`` with ``output.topk(1)`` and ``top_i[0].item()``; the generator takes a
# category one-hot too, has ``nn.Dropout(0.1)`` (here 0.0) and ``o2o``, sums ``loss += l`` over
# the letters with ``target_line_tensor.unsqueeze_(-1)`` and returns ``loss.item() /
# input_line_tensor.size(0)``; ``sample`` decodes under ``torch.no_grad()`` until the EOS index.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import string

import numpy as np
import torch
import torch.nn as nn

all_letters = string.ascii_letters + " .,;'"
n_letters = len(all_letters)
all_categories = ["English", "French", "Italian"]
n_categories = len(all_categories)


def letterToIndex(letter):
    return all_letters.find(letter)


def letterToTensor(letter):
    tensor = torch.zeros(1, n_letters)
    tensor[0][letterToIndex(letter)] = 1
    return tensor


def lineToTensor(line):
    tensor = torch.zeros(len(line), 1, n_letters)
    for li, letter in enumerate(line):
        tensor[li][0][letterToIndex(letter)] = 1
    return tensor


class RNN(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super(RNN, self).__init__()
        self.hidden_size = hidden_size
        self.i2h = nn.Linear(input_size + hidden_size, hidden_size)
        self.i2o = nn.Linear(input_size + hidden_size, output_size)
        self.softmax = nn.LogSoftmax(dim=1)

    def forward(self, input, hidden):
        combined = torch.cat((input, hidden), 1)
        hidden = self.i2h(combined)
        output = self.i2o(combined)
        output = self.softmax(output)
        return output, hidden

    def initHidden(self):
        return torch.zeros(1, self.hidden_size)


class GenRNN(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super(GenRNN, self).__init__()
        self.hidden_size = hidden_size
        self.i2h = nn.Linear(n_categories + input_size + hidden_size, hidden_size)
        self.i2o = nn.Linear(n_categories + input_size + hidden_size, output_size)
        self.o2o = nn.Linear(hidden_size + output_size, output_size)
        self.dropout = nn.Dropout(0.0)
        self.softmax = nn.LogSoftmax(dim=1)

    def forward(self, category, input, hidden):
        input_combined = torch.cat((category, input, hidden), 1)
        hidden = self.i2h(input_combined)
        output = self.i2o(input_combined)
        output_combined = torch.cat((hidden, output), 1)
        output = self.o2o(output_combined)
        output = self.dropout(output)
        output = self.softmax(output)
        return output, hidden

    def initHidden(self):
        return torch.zeros(1, self.hidden_size)


def categoryFromOutput(output):
    top_n, top_i = output.topk(1)
    category_i = top_i[0].item()
    return all_categories[category_i], category_i


def categoryTensor(category):
    li = all_categories.index(category)
    tensor = torch.zeros(1, n_categories)
    tensor[0][li] = 1
    return tensor


def inputTensor(line):
    tensor = torch.zeros(len(line), 1, n_letters + 1)
    for li in range(len(line)):
        tensor[li][0][all_letters.find(line[li])] = 1
    return tensor


def targetTensor(line):
    letter_indexes = [all_letters.find(line[li]) for li in range(1, len(line))]
    letter_indexes.append(n_letters)  # EOS
    return torch.LongTensor(letter_indexes)


NAMES = [("English", "smith"), ("French", "dubois"), ("Italian", "rossi"), ("English", "jones"),
         ("French", "martin"), ("Italian", "bianco"), ("English", "brown"), ("Italian", "conti")]


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    n_hidden = 32
    rnn = RNN(n_letters, n_hidden, n_categories)
    gen = GenRNN(n_letters + 1, n_hidden, n_letters + 1)
    if weights is not None:
        rnn.load_state_dict({k[4:]: torch.tensor(v) for k, v in weights.items() if k.startswith("rnn.")})
        gen.load_state_dict({k[4:]: torch.tensor(v) for k, v in weights.items() if k.startswith("gen.")})
    w = {"rnn." + k: v.detach().numpy().copy() for k, v in rnn.state_dict().items()}
    w.update({"gen." + k: v.detach().numpy().copy() for k, v in gen.state_dict().items()})
    criterion = nn.NLLLoss()
    learning_rate = 0.005

    def train(category_tensor, line_tensor):
        hidden = rnn.initHidden()
        rnn.zero_grad()
        for i in range(line_tensor.size()[0]):
            output, hidden = rnn(line_tensor[i], hidden)
        loss = criterion(output, category_tensor)
        loss.backward()
        for p in rnn.parameters():
            p.data.add_(p.grad.data, alpha=-learning_rate)
        return output, loss

    train_c = torch.compile(train) if compiled else train
    losses = []
    out, _ = rnn(letterToTensor('A'), torch.zeros(1, n_hidden))
    losses += out.flatten().tolist()
    current_loss = 0
    for it in range(2):
        for category, line in NAMES:
            category_tensor = torch.tensor([all_categories.index(category)], dtype=torch.long)
            line_tensor = lineToTensor(line.capitalize())
            output, loss = train_c(category_tensor, line_tensor)
            current_loss += loss
            guess, guess_i = categoryFromOutput(output)
            losses += [loss.item(), guess_i]
    losses.append(float(current_loss / len(NAMES)))

    gen_criterion = nn.NLLLoss()

    def train_gen(category_tensor, input_line_tensor, target_line_tensor):
        target_line_tensor.unsqueeze_(-1)
        hidden = gen.initHidden()
        gen.zero_grad()
        loss = torch.Tensor([0])
        for i in range(input_line_tensor.size(0)):
            output, hidden = gen(category_tensor, input_line_tensor[i], hidden)
            l = gen_criterion(output, target_line_tensor[i])
            loss += l
        loss.backward()
        for p in gen.parameters():
            p.data.add_(p.grad.data, alpha=-learning_rate * 10)
        return output, loss / input_line_tensor.size(0)

    train_g = torch.compile(train_gen) if compiled else train_gen
    for it in range(2):
        for category, line in NAMES[:4]:
            output, loss = train_g(categoryTensor(category), inputTensor(line), targetTensor(line))
            losses.append(loss.item())

    def sample(category, start_letter='A', max_length=6):
        with torch.no_grad():
            category_tensor = categoryTensor(category)
            input = inputTensor(start_letter)
            hidden = gen.initHidden()
            output_name = start_letter
            for i in range(max_length):
                output, hidden = gen(category_tensor, input[0], hidden)
                topv, topi = output.topk(1)
                topi = topi[0][0]
                if topi == n_letters:
                    break
                else:
                    letter = all_letters[topi]
                    output_name += letter
                input = inputTensor(letter)
            return output_name

    losses += [len(sample(c, s)) for c, s in (("English", "S"), ("Italian", "R"))]
    return {"losses": losses, "weights": w, "fn": [train_c, train_g]}
