# Example student submission for assignment 03, used by the README's quick start.
# It is correct except for one classic mistake: the attention scores are scaled by
# sqrt(d_model) instead of sqrt(d_k), the dimension of one head.
import math

import torch
from torch import nn


def split_heads(x, num_heads):
    B, T, D = x.shape
    if D % num_heads:
        raise ValueError(f"{D} features cannot be split into {num_heads} heads")
    return x.view(B, T, num_heads, D // num_heads).permute(0, 2, 1, 3)


def combine_heads(x):
    B, H, T, d_k = x.shape
    return x.permute(0, 2, 1, 3).reshape(B, T, H * d_k)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads:
            raise ValueError("d_model must be divisible by num_heads")
        self.d_model, self.num_heads = d_model, num_heads
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, d_model, bias=bias)
        self.W_v = nn.Linear(d_model, d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)
        self.drop = nn.Dropout(dropout)

    def forward(self, query, key, value, mask=None):
        q = split_heads(self.W_q(query), self.num_heads)
        k = split_heads(self.W_k(key), self.num_heads)
        v = split_heads(self.W_v(value), self.num_heads)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_model)  # the mistake
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        attn = self.drop(torch.softmax(scores, dim=-1))
        return self.W_o(combine_heads(attn @ v))
