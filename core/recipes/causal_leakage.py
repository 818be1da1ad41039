"""Does the future leak? Push one token and watch which outputs move; then the masked_fill bug."""

import torch
from torch import nn

# --- settings (the page fills in its current values) ---
tokens = "Your | journey | starts | with | one | step"  # the page writes its tokens here
inputs = torch.rand(6, 3)  # a stand-in: the page writes its input embeddings here
seed = 123
d_out = 2
perturbed = 3  # the token pushed, counted from 1 as x^(i)
scale_scores = True  # for the bug panel, as the sidebar's scale switch says
# --- end of settings ---

torch.manual_seed(seed)
d_in = inputs.shape[1]
W_query = nn.Linear(d_in, d_out, bias=False)  # drawn in this order, as the book's CausalAttention does
W_key = nn.Linear(d_in, d_out, bias=False)
W_value = nn.Linear(d_in, d_out, bias=False)
num_tokens = inputs.shape[0]
future = torch.triu(torch.ones(num_tokens, num_tokens), diagonal=1).bool()  # True above the diagonal


def causal_context(x, scale):
    scores = W_query(x) @ W_key(x).T * scale  # (T, T)
    scores = scores.masked_fill(future, -torch.inf)  # keep the result
    return torch.softmax(scores, dim=-1) @ W_value(x)  # (T, d_out)


with torch.no_grad():
    pushed = inputs.clone()
    noise = torch.randn(d_in, generator=torch.Generator().manual_seed(seed + 7))
    pushed[perturbed - 1] += 3.0 * noise
    change = (causal_context(pushed, d_out**-0.5) - causal_context(inputs, d_out**-0.5)).abs().amax(dim=-1)  # (T,)
    print("largest change of each output row:", change)  # zero for every row before the pushed token

    # The bug: masked_fill returns a new tensor; thrown away, it masks nothing.
    scale = d_out**-0.5 if scale_scores else 1.0
    scores = W_query(inputs) @ W_key(inputs).T * scale
    scores.masked_fill(future, -torch.inf)  # result discarded: no mask!
    buggy = torch.softmax(scores, dim=-1)  # every row attends to the future
    print(buggy)
    print("average weight on future tokens:", buggy.masked_fill(~future, 0).sum(dim=-1).mean().item())
