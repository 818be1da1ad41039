"""The input embeddings: one row of numbers per token."""

import torch

# --- settings (the page fills in its current values) ---
tokens = "Your | journey | starts | with | one | step"  # the page writes its tokens here
inputs = torch.rand(6, 3)  # a stand-in: the page writes its input embeddings here
# --- end of settings ---

print(tokens)
print(inputs.shape)  # (number of tokens, d_in)
print(inputs)
