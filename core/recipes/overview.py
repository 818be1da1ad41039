"""The input embeddings: one row of numbers per token."""

import torch

# --- settings (the page fills in its current values) ---
tokens = "Your | journey | starts | with | one | step"
inputs = torch.tensor([
    [0.43, 0.15, 0.89],
    [0.55, 0.87, 0.66],
    [0.57, 0.85, 0.64],
    [0.22, 0.58, 0.33],
    [0.77, 0.25, 0.1],
    [0.05, 0.8, 0.55],
])
# --- end of settings ---

print(tokens)
print(inputs.shape)  # (number of tokens, d_in)
print(inputs)
