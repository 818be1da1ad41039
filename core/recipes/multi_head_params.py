"""Count the parameters of the book's MultiHeadAttention: three projections and out_proj."""

from torch import nn

# --- settings (the page fills in its current values) ---
d_in = 3
d_out = 2
num_heads = 2  # does not change the count: it only cuts d_out into heads
# --- end of settings ---


def layer_parameters(d_in, d_out, qkv_bias):
    layers = [nn.Linear(d_in, d_out, bias=qkv_bias) for _ in range(3)]  # W_query, W_key, W_value
    layers.append(nn.Linear(d_out, d_out))  # out_proj, with a bias
    return sum(p.numel() for layer in layers for p in layer.parameters())


this_layer = layer_parameters(d_in, d_out, qkv_bias=False)
gpt2_without_bias = layer_parameters(768, 768, qkv_bias=False)  # the book's default
gpt2_with_bias = layer_parameters(768, 768, qkv_bias=True)  # GPT-2 itself
print(f"this layer: {this_layer:,}")
print(f"GPT-2-sized, no q/k/v bias: {gpt2_without_bias:,}; with them: {gpt2_with_bias:,}")
