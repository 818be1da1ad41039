"""Generate with the trained model above, one token at a time, with and without a KV cache.

The page puts this after the training lab's recipe (filled with the lab's default run), so `model`,
`heads`, `d_k`, `d_model` and `scale` are that recipe's: the model is the page's model, and the
tokens and the difference printed below are the page's.
"""

# ruff: noqa: F821 - model, heads, d_k, d_model and scale come from the training recipe above

import torch
import torch.nn.functional as F

# --- settings (the page fills in its current values) ---
prompt = [3, 1, 4, 1, 5]
new_tokens = 10
# --- end of settings ---

model.eval()  # the trained model of the recipe above
attention_scale = None if scale else 1.0  # None: 1/sqrt(d_k), as in the model


def split_heads(x: torch.Tensor) -> torch.Tensor:
    return x.view(1, x.shape[1], heads, d_k).transpose(1, 2)  # (1, T, d_model) -> (1, h, T, d_k)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    return x.transpose(1, 2).reshape(1, x.shape[2], d_model)  # (1, h, T, d_k) -> (1, T, d_model)


def logits_without_cache(tokens: list[int]) -> torch.Tensor:
    """The whole prefix again: every earlier token's keys and values are recomputed."""
    ids = torch.tensor([tokens])  # (1, T)
    x = model.token_embedding(ids) + model.position_embedding(torch.arange(len(tokens)))  # (1, T, D)
    for layer in model.layers:
        attention, normed = layer.attention, layer.norm(x)
        queries, keys = split_heads(attention.W_query(normed)), split_heads(attention.W_key(normed))
        values = split_heads(attention.W_value(normed))
        context = F.scaled_dot_product_attention(queries, keys, values, is_causal=True, scale=attention_scale)
        x = x + attention.out_proj(merge_heads(context))
    return model.unembedding(model.final_norm(x))[0, -1]  # the last token's logits


def logits_with_cache(token: int, cache: list[dict[str, torch.Tensor]]) -> torch.Tensor:
    """One new token: its key and value are appended to each layer's cache; its query reads all of it."""
    position = cache[0]["k"].shape[2]
    x = model.token_embedding(torch.tensor([[token]])) + model.position_embedding(torch.tensor([position]))
    for layer, stored in zip(model.layers, cache, strict=True):
        attention, normed = layer.attention, layer.norm(x)
        stored["k"] = torch.cat([stored["k"], split_heads(attention.W_key(normed))], dim=2)  # (1, h, T + 1, d_k)
        stored["v"] = torch.cat([stored["v"], split_heads(attention.W_value(normed))], dim=2)
        query = split_heads(attention.W_query(normed))  # (1, h, 1, d_k)
        context = F.scaled_dot_product_attention(query, stored["k"], stored["v"], scale=attention_scale)
        x = x + attention.out_proj(merge_heads(context))
    return model.unembedding(model.final_norm(x))[0, -1]


def generate(use_cache: bool) -> tuple[list[int], torch.Tensor]:
    """Greedy generation after the prompt: the tokens and the logits each new token was chosen from."""
    tokens, chosen = list(prompt), []
    empty = torch.zeros(1, heads, 0, d_k)
    cache = [{"k": empty, "v": empty} for _ in model.layers]
    with torch.no_grad():
        if use_cache:
            for token in prompt[:-1]:
                logits_with_cache(token, cache)  # read the prompt into the cache
        for _ in range(new_tokens):
            logits = logits_with_cache(tokens[-1], cache) if use_cache else logits_without_cache(tokens)
            tokens.append(int(logits.argmax()))
            chosen.append(logits)
    return tokens, torch.stack(chosen)


cached_tokens, cached_logits = generate(use_cache=True)
plain_tokens, plain_logits = generate(use_cache=False)
largest = float((cached_logits - plain_logits).abs().max())
print("tokens:", cached_tokens)
print("same tokens both ways:", cached_tokens == plain_tokens, f" largest |difference| of the logits: {largest:.1e}")
