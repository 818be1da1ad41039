"""Attention without trainable weights: every token is its own query, key and value."""

import torch

# --- settings (the page fills in its current values) ---
tokens = "Your | journey | starts | with | one | step"  # the page writes its tokens here
inputs = torch.rand(6, 3)  # a stand-in: the page writes its input embeddings here
query = 1  # the chosen query token, counted from 0
multiplier = 1.0  # the page's "multiply the scores by" slider
# --- end of settings ---

# Scores: one dot product for every pair of tokens.
scores = inputs @ inputs.T  # (T, d_in) @ (d_in, T) -> (T, T)
unit = inputs / inputs.norm(dim=-1, keepdim=True)  # each row scaled to length 1, (T, d_in)
cosine = unit @ unit.T  # only the direction counts, (T, T)
print("dot products:", scores[query])
print("cosine similarities:", cosine[query])

# Three ways to turn the chosen query's scores into weights that sum to 1.
row = scores[query] * multiplier  # (T,)
by_sum = row / row.sum()
naive = torch.exp(row) / torch.exp(row).sum()  # overflows float32 once a score passes ~88.7
stable = torch.exp(row - row.max()) / torch.exp(row - row.max()).sum()
print("divide by sum:", by_sum)
print("naive softmax:", naive)
print("stable softmax:", stable)

# The float32 sums of those weights, with the scores one torch.dot at a time as the attention
# notebook's loop computes them: the last bits show rounding (and depend on how the scores were made).
loop_row = torch.empty(inputs.shape[0])
for j, x_j in enumerate(inputs):
    loop_row[j] = torch.dot(inputs[query], x_j)
sum_by_sum = (loop_row / loop_row.sum()).sum().item()
sum_naive = (torch.exp(loop_row) / torch.exp(loop_row).sum()).sum().item()
sum_softmax = torch.softmax(loop_row, dim=0).sum().item()
print("float32 sums:", sum_by_sum, sum_naive, sum_softmax)

# All queries at once: weights, then context vectors.
weights = torch.softmax(scores, dim=-1)  # each row sums to 1, (T, T)
context = weights @ inputs  # (T, T) @ (T, d_in) -> (T, d_in)
print(weights)
print("z for the query:", context[query])
