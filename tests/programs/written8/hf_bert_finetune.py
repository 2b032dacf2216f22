# In the manner of huggingface/transformers' modeling_bert.py and its run_glue_no_trainer.py
# example (Apache-2.0 licence): BertEmbeddings with ``position_ids`` registered as
# ``torch.arange(n).expand((1, -1))`` (``persistent=False``) and a zero ``token_type_ids``
# buffer, LayerNorm with ``eps=1e-12``, ``transpose_for_scores`` by ``x.size()[:-1] +
# (heads, size)``, the extended attention mask ``(1.0 - mask[:, None, None, :]) *
# torch.finfo(dtype).min``, a tanh pooler over ``hidden_states[:, 0]``, a classification
# head returning a dict, and the fine-tuning loop: a Dataset whose ``__getitem__`` returns
# a dict, a padding ``collate_fn``, a ``DataLoader`` with a ``torch.Generator``,
# ``batch = {k: v.to(device) for k, v in batch.items()}`` and ``model(**batch)``, AdamW
# parameter groups with ``no_decay = ["bias", "LayerNorm.weight"]``, a warm-up by
# ``LinearLR`` chained to a decay by ``SequentialLR``, gradient accumulation
# (``loss / gradient_accumulation_steps``), ``clip_grad_norm_(error_if_nonfinite=True)``,
# ``zero_grad(set_to_none=True)``, the embeddings frozen by ``requires_grad_(False)``.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import math

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class BertEmbeddings(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.word_embeddings = nn.Embedding(config["vocab_size"], config["hidden_size"], padding_idx=config["pad_token_id"])
        self.position_embeddings = nn.Embedding(config["max_position_embeddings"], config["hidden_size"])
        self.token_type_embeddings = nn.Embedding(config["type_vocab_size"], config["hidden_size"])
        self.LayerNorm = nn.LayerNorm(config["hidden_size"], eps=config["layer_norm_eps"])
        self.dropout = nn.Dropout(config["hidden_dropout_prob"])
        self.register_buffer(
            "position_ids", torch.arange(config["max_position_embeddings"]).expand((1, -1)), persistent=False
        )
        self.register_buffer(
            "token_type_ids", torch.zeros(self.position_ids.size(), dtype=torch.long), persistent=False
        )

    def forward(self, input_ids=None, token_type_ids=None):
        input_shape = input_ids.size()
        seq_length = input_shape[1]
        position_ids = self.position_ids[:, :seq_length]
        if token_type_ids is None:
            buffered_token_type_ids = self.token_type_ids[:, :seq_length]
            token_type_ids = buffered_token_type_ids.expand(input_shape[0], seq_length)
        inputs_embeds = self.word_embeddings(input_ids)
        token_type_embeddings = self.token_type_embeddings(token_type_ids)
        embeddings = inputs_embeds + token_type_embeddings
        embeddings += self.position_embeddings(position_ids)
        embeddings = self.LayerNorm(embeddings)
        embeddings = self.dropout(embeddings)
        return embeddings


class BertSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_attention_heads = config["num_attention_heads"]
        self.attention_head_size = int(config["hidden_size"] / config["num_attention_heads"])
        self.all_head_size = self.num_attention_heads * self.attention_head_size
        self.query = nn.Linear(config["hidden_size"], self.all_head_size)
        self.key = nn.Linear(config["hidden_size"], self.all_head_size)
        self.value = nn.Linear(config["hidden_size"], self.all_head_size)
        self.dropout = nn.Dropout(config["attention_probs_dropout_prob"])

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        x = x.view(new_x_shape)
        return x.permute(0, 2, 1, 3)

    def forward(self, hidden_states, attention_mask=None):
        query_layer = self.transpose_for_scores(self.query(hidden_states))
        key_layer = self.transpose_for_scores(self.key(hidden_states))
        value_layer = self.transpose_for_scores(self.value(hidden_states))
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        attention_scores = attention_scores / math.sqrt(self.attention_head_size)
        if attention_mask is not None:
            attention_scores = attention_scores + attention_mask
        attention_probs = nn.functional.softmax(attention_scores, dim=-1)
        attention_probs = self.dropout(attention_probs)
        context_layer = torch.matmul(attention_probs, value_layer)
        context_layer = context_layer.permute(0, 2, 1, 3).contiguous()
        new_context_layer_shape = context_layer.size()[:-2] + (self.all_head_size,)
        context_layer = context_layer.view(new_context_layer_shape)
        return context_layer


class BertSelfOutput(nn.Module):
    def __init__(self, config, in_size):
        super().__init__()
        self.dense = nn.Linear(in_size, config["hidden_size"])
        self.LayerNorm = nn.LayerNorm(config["hidden_size"], eps=config["layer_norm_eps"])
        self.dropout = nn.Dropout(config["hidden_dropout_prob"])

    def forward(self, hidden_states, input_tensor):
        hidden_states = self.dense(hidden_states)
        hidden_states = self.dropout(hidden_states)
        hidden_states = self.LayerNorm(hidden_states + input_tensor)
        return hidden_states


class BertLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.attention = BertSelfAttention(config)
        self.attention_output = BertSelfOutput(config, config["hidden_size"])
        self.intermediate = nn.Linear(config["hidden_size"], config["intermediate_size"])
        self.intermediate_act_fn = nn.functional.gelu
        self.output = BertSelfOutput(config, config["intermediate_size"])

    def forward(self, hidden_states, attention_mask=None):
        attention_output = self.attention_output(self.attention(hidden_states, attention_mask), hidden_states)
        intermediate_output = self.intermediate_act_fn(self.intermediate(attention_output))
        return self.output(intermediate_output, attention_output)


class BertForSequenceClassification(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.num_labels = config["num_labels"]
        self.embeddings = BertEmbeddings(config)
        self.layer = nn.ModuleList([BertLayer(config) for _ in range(config["num_hidden_layers"])])
        self.pooler = nn.Linear(config["hidden_size"], config["hidden_size"])
        self.pooler_activation = nn.Tanh()
        self.dropout = nn.Dropout(config["hidden_dropout_prob"])
        self.classifier = nn.Linear(config["hidden_size"], config["num_labels"])
        self.apply(self._init_weights)

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            module.weight.data.normal_(mean=0.0, std=self.config["initializer_range"])
            if module.bias is not None:
                module.bias.data.zero_()
        elif isinstance(module, nn.Embedding):
            module.weight.data.normal_(mean=0.0, std=self.config["initializer_range"])
            if module.padding_idx is not None:
                module.weight.data[module.padding_idx].zero_()
        elif isinstance(module, nn.LayerNorm):
            module.bias.data.zero_()
            module.weight.data.fill_(1.0)

    def get_extended_attention_mask(self, attention_mask, dtype):
        extended_attention_mask = attention_mask[:, None, None, :]
        extended_attention_mask = extended_attention_mask.to(dtype=dtype)
        extended_attention_mask = (1.0 - extended_attention_mask) * torch.finfo(dtype).min
        return extended_attention_mask

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, labels=None):
        embedding_output = self.embeddings(input_ids=input_ids, token_type_ids=token_type_ids)
        extended_attention_mask = self.get_extended_attention_mask(attention_mask, embedding_output.dtype)
        hidden_states = embedding_output
        for layer_module in self.layer:
            hidden_states = layer_module(hidden_states, extended_attention_mask)
        first_token_tensor = hidden_states[:, 0]
        pooled_output = self.pooler_activation(self.pooler(first_token_tensor))
        pooled_output = self.dropout(pooled_output)
        logits = self.classifier(pooled_output)
        loss = None
        if labels is not None:
            loss_fct = nn.CrossEntropyLoss()
            loss = loss_fct(logits.view(-1, self.num_labels), labels.view(-1))
        return {"loss": loss, "logits": logits}


class PairDataset(Dataset):
    def __init__(self, rng, n, vocab):
        self.examples = []
        for i in range(n):
            length = int(rng.integers(3, 8))
            ids = [1] + rng.integers(3, vocab, size=length).tolist() + [2]
            self.examples.append({"input_ids": ids, "label": int(sum(ids) % 2)})

    def __len__(self):
        return len(self.examples)

    def __getitem__(self, idx):
        ex = self.examples[idx]
        return {"input_ids": ex["input_ids"], "token_type_ids": [0] * len(ex["input_ids"]),
                "labels": ex["label"]}


def data_collator(features, pad_to=10):
    batch = {}
    batch["input_ids"] = torch.tensor([f["input_ids"] + [0] * (pad_to - len(f["input_ids"])) for f in features])
    batch["token_type_ids"] = torch.tensor([f["token_type_ids"] + [0] * (pad_to - len(f["token_type_ids"])) for f in features])
    batch["attention_mask"] = torch.tensor([[1] * len(f["input_ids"]) + [0] * (pad_to - len(f["input_ids"])) for f in features])
    batch["labels"] = torch.tensor([f["labels"] for f in features], dtype=torch.long)
    return batch


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(802)
    device = torch.device("cpu")
    config = dict(vocab_size=20, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                  intermediate_size=24, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                  max_position_embeddings=12, type_vocab_size=2, initializer_range=0.02,
                  layer_norm_eps=1e-12, pad_token_id=0, num_labels=2)
    model = BertForSequenceClassification(config)
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    model.to(device)
    model.embeddings.position_embeddings.requires_grad_(False)
    train_dataset = PairDataset(rng, 12, config["vocab_size"])
    g = torch.Generator()
    g.manual_seed(42)
    train_dataloader = DataLoader(train_dataset, shuffle=False, collate_fn=data_collator, batch_size=4,
                                  generator=g)
    no_decay = ["bias", "LayerNorm.weight"]
    optimizer_grouped_parameters = [
        {"params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay) and p.requires_grad],
         "weight_decay": 0.01},
        {"params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay) and p.requires_grad],
         "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(optimizer_grouped_parameters, lr=5e-3)
    gradient_accumulation_steps = 2
    num_epochs = 4
    max_train_steps = num_epochs * math.ceil(len(train_dataloader) / gradient_accumulation_steps)
    warmup = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.25, end_factor=1.0, total_iters=2)
    decay = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=1.0, end_factor=0.1,
                                              total_iters=max_train_steps - 2)
    lr_scheduler = torch.optim.lr_scheduler.SequentialLR(optimizer, schedulers=[warmup, decay], milestones=[2])

    def forward_backward(batch):
        outputs = model(**batch)
        loss = outputs["loss"]
        loss = loss / gradient_accumulation_steps
        loss.backward()
        return loss

    def optimizer_step():
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=True)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return norm

    fb = torch.compile(forward_backward) if compiled else forward_backward
    losses = [len(train_dataloader), len(optimizer.param_groups[0]["params"]),
              len(optimizer.param_groups[1]["params"]), float(model.embeddings.position_ids.shape[1]),
              float(len(model.state_dict()))]
    completed_steps = 0
    model.train()
    for epoch in range(num_epochs):
        for step, batch in enumerate(train_dataloader):
            batch = {k: v.to(device) for k, v in batch.items()}
            loss = fb(batch)
            losses.append(loss.detach().float().item())
            if step % gradient_accumulation_steps == gradient_accumulation_steps - 1 or step == len(train_dataloader) - 1:
                losses.append(optimizer_step().item())
                lr_scheduler.step()
                completed_steps += 1
        losses.append(lr_scheduler.get_last_lr()[0])
    model.eval()
    with torch.no_grad():
        for batch in train_dataloader:
            outputs = model(**batch)
            predictions = outputs["logits"].argmax(dim=-1)
            losses += predictions.tolist()
            losses.append(float((predictions == batch["labels"]).sum()))
    # a nonfinite gradient norm is an error when asked for
    model.classifier.weight.grad = torch.full_like(model.classifier.weight, float("nan"))
    try:
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=True)
        losses.append(0.0)
    except RuntimeError:
        losses.append(1.0)
    losses.append(float(model.embeddings.position_embeddings.weight.grad is None))
    return {"losses": losses, "weights": w, "fn": fb}
