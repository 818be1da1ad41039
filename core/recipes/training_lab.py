"""Train a tiny causal transformer on a copying task, exactly as the "Train it yourself" page does.

Plain PyTorch, runnable on its own. Every random draw comes from one generator, in the page's
order (the weights, the held-out set, then one batch per step), so the printed curve is the
page's curve for the same settings.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

# --- settings (the page fills in its current values) ---
task = "previous_token"
layers = 1
heads = 2
d_k = 16
scale = True
init = "linear"
learning_rate = 0.003
steps = 300
seed = 123
batch_size = 32
# --- end of settings ---

NUM_SYMBOLS = 16  # previous token: tokens 0..15
# induction: every token random from 64 symbols; a stretch of 8 (which may repeat tokens) appears
# twice: first after 0..16 random tokens, again after a gap of 1..16 random tokens
INDUCTION_SYMBOLS, PART, MAX_PREFIX, MAX_GAP = 64, 8, 16, 16
LENGTH = 16 if task == "previous_token" else MAX_PREFIX + 2 * PART + MAX_GAP
VOCAB = NUM_SYMBOLS if task == "previous_token" else INDUCTION_SYMBOLS
IGNORE = -100  # cross_entropy's ignore_index: positions with nothing to predict
HELD_OUT, LOG_POINTS = 128, 25
d_model = heads * d_k

torch.set_num_threads(1)  # as the page runs: sums over several threads round differently in the last digits
generator = torch.Generator().manual_seed(seed)


def draw_batch(size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """tokens (B, T) and targets (B, T), IGNORE where a position is not scored."""
    if task == "previous_token":
        tokens = torch.randint(0, NUM_SYMBOLS, (size, LENGTH), generator=generator)
        targets = torch.full_like(tokens, IGNORE)
        targets[:, 1:] = tokens[:, :-1]  # answer: the token one step back
        return tokens, targets
    tokens = torch.randint(0, INDUCTION_SYMBOLS, (size, LENGTH), generator=generator)  # random everywhere
    part = torch.randint(0, INDUCTION_SYMBOLS, (size, PART), generator=generator)  # the stretch that repeats
    first = torch.randint(0, MAX_PREFIX + 1, (size, 1), generator=generator)  # where the first copy starts
    second = first + PART + torch.randint(1, MAX_GAP + 1, (size, 1), generator=generator)  # and the repeat
    positions = torch.arange(LENGTH)[None, :]
    for start in (first, second):
        offset = positions - start  # (B, T): place inside this copy
        inside = (offset >= 0) & (offset < PART)
        tokens[inside] = part.gather(1, offset.clamp(0, PART - 1))[inside]
    next_offset = positions + 1 - second  # position t predicts t + 1: scored inside the repeat, after its first token
    scored = (next_offset >= 1) & (next_offset < PART)
    targets = torch.full_like(tokens, IGNORE)
    targets[scored] = part.gather(1, next_offset.clamp(0, PART - 1))[scored]
    return tokens, targets


def linear(d_in: int, d_out: int, bias: bool) -> nn.Linear:
    """nn.Linear with PyTorch's default initialisation, drawn from our generator."""
    layer = nn.Linear(d_in, d_out, bias=bias, device="meta").to_empty(device="cpu")
    nn.init.kaiming_uniform_(layer.weight, a=math.sqrt(5), generator=generator)
    if bias:
        nn.init.uniform_(layer.bias, -1 / math.sqrt(d_in), 1 / math.sqrt(d_in), generator=generator)
    return layer


def embedding(num: int, width: int) -> nn.Embedding:
    layer = nn.Embedding(num, width, device="meta").to_empty(device="cpu")
    nn.init.normal_(layer.weight, generator=generator)
    return layer


class MultiHeadAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.W_query = linear(d_model, d_model, False)
        self.W_key = linear(d_model, d_model, False)
        self.W_value = linear(d_model, d_model, False)
        self.out_proj = linear(d_model, d_model, True)
        if init == "book":  # SelfAttention_v1's torch.rand: every weight in [0, 1)
            with torch.no_grad():
                for projection in (self.W_query, self.W_key, self.W_value):
                    projection.weight.copy_(torch.rand(projection.weight.shape, generator=generator))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, num_tokens, _ = x.shape
        queries = self.W_query(x).view(b, num_tokens, heads, d_k).transpose(1, 2)  # (b, h, T, d_k)
        keys = self.W_key(x).view(b, num_tokens, heads, d_k).transpose(1, 2)
        values = self.W_value(x).view(b, num_tokens, heads, d_k).transpose(1, 2)
        context = F.scaled_dot_product_attention(
            queries, keys, values, is_causal=True, scale=None if scale else 1.0
        )  # (b, h, T, d_k); scale=None means 1/sqrt(d_k)
        context = context.transpose(1, 2).contiguous().view(b, num_tokens, d_model)  # (b, T, d_model)
        return self.out_proj(context)


class AttentionLayer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.attention = MultiHeadAttention()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.attention(self.norm(x))  # a residual around pre-normed attention


class TinyTransformer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.token_embedding = embedding(VOCAB, d_model)
        self.position_embedding = embedding(LENGTH, d_model)
        self.layers = nn.ModuleList([AttentionLayer() for _ in range(layers)])
        self.final_norm = nn.LayerNorm(d_model)
        self.unembedding = linear(d_model, VOCAB, False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.token_embedding(tokens) + self.position_embedding(torch.arange(tokens.shape[1]))  # (B, T, d_model)
        for layer in self.layers:
            x = layer(x)
        return self.unembedding(self.final_norm(x))  # (B, T, VOCAB)


def loss_of(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE)


def accuracy_of(logits: torch.Tensor, targets: torch.Tensor) -> float:
    scored = targets != IGNORE
    return float((logits.argmax(dim=-1)[scored] == targets[scored]).float().mean())


model = TinyTransformer()
held_out_tokens, held_out_targets = draw_batch(HELD_OUT)
optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate, fused=True)  # one kernel for all weights
every = max(1, steps // LOG_POINTS)
log_at = {0, *range(every, steps + 1, every), steps}

with torch.no_grad():
    start_logits = model(held_out_tokens)
logged_steps = [0]
losses = [float(loss_of(start_logits, held_out_targets))]  # step 0: the held-out loss before training
accuracies = [accuracy_of(start_logits, held_out_targets)]
since_log: list[float] = []
for step in range(1, steps + 1):
    tokens, targets = draw_batch(batch_size)
    loss = loss_of(model(tokens), targets)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    since_log.append(loss.item())
    if step in log_at:
        with torch.no_grad():
            accuracy = accuracy_of(model(held_out_tokens), held_out_targets)
        logged_steps.append(step)
        losses.append(sum(since_log) / len(since_log))  # mean training loss since the last line
        accuracies.append(accuracy)
        since_log = []
        print(f"step {step:5d}  loss {losses[-1]:.4f}  held-out accuracy {accuracy:.1%}")
