"""The book chapter's causal walk-through, replayed on the matrices it prints."""

import torch

# --- settings (the page fills in its current values) ---
printed_weights = torch.rand(6, 6)  # a stand-in: the page writes the chapter's printed weights here
printed_scores = torch.rand(6, 6)  # a stand-in: the chapter's printed scores (only on and below the diagonal)
# --- end of settings ---

num_tokens = printed_weights.shape[0]
# The long way: zero the future of the printed weights, then renormalise each row.
mask_simple = torch.tril(torch.ones(num_tokens, num_tokens))  # 1 on and below the diagonal
masked_simple = printed_weights * mask_simple  # rows no longer sum to 1
renormalised = masked_simple / masked_simple.sum(dim=-1, keepdim=True)
print(masked_simple)
print(renormalised)

# The short way: -inf above the diagonal of the scores, then softmax (the chapter divides by sqrt(d_k) = sqrt(2)).
future = torch.triu(torch.ones(num_tokens, num_tokens), diagonal=1).bool()
masked = printed_scores.masked_fill(future, -torch.inf)
minus_inf_weights = torch.softmax(masked / 2**0.5, dim=-1)
print(masked)
print(minus_inf_weights)
