"""Cross-attention: queries from one sequence, keys and values from another."""

import torch

# --- settings (the page fills in its current values) ---
tokens = "Can | you | help | me | translate | this | sentence"  # the first sequence: it asks (queries)
second_tokens = "Kannst | du | mir | helfen | diesen | Satz | zu | übersetzen"  # the second: it answers
x_1 = torch.rand(7, 3)  # a stand-in: the page writes the first sequence's embeddings here
x_2 = None  # the second sequence's embeddings; None: torch.rand(8, d_in) drawn after the weights, as the article does
seed = 123
d_out = 2  # d_k, the width of queries and keys: the one width both sides must share
d_v = 6  # the width of values (and of the context vectors)
scale_scores = True
# --- end of settings ---

g = torch.Generator().manual_seed(seed)
d_in = x_1.shape[1]
d_in_kv = d_in if x_2 is None else x_2.shape[1]  # the second sequence may have its own embedding width
W_query = torch.rand(d_out, d_in, generator=g)  # (d_k, d_in): the self-attention article's layout
W_key = torch.rand(d_out, d_in_kv, generator=g)  # (d_k, d_in_kv)
W_value = torch.rand(d_v, d_in_kv, generator=g)  # (d_v, d_in_kv)
if x_2 is None:
    x_2 = torch.rand(8, d_in, generator=g)

queries = W_query.matmul(x_1.T).T  # (T1, d_k), from the first sequence
keys = W_key.matmul(x_2.T).T  # (T2, d_k), from the second
values = W_value.matmul(x_2.T).T  # (T2, d_v)
scores = queries @ keys.T  # (T1, T2): one row per query, one column per key
scale = 1 / d_out**0.5 if scale_scores else 1.0
weights = torch.softmax(scores * scale, dim=-1)  # each row sums to 1
context = weights @ values  # (T1, d_v): one context vector per token of the first sequence
print(weights)
print("context vectors:", context.shape)
print(context)
