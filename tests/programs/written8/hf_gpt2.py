# In the manner of huggingface/transformers' modeling_gpt2.py and pytorch_utils.Conv1D
# (Apache-2.0 licence): ``Conv1D`` (a linear layer whose weight is stored transposed,
# ``torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)``), ``c_attn(...).split(
# self.split_size, dim=2)``, ``_split_heads``/``_merge_heads`` by ``view``/``permute``/
# ``contiguous``, a boolean causal mask buffer (``persistent=False``) sliced per length
# and applied by ``torch.where(causal_mask, w, torch.full([], torch.finfo(w.dtype).min))``,
# an additive padding mask ``(1.0 - attention_mask) * torch.finfo(dtype).min``, the
# ``NewGELUActivation`` (tanh approximation written out with ``torch.pow``) beside
# ``F.gelu(approximate="tanh")``, ``_init_weights`` through ``self.apply`` and the scaled
# init of ``c_proj.weight`` found by ``named_parameters``, tied input and output
# embeddings, shifted labels with ``-100`` on padding, ``model = torch.compile(model)``
# inside the program (unwrapped by ``_orig_mod``), and top-k greedy generation with ``logits[logits < v[:, [-1]]]``.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Conv1D(nn.Module):
    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, x):
        size_out = x.size()[:-1] + (self.nf,)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        x = x.view(size_out)
        return x


class NewGELUActivation(nn.Module):
    def forward(self, input):
        return 0.5 * input * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (input + 0.044715 * torch.pow(input, 3.0))))


class GPT2Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        max_positions = config["n_positions"]
        self.register_buffer(
            "bias",
            torch.tril(torch.ones((max_positions, max_positions), dtype=torch.bool)).view(
                1, 1, max_positions, max_positions
            ),
            persistent=False,
        )
        self.embed_dim = config["n_embd"]
        self.num_heads = config["n_head"]
        self.head_dim = self.embed_dim // self.num_heads
        self.split_size = self.embed_dim
        self.scale_attn_weights = True
        self.c_attn = Conv1D(3 * self.embed_dim, self.embed_dim)
        self.c_proj = Conv1D(self.embed_dim, self.embed_dim)
        self.attn_dropout = nn.Dropout(config["attn_pdrop"])
        self.resid_dropout = nn.Dropout(config["resid_pdrop"])

    def _attn(self, query, key, value, attention_mask=None):
        attn_weights = torch.matmul(query, key.transpose(-1, -2))
        if self.scale_attn_weights:
            attn_weights = attn_weights / torch.full(
                [], value.size(-1) ** 0.5, dtype=attn_weights.dtype, device=attn_weights.device
            )
        query_length, key_length = query.size(-2), key.size(-2)
        causal_mask = self.bias[:, :, key_length - query_length : key_length, :key_length]
        mask_value = torch.finfo(attn_weights.dtype).min
        mask_value = torch.full([], mask_value, dtype=attn_weights.dtype, device=attn_weights.device)
        attn_weights = torch.where(causal_mask, attn_weights.to(attn_weights.dtype), mask_value)
        if attention_mask is not None:
            attn_weights = attn_weights + attention_mask
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_weights = attn_weights.type(value.dtype)
        attn_weights = self.attn_dropout(attn_weights)
        attn_output = torch.matmul(attn_weights, value)
        return attn_output, attn_weights

    def _split_heads(self, tensor, num_heads, attn_head_size):
        new_shape = tensor.size()[:-1] + (num_heads, attn_head_size)
        tensor = tensor.view(new_shape)
        return tensor.permute(0, 2, 1, 3)

    def _merge_heads(self, tensor, num_heads, attn_head_size):
        tensor = tensor.permute(0, 2, 1, 3).contiguous()
        new_shape = tensor.size()[:-2] + (num_heads * attn_head_size,)
        return tensor.view(new_shape)

    def forward(self, hidden_states, layer_past=None, attention_mask=None, use_cache=False):
        query, key, value = self.c_attn(hidden_states).split(self.split_size, dim=2)
        query = self._split_heads(query, self.num_heads, self.head_dim)
        key = self._split_heads(key, self.num_heads, self.head_dim)
        value = self._split_heads(value, self.num_heads, self.head_dim)
        if layer_past is not None:
            past_key, past_value = layer_past
            key = torch.cat((past_key, key), dim=-2)
            value = torch.cat((past_value, value), dim=-2)
        present = (key, value) if use_cache is True else None
        attn_output, attn_weights = self._attn(query, key, value, attention_mask)
        attn_output = self._merge_heads(attn_output, self.num_heads, self.head_dim)
        attn_output = self.c_proj(attn_output)
        attn_output = self.resid_dropout(attn_output)
        return attn_output, present


class GPT2MLP(nn.Module):
    def __init__(self, intermediate_size, config):
        super().__init__()
        embed_dim = config["n_embd"]
        self.c_fc = Conv1D(intermediate_size, embed_dim)
        self.c_proj = Conv1D(embed_dim, intermediate_size)
        self.act = NewGELUActivation() if config["activation_function"] == "gelu_new" else nn.GELU(approximate="tanh")
        self.dropout = nn.Dropout(config["resid_pdrop"])

    def forward(self, hidden_states):
        hidden_states = self.c_fc(hidden_states)
        hidden_states = self.act(hidden_states)
        hidden_states = self.c_proj(hidden_states)
        hidden_states = self.dropout(hidden_states)
        return hidden_states


class GPT2Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        hidden_size = config["n_embd"]
        self.ln_1 = nn.LayerNorm(hidden_size, eps=config["layer_norm_epsilon"])
        self.attn = GPT2Attention(config)
        self.ln_2 = nn.LayerNorm(hidden_size, eps=config["layer_norm_epsilon"])
        self.mlp = GPT2MLP(4 * hidden_size, config)

    def forward(self, hidden_states, layer_past=None, attention_mask=None, use_cache=False):
        residual = hidden_states
        hidden_states = self.ln_1(hidden_states)
        attn_output, present = self.attn(hidden_states, layer_past=layer_past,
                                         attention_mask=attention_mask, use_cache=use_cache)
        hidden_states = attn_output + residual
        residual = hidden_states
        hidden_states = self.ln_2(hidden_states)
        feed_forward_hidden_states = self.mlp(hidden_states)
        hidden_states = residual + feed_forward_hidden_states
        return hidden_states, present


class GPT2LMHeadModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config["vocab_size"], config["n_embd"])
        self.wpe = nn.Embedding(config["n_positions"], config["n_embd"])
        self.drop = nn.Dropout(config["embd_pdrop"])
        self.h = nn.ModuleList([GPT2Block(config) for _ in range(config["n_layer"])])
        self.ln_f = nn.LayerNorm(config["n_embd"], eps=config["layer_norm_epsilon"])
        self.lm_head = nn.Linear(config["n_embd"], config["vocab_size"], bias=False)
        self.apply(self._init_weights)
        self.lm_head.weight = self.wte.weight

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, Conv1D)):
            module.weight.data.normal_(mean=0.0, std=self.config["initializer_range"])
            if module.bias is not None:
                module.bias.data.zero_()
        elif isinstance(module, nn.Embedding):
            module.weight.data.normal_(mean=0.0, std=self.config["initializer_range"])
        elif isinstance(module, nn.LayerNorm):
            module.bias.data.zero_()
            module.weight.data.fill_(1.0)
        for name, p in module.named_parameters():
            if name == "c_proj.weight":
                p.data.normal_(mean=0.0, std=(self.config["initializer_range"] / math.sqrt(2 * self.config["n_layer"])))

    def forward(self, input_ids, attention_mask=None, labels=None, past_key_values=None, use_cache=False):
        input_shape = input_ids.size()
        input_ids = input_ids.view(-1, input_shape[-1])
        if past_key_values is None:
            past_length = 0
            past_key_values = tuple([None] * len(self.h))
        else:
            past_length = past_key_values[0][0].size(-2)
        position_ids = torch.arange(past_length, input_shape[-1] + past_length, dtype=torch.long, device=input_ids.device)
        position_ids = position_ids.unsqueeze(0)
        if attention_mask is not None:
            attention_mask = attention_mask.view(input_ids.shape[0], -1)
            attention_mask = attention_mask[:, None, None, :]
            attention_mask = attention_mask.to(dtype=self.wte.weight.dtype)
            attention_mask = (1.0 - attention_mask) * torch.finfo(self.wte.weight.dtype).min
        inputs_embeds = self.wte(input_ids)
        position_embeds = self.wpe(position_ids)
        hidden_states = inputs_embeds + position_embeds
        hidden_states = self.drop(hidden_states)
        output_shape = (-1,) + input_shape[1:] + (hidden_states.size(-1),)
        presents = () if use_cache else None
        for i, (block, layer_past) in enumerate(zip(self.h, past_key_values)):
            hidden_states, present = block(hidden_states, layer_past=layer_past,
                                           attention_mask=attention_mask, use_cache=use_cache)
            if use_cache is True:
                presents = presents + (present,)
        hidden_states = self.ln_f(hidden_states)
        hidden_states = hidden_states.view(output_shape)
        lm_logits = self.lm_head(hidden_states)
        loss = None
        if labels is not None:
            shift_logits = lm_logits[..., :-1, :].contiguous()
            shift_labels = labels[..., 1:].contiguous()
            loss_fct = nn.CrossEntropyLoss()
            loss = loss_fct(shift_logits.view(-1, shift_logits.size(-1)), shift_labels.view(-1))
        return {"loss": loss, "logits": lm_logits, "past_key_values": presents}


@torch.no_grad()
def generate(model, input_ids, max_new_tokens, top_k=3):
    out = model(input_ids, use_cache=True)
    past = out["past_key_values"]
    generated = input_ids
    for _ in range(max_new_tokens):
        logits = out["logits"][:, -1, :]
        v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
        logits[logits < v[:, [-1]]] = -float("Inf")
        next_token = torch.argmax(logits, dim=-1, keepdim=True)
        generated = torch.cat((generated, next_token), dim=1)
        out = model(next_token, past_key_values=past, use_cache=True)
        past = out["past_key_values"]
    return generated


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(801)
    config = dict(vocab_size=13, n_positions=16, n_embd=16, n_layer=2, n_head=2, resid_pdrop=0.0,
                  embd_pdrop=0.0, attn_pdrop=0.0, layer_norm_epsilon=1e-5, initializer_range=0.02,
                  activation_function="gelu_new")
    model = GPT2LMHeadModel(config)
    model.h[1].mlp.act = nn.GELU(approximate="tanh")
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    if compiled:
        model = torch.compile(model)
    batches = []
    for _ in range(3):
        ids = rng.integers(0, 13, size=(3, 8))
        mask = np.ones((3, 8), dtype=np.int64)
        mask[1, 6:] = 0
        mask[2, 5:] = 0
        labels = np.where(mask == 1, ids, -100)
        batches.append((torch.tensor(ids), torch.tensor(mask), torch.tensor(labels)))
    losses = [len(model.state_dict()), float(model.lm_head.weight is model.wte.weight),
              sum(p.numel() for p in model.parameters())]
    model.train()
    for epoch in range(4):
        for input_ids, attention_mask, labels in batches:
            outputs = model(input_ids, attention_mask=attention_mask, labels=labels)
            loss = outputs["loss"]
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            losses.append(loss.item())
    model.eval()
    # generation runs the module itself (its shapes change every token), unwrapped as
    # accelerate's ``unwrap_model`` does
    compiled_model = model
    model = getattr(model, "_orig_mod", model)
    gen = generate(model, batches[0][0][:2, :4], max_new_tokens=4)
    losses += gen.flatten().tolist()
    with torch.no_grad():
        full = model(gen)["logits"][:, -1]
    losses += full.flatten().tolist()
    return {"losses": losses, "weights": w, "fn": compiled_model if compiled else None}
