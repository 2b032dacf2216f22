# In the manner of the PyTorch tutorial "NLP From Scratch: Classifying Names with a
# Character-Level RNN": names as one-hot letter tensors (lineToTensor), an RNN module
# written by hand (i2h and h2o over torch.cat of input and hidden, LogSoftmax), NLLLoss,
# the manual SGD update through p.data.add_(p.grad.data, alpha=-lr), categoryFromOutput
# with topk, and a confusion matrix.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import random
import string

import torch
import torch.nn as nn

all_letters = string.ascii_letters + " .,;'"
n_letters = len(all_letters)

category_lines = {
    'English': ['Smith', 'Jones', 'Baker', 'White', 'Green', 'Adams'],
    'Italian': ['Rossi', 'Ricci', 'Conti', 'Bruno', 'Costa', 'Greco'],
    'Japanese': ['Sato', 'Kato', 'Ito', 'Abe', 'Endo', 'Mori'],
}
all_categories = list(category_lines)
n_categories = len(all_categories)


def letterToIndex(letter):
    return all_letters.find(letter)


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
        self.h2o = nn.Linear(hidden_size, output_size)
        self.softmax = nn.LogSoftmax(dim=1)

    def forward(self, input, hidden):
        combined = torch.cat((input, hidden), 1)
        hidden = torch.tanh(self.i2h(combined))
        output = self.h2o(hidden)
        output = self.softmax(output)
        return output, hidden

    def initHidden(self):
        return torch.zeros(1, self.hidden_size)


def categoryFromOutput(output):
    top_n, top_i = output.topk(1)
    category_i = top_i[0].item()
    return all_categories[category_i], category_i


def randomChoice(l):
    return l[random.randint(0, len(l) - 1)]


def randomTrainingExample():
    category = randomChoice(all_categories)
    line = randomChoice(category_lines[category])
    category_tensor = torch.tensor([all_categories.index(category)], dtype=torch.long)
    line_tensor = lineToTensor(line)
    return category, line, category_tensor, line_tensor


def run(weights=None, compiled=False):
    random.seed(0)
    torch.manual_seed(0)
    n_hidden = 32
    rnn = RNN(n_letters, n_hidden, n_categories)
    if weights is not None:
        rnn.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in rnn.state_dict().items()}
    criterion = nn.NLLLoss()
    learning_rate = 0.005

    def train(category_tensor, line_tensor):
        hidden = rnn.initHidden()

        rnn.zero_grad()

        for i in range(line_tensor.size()[0]):
            output, hidden = rnn(line_tensor[i], hidden)

        loss = criterion(output, category_tensor)
        loss.backward()

        # Add parameters' gradients to their values, multiplied by learning rate
        for p in rnn.parameters():
            p.data.add_(p.grad.data, alpha=-learning_rate)

        return output, loss.item()

    step = torch.compile(train) if compiled else train
    losses = []
    correct = 0
    for iter in range(1, 61):
        category, line, category_tensor, line_tensor = randomTrainingExample()
        output, loss = step(category_tensor, line_tensor)
        losses.append(loss)
        guess, guess_i = categoryFromOutput(output)
        correct += guess == category
    losses.append(correct)

    def evaluate(line_tensor):
        hidden = rnn.initHidden()
        for i in range(line_tensor.size()[0]):
            output, hidden = rnn(line_tensor[i], hidden)
        return output

    confusion = torch.zeros(n_categories, n_categories)
    for category in all_categories:
        for line in category_lines[category]:
            output = evaluate(lineToTensor(line))
            guess, guess_i = categoryFromOutput(output)
            category_i = all_categories.index(category)
            confusion[category_i][guess_i] += 1
    for i in range(n_categories):
        confusion[i] = confusion[i] / confusion[i].sum()
    losses += confusion.view(-1).tolist()
    return {"losses": losses, "weights": w, "fn": step}
