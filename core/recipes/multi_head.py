"""Multi-head attention the book's way: one projection, split into heads with view and transpose."""

import torch
from torch import nn

# --- settings (the page fills in its current values) ---
tokens = "Your | journey | starts | with | one | step"  # the page writes its tokens here
inputs = torch.rand(6, 3)  # a stand-in: the page writes its input embeddings here
seed = 123
d_out = 2  # all heads together
num_heads = 2
scale_scores = True  # divide the scores by sqrt(head_dim) before the softmax
# --- end of settings ---

torch.manual_seed(seed)
d_in = inputs.shape[1]
head_dim = d_out // num_heads
W_query = nn.Linear(d_in, d_out, bias=False)  # drawn in this order, as the book's MultiHeadAttention does
W_key = nn.Linear(d_in, d_out, bias=False)
W_value = nn.Linear(d_in, d_out, bias=False)
out_proj = nn.Linear(d_out, d_out)

x = inputs.unsqueeze(0)  # (b, T, d_in)
b, T, _ = x.shape
with torch.no_grad():
    queries = W_query(x).view(b, T, num_heads, head_dim).transpose(1, 2)  # (b, T, d_out) -> (b, h, T, hd)
    keys = W_key(x).view(b, T, num_heads, head_dim).transpose(1, 2)
    values = W_value(x).view(b, T, num_heads, head_dim).transpose(1, 2)
    scores = queries @ keys.transpose(2, 3)  # (b, h, T, T)
    scale = 1 / head_dim**0.5 if scale_scores else 1.0
    future = torch.triu(torch.ones(T, T), diagonal=1).bool()
    attn = torch.softmax((scores * scale).masked_fill(future, -torch.inf), dim=-1)  # (b, h, T, T)
    context = (attn @ values).transpose(1, 2).contiguous().view(b, T, d_out)  # (b, h, T, hd) -> (b, T, d_out)
    output = out_proj(context)[0]  # (T, d_out)
weights = attn[0]  # (h, T, T)
print(weights)
print(output)
