# In the manner of Hugging Face's modeling_t5.py (Apache licence) and the T5 fine-tuning
# scripts built on it: ``T5LayerNorm`` (RMS by ``hidden_states.to(torch.float32).pow(2).mean(
# -1, keepdim=True)`` and ``torch.rsqrt``), bias-free ``DenseReluDense``, relative position
# buckets (``_relative_position_bucket``: ``(relative_position > 0).to(torch.long)``,
# ``torch.abs``, ``torch.min(relative_position, torch.zeros_like(...))``, ``torch.log(
# relative_position.float() / max_exact) / math.log(max_distance / max_exact)``,
# ``torch.min(..., torch.full_like(..., num_buckets - 1))``, ``torch.where``), a
# ``relative_attention_bias`` embedding only in the first layer and the ``position_bias``
# handed on to later layers, attention without ``sqrt(d)`` scaling, an extended mask by
# ``(1.0 - mask[:, None, None, :].to(dtype)) * torch.finfo(dtype).min`` and a causal mask
# from ``torch.arange`` comparisons, ``_shift_right`` with ``new_zeros`` and
# ``masked_fill_(shifted_input_ids == -100, pad_token_id)``, a tied ``lm_head`` scaled by
# ``model_dim ** -0.5``, ``CrossEntropyLoss(ignore_index=-100)``, AdamW without decay on
# layer-norm weights, ``get_linear_schedule_with_warmup`` written as a LambdaLR, and greedy
# decoding under ``model.eval()``.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import copy
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn import CrossEntropyLoss
from torch.optim.lr_scheduler import LambdaLR


class T5Config:
    def __init__(self, vocab_size=13, d_model=16, d_kv=8, d_ff=24, num_layers=2, num_heads=2,
                 relative_attention_num_buckets=8, relative_attention_max_distance=16,
                 dropout_rate=0.0, layer_norm_epsilon=1e-6, pad_token_id=0, decoder_start_token_id=0,
                 is_decoder=False):
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.d_kv = d_kv
        self.d_ff = d_ff
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.relative_attention_num_buckets = relative_attention_num_buckets
        self.relative_attention_max_distance = relative_attention_max_distance
        self.dropout_rate = dropout_rate
        self.layer_norm_epsilon = layer_norm_epsilon
        self.pad_token_id = pad_token_id
        self.decoder_start_token_id = decoder_start_token_id
        self.is_decoder = is_decoder


class T5LayerNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        variance = hidden_states.to(torch.float32).pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        if self.weight.dtype in [torch.float16, torch.bfloat16]:
            hidden_states = hidden_states.to(self.weight.dtype)
        return self.weight * hidden_states


class T5DenseActDense(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.wi = nn.Linear(config.d_model, config.d_ff, bias=False)
        self.wo = nn.Linear(config.d_ff, config.d_model, bias=False)
        self.dropout = nn.Dropout(config.dropout_rate)
        self.act = nn.ReLU()

    def forward(self, hidden_states):
        hidden_states = self.wi(hidden_states)
        hidden_states = self.act(hidden_states)
        hidden_states = self.dropout(hidden_states)
        hidden_states = self.wo(hidden_states)
        return hidden_states


class T5LayerFF(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.DenseReluDense = T5DenseActDense(config)
        self.layer_norm = T5LayerNorm(config.d_model, eps=config.layer_norm_epsilon)
        self.dropout = nn.Dropout(config.dropout_rate)

    def forward(self, hidden_states):
        forwarded_states = self.layer_norm(hidden_states)
        forwarded_states = self.DenseReluDense(forwarded_states)
        hidden_states = hidden_states + self.dropout(forwarded_states)
        return hidden_states


class T5Attention(nn.Module):
    def __init__(self, config, has_relative_attention_bias=False):
        super().__init__()
        self.is_decoder = config.is_decoder
        self.has_relative_attention_bias = has_relative_attention_bias
        self.relative_attention_num_buckets = config.relative_attention_num_buckets
        self.relative_attention_max_distance = config.relative_attention_max_distance
        self.d_model = config.d_model
        self.key_value_proj_dim = config.d_kv
        self.n_heads = config.num_heads
        self.dropout = config.dropout_rate
        self.inner_dim = self.n_heads * self.key_value_proj_dim
        self.q = nn.Linear(self.d_model, self.inner_dim, bias=False)
        self.k = nn.Linear(self.d_model, self.inner_dim, bias=False)
        self.v = nn.Linear(self.d_model, self.inner_dim, bias=False)
        self.o = nn.Linear(self.inner_dim, self.d_model, bias=False)
        if self.has_relative_attention_bias:
            self.relative_attention_bias = nn.Embedding(self.relative_attention_num_buckets, self.n_heads)

    @staticmethod
    def _relative_position_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
        relative_buckets = 0
        if bidirectional:
            num_buckets //= 2
            relative_buckets += (relative_position > 0).to(torch.long) * num_buckets
            relative_position = torch.abs(relative_position)
        else:
            relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
        max_exact = num_buckets // 2
        is_small = relative_position < max_exact
        relative_position_if_large = max_exact + (
            torch.log(relative_position.float() / max_exact)
            / math.log(max_distance / max_exact)
            * (num_buckets - max_exact)
        ).to(torch.long)
        relative_position_if_large = torch.min(
            relative_position_if_large, torch.full_like(relative_position_if_large, num_buckets - 1)
        )
        relative_buckets += torch.where(is_small, relative_position, relative_position_if_large)
        return relative_buckets

    def compute_bias(self, query_length, key_length, device=None):
        if device is None:
            device = self.relative_attention_bias.weight.device
        context_position = torch.arange(query_length, dtype=torch.long, device=device)[:, None]
        memory_position = torch.arange(key_length, dtype=torch.long, device=device)[None, :]
        relative_position = memory_position - context_position
        relative_position_bucket = self._relative_position_bucket(
            relative_position,
            bidirectional=(not self.is_decoder),
            num_buckets=self.relative_attention_num_buckets,
            max_distance=self.relative_attention_max_distance,
        )
        values = self.relative_attention_bias(relative_position_bucket)
        values = values.permute([2, 0, 1]).unsqueeze(0)
        return values

    def forward(self, hidden_states, mask=None, key_value_states=None, position_bias=None):
        batch_size, seq_length = hidden_states.shape[:2]
        is_cross_attention = key_value_states is not None
        query_states = self.q(hidden_states).view(batch_size, -1, self.n_heads, self.key_value_proj_dim).transpose(1, 2)
        current_states = key_value_states if is_cross_attention else hidden_states
        key_states = self.k(current_states).view(batch_size, -1, self.n_heads, self.key_value_proj_dim).transpose(1, 2)
        value_states = self.v(current_states).view(batch_size, -1, self.n_heads, self.key_value_proj_dim).transpose(1, 2)
        scores = torch.matmul(query_states, key_states.transpose(3, 2))
        if position_bias is None:
            key_length = key_states.shape[-2]
            if not self.has_relative_attention_bias:
                position_bias = torch.zeros(
                    (1, self.n_heads, seq_length, key_length), device=scores.device, dtype=scores.dtype)
            else:
                position_bias = self.compute_bias(seq_length, key_length, device=scores.device)
            if mask is not None:
                causal_mask = mask[:, :, :, : key_states.shape[-2]]
                position_bias = position_bias + causal_mask
        position_bias_masked = position_bias
        scores += position_bias_masked
        attn_weights = nn.functional.softmax(scores.float(), dim=-1).type_as(scores)
        attn_weights = nn.functional.dropout(attn_weights, p=self.dropout, training=self.training)
        attn_output = torch.matmul(attn_weights, value_states)
        attn_output = attn_output.transpose(1, 2).contiguous()
        attn_output = attn_output.view(batch_size, -1, self.inner_dim)
        attn_output = self.o(attn_output)
        return attn_output, position_bias


class T5LayerSelfAttention(nn.Module):
    def __init__(self, config, has_relative_attention_bias=False):
        super().__init__()
        self.SelfAttention = T5Attention(config, has_relative_attention_bias=has_relative_attention_bias)
        self.layer_norm = T5LayerNorm(config.d_model, eps=config.layer_norm_epsilon)
        self.dropout = nn.Dropout(config.dropout_rate)

    def forward(self, hidden_states, attention_mask=None, position_bias=None):
        normed_hidden_states = self.layer_norm(hidden_states)
        attention_output = self.SelfAttention(normed_hidden_states, mask=attention_mask, position_bias=position_bias)
        hidden_states = hidden_states + self.dropout(attention_output[0])
        return (hidden_states,) + attention_output[1:]


class T5LayerCrossAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.EncDecAttention = T5Attention(config, has_relative_attention_bias=False)
        self.layer_norm = T5LayerNorm(config.d_model, eps=config.layer_norm_epsilon)
        self.dropout = nn.Dropout(config.dropout_rate)

    def forward(self, hidden_states, key_value_states, attention_mask=None, position_bias=None):
        normed_hidden_states = self.layer_norm(hidden_states)
        attention_output = self.EncDecAttention(normed_hidden_states, mask=attention_mask,
                                                key_value_states=key_value_states, position_bias=position_bias)
        layer_output = hidden_states + self.dropout(attention_output[0])
        return (layer_output,) + attention_output[1:]


class T5Block(nn.Module):
    def __init__(self, config, has_relative_attention_bias=False):
        super().__init__()
        self.is_decoder = config.is_decoder
        self.layer = nn.ModuleList()
        self.layer.append(T5LayerSelfAttention(config, has_relative_attention_bias=has_relative_attention_bias))
        if self.is_decoder:
            self.layer.append(T5LayerCrossAttention(config))
        self.layer.append(T5LayerFF(config))

    def forward(self, hidden_states, attention_mask=None, position_bias=None, encoder_hidden_states=None,
                encoder_attention_mask=None, encoder_decoder_position_bias=None):
        self_attention_outputs = self.layer[0](hidden_states, attention_mask=attention_mask, position_bias=position_bias)
        hidden_states = self_attention_outputs[0]
        attention_outputs = self_attention_outputs[1:]
        do_cross_attention = self.is_decoder and encoder_hidden_states is not None
        if do_cross_attention:
            cross_attention_outputs = self.layer[1](hidden_states, key_value_states=encoder_hidden_states,
                                                    attention_mask=encoder_attention_mask,
                                                    position_bias=encoder_decoder_position_bias)
            hidden_states = cross_attention_outputs[0]
            attention_outputs = attention_outputs + cross_attention_outputs[1:]
        hidden_states = self.layer[-1](hidden_states)
        return (hidden_states,) + attention_outputs


class T5Stack(nn.Module):
    def __init__(self, config, embed_tokens=None):
        super().__init__()
        self.embed_tokens = embed_tokens
        self.is_decoder = config.is_decoder
        self.block = nn.ModuleList(
            [T5Block(config, has_relative_attention_bias=bool(i == 0)) for i in range(config.num_layers)])
        self.final_layer_norm = T5LayerNorm(config.d_model, eps=config.layer_norm_epsilon)
        self.dropout = nn.Dropout(config.dropout_rate)

    def forward(self, input_ids, attention_mask=None, encoder_hidden_states=None, encoder_attention_mask=None):
        input_shape = input_ids.size()
        input_ids = input_ids.view(-1, input_shape[-1])
        inputs_embeds = self.embed_tokens(input_ids)
        batch_size, seq_length = input_shape
        dtype = inputs_embeds.dtype
        if attention_mask is None:
            attention_mask = torch.ones(batch_size, seq_length, device=inputs_embeds.device)
        extended_attention_mask = attention_mask[:, None, None, :].to(dtype=dtype)
        if self.is_decoder:
            seq_ids = torch.arange(seq_length, device=inputs_embeds.device)
            causal_mask = seq_ids[None, None, :].repeat(batch_size, seq_length, 1) <= seq_ids[None, :, None]
            causal_mask = causal_mask.to(attention_mask.dtype)
            extended_attention_mask = causal_mask[:, None, :, :] * attention_mask[:, None, None, :]
            extended_attention_mask = extended_attention_mask.to(dtype=dtype)
        extended_attention_mask = (1.0 - extended_attention_mask) * torch.finfo(dtype).min
        if self.is_decoder and encoder_hidden_states is not None:
            if encoder_attention_mask is None:
                encoder_attention_mask = torch.ones(encoder_hidden_states.size()[:2], device=inputs_embeds.device)
            encoder_extended_attention_mask = (1.0 - encoder_attention_mask[:, None, None, :].to(dtype)) * torch.finfo(dtype).min
        else:
            encoder_extended_attention_mask = None
        position_bias = None
        encoder_decoder_position_bias = None
        hidden_states = self.dropout(inputs_embeds)
        for i, layer_module in enumerate(self.block):
            layer_outputs = layer_module(hidden_states, attention_mask=extended_attention_mask,
                                         position_bias=position_bias, encoder_hidden_states=encoder_hidden_states,
                                         encoder_attention_mask=encoder_extended_attention_mask,
                                         encoder_decoder_position_bias=encoder_decoder_position_bias)
            hidden_states = layer_outputs[0]
            position_bias = layer_outputs[1]
            if self.is_decoder and encoder_hidden_states is not None:
                encoder_decoder_position_bias = layer_outputs[2]
        hidden_states = self.final_layer_norm(hidden_states)
        hidden_states = self.dropout(hidden_states)
        return hidden_states


class T5ForConditionalGeneration(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.model_dim = config.d_model
        self.shared = nn.Embedding(config.vocab_size, config.d_model)
        encoder_config = copy.deepcopy(config)
        encoder_config.is_decoder = False
        self.encoder = T5Stack(encoder_config, self.shared)
        decoder_config = copy.deepcopy(config)
        decoder_config.is_decoder = True
        decoder_config.num_layers = 1
        self.decoder = T5Stack(decoder_config, self.shared)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.lm_head.weight = self.shared.weight

    def _shift_right(self, input_ids):
        decoder_start_token_id = self.config.decoder_start_token_id
        pad_token_id = self.config.pad_token_id
        shifted_input_ids = input_ids.new_zeros(input_ids.shape)
        shifted_input_ids[..., 1:] = input_ids[..., :-1].clone()
        shifted_input_ids[..., 0] = decoder_start_token_id
        shifted_input_ids.masked_fill_(shifted_input_ids == -100, pad_token_id)
        return shifted_input_ids

    def forward(self, input_ids=None, attention_mask=None, decoder_input_ids=None, labels=None,
                encoder_outputs=None):
        if encoder_outputs is None:
            encoder_outputs = self.encoder(input_ids=input_ids, attention_mask=attention_mask)
        hidden_states = encoder_outputs
        if labels is not None and decoder_input_ids is None:
            decoder_input_ids = self._shift_right(labels)
        sequence_output = self.decoder(input_ids=decoder_input_ids, encoder_hidden_states=hidden_states,
                                       encoder_attention_mask=attention_mask)
        sequence_output = sequence_output * (self.model_dim ** -0.5)
        lm_logits = self.lm_head(sequence_output)
        loss = None
        if labels is not None:
            loss_fct = CrossEntropyLoss(ignore_index=-100)
            loss = loss_fct(lm_logits.view(-1, lm_logits.size(-1)), labels.view(-1))
        return loss, lm_logits


def get_linear_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps, last_epoch=-1):
    def lr_lambda(current_step: int):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        return max(0.0, float(num_training_steps - current_step) / float(max(1, num_training_steps - num_warmup_steps)))
    return LambdaLR(optimizer, lr_lambda, last_epoch)


@torch.no_grad()
def greedy_generate(model, input_ids, attention_mask, max_length=4):
    model.eval()
    encoder_outputs = model.encoder(input_ids=input_ids, attention_mask=attention_mask)
    decoder_input_ids = torch.full((input_ids.shape[0], 1), model.config.decoder_start_token_id, dtype=torch.long)
    for _ in range(max_length):
        _, logits = model(attention_mask=attention_mask, decoder_input_ids=decoder_input_ids,
                          encoder_outputs=encoder_outputs)
        next_tokens = logits[:, -1, :].argmax(-1)
        decoder_input_ids = torch.cat([decoder_input_ids, next_tokens[:, None]], dim=-1)
    model.train()
    return decoder_input_ids


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(907)
    config = T5Config()
    model = T5ForConditionalGeneration(config)
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    no_decay = ["bias", "layer_norm.weight"]
    optimizer_grouped_parameters = [
        {"params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)],
         "weight_decay": 0.01},
        {"params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)],
         "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(optimizer_grouped_parameters, lr=1e-2)
    lr_scheduler = get_linear_schedule_with_warmup(optimizer, num_warmup_steps=2, num_training_steps=10)
    batches = []
    for _ in range(3):
        input_ids = torch.from_numpy(rng.integers(1, 13, (3, 7)))
        attention_mask = torch.ones_like(input_ids)
        attention_mask[0, 5:] = 0
        input_ids[0, 5:] = config.pad_token_id
        labels = torch.from_numpy(rng.integers(1, 13, (3, 5)))
        labels[1, 3:] = -100
        batches.append({"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels})

    def train_step(batch):
        model.train()
        loss, _ = model(**batch)
        loss.backward()
        optimizer.step()
        lr_scheduler.step()
        optimizer.zero_grad()
        return loss

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    for epoch in range(3):
        for batch in batches:
            losses.append(step(batch).item())
    losses.append(lr_scheduler.get_last_lr()[0])
    buckets = T5Attention._relative_position_bucket(torch.arange(-20, 21), bidirectional=True, num_buckets=8,
                                                    max_distance=16)
    losses += buckets.tolist()
    losses += greedy_generate(model, batches[0]["input_ids"], batches[0]["attention_mask"]).flatten().tolist()
    return {"losses": losses, "weights": w, "fn": step}
