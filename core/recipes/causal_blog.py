"""The decoder blog's two steps on "cats climb trees during": a fixed causal average, then one learned head."""

import torch
from torch import nn

# --- settings (the page fills in its current values) ---
inputs = torch.rand(4, 4)  # a stand-in: the page writes its embeddings of "cats climb trees during" here
seed = 123
head_size = 4  # the head's query/key/value width
scale_scores = True  # divide the scores by sqrt(head_size) before the softmax
# --- end of settings ---

num_tokens = inputs.shape[0]
past = torch.tril(torch.ones(num_tokens, num_tokens))  # 1 where a token may look: itself and before

# Step 1, the simple average: every earlier token gets the same share, whatever it says.
average = past / past.sum(dim=-1, keepdim=True)  # rows of 1, 1/2, 1/3, 1/4
print(average)

# Step 2, SingleSelfAttentionHead: the blog creates key, query and value in that order.
torch.manual_seed(seed)
key = nn.Linear(inputs.shape[1], head_size, bias=False)
query = nn.Linear(inputs.shape[1], head_size, bias=False)
value = nn.Linear(inputs.shape[1], head_size, bias=False)
with torch.no_grad():
    scores = query(inputs) @ key(inputs).T  # (T, T)
    scale = head_size**-0.5 if scale_scores else 1.0
    scores = (scores * scale).masked_fill(past == 0, float("-inf"))  # the same causal mask
    head_weights = torch.softmax(scores, dim=-1)  # learned shares instead of equal ones
    output = head_weights @ value(inputs)  # (T, head_size)
print(head_weights)
