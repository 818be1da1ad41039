"""Cross-attention: queries from one sequence, keys and values from another."""

import torch

# --- settings (the page fills in its current values) ---
tokens = "Your | journey | starts | with | one | step"  # the page writes its tokens here
x_1 = torch.rand(6, 3)  # a stand-in: the page writes its input embeddings here
x_2 = None  # the second sequence; None: torch.rand(8, d_in) drawn after the weights, as the article does
seed = 123
d_out = 2  # d_k, the width of queries and keys
d_v = 6  # the width of values (and of the context vectors)
scale_scores = True
# --- end of settings ---

g = torch.Generator().manual_seed(seed)
d_in = x_1.shape[1]
W_query = torch.rand(d_out, d_in, generator=g)  # (d_k, d_in): the self-attention article's layout
W_key = torch.rand(d_out, d_in, generator=g)
W_value = torch.rand(d_v, d_in, generator=g)
if x_2 is None:
    x_2 = torch.rand(8, d_in, generator=g)

queries = W_query.matmul(x_1.T).T  # (T1, d_k), from the first sequence
keys = W_key.matmul(x_2.T).T  # (T2, d_k), from the second
values = W_value.matmul(x_2.T).T  # (T2, d_v)
scores = queries @ keys.T  # (T1, T2): one row per query, one column per key
scale = 1 / d_out**0.5 if scale_scores else 1.0
weights = torch.softmax(scores * scale, dim=-1)  # each row sums to 1
context = weights @ values  # (T1, d_v)
print(weights)
print(context)
