"""Self-attention with trainable weights: W_query, W_key and W_value, drawn at random."""

import torch

# --- settings (the page fills in its current values) ---
tokens = "Your | journey | starts | with | one | step"  # the page writes its tokens here
inputs = torch.rand(6, 3)  # a stand-in: the page writes its input embeddings here
seed = 123
d_out = 2  # the width of queries, keys and values
draw = torch.rand  # the book draws uniform [0, 1) weights; the attention notebook uses torch.randn
scale_scores = True  # divide the scores by sqrt(d_k) before the softmax
query = 1  # the chosen query token, counted from 0
# --- end of settings ---

g = torch.Generator().manual_seed(seed)
d_in = inputs.shape[1]
W_query = draw(d_in, d_out, generator=g)  # (d_in, d_out), drawn in this order
W_key = draw(d_in, d_out, generator=g)
W_value = draw(d_in, d_out, generator=g)

queries = inputs @ W_query  # (T, d_in) @ (d_in, d_out) -> (T, d_out)
keys = inputs @ W_key
values = inputs @ W_value

scores = queries @ keys.T  # omega, (T, T)
d_k = keys.shape[-1]
scale = 1 / d_k**0.5 if scale_scores else 1.0
weights = torch.softmax(scores * scale, dim=-1)  # each row sums to 1
context = weights @ values  # (T, d_out)
print("q for the query:", queries[query])
print("its weights:", weights[query])
print("its context vector z:", context[query])
