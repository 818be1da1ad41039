"""The "Code" expander of each lesson: plain PyTorch that reproduces the page's numbers.

The snippets import only torch and math, draw from explicit generators in the same
order as `core`, and inline the current inputs. tests/test_snippets.py runs each one
and compares its variables with the lesson's `checks`.
"""

from __future__ import annotations

import textwrap

import torch

from core.settings import Settings, load_example


def _literal(t: torch.Tensor) -> str:
    rows = ",\n".join("    [" + ", ".join(repr(v) for v in row) + "]" for row in t.tolist())
    return "torch.tensor([\n" + rows + ",\n])"


def inputs_code(settings: Settings) -> str:
    """Code that builds `inputs` (T, d_in) exactly as the page does."""
    if settings.preset == "article":
        return textwrap.dedent(
            """\
            # Seed 003: nn.Embedding(6, 16) seeded 123 draws a 6x16 standard-normal table.
            g_embed = torch.Generator().manual_seed(123)
            table = torch.randn(6, 16, generator=g_embed)
            inputs = table[torch.tensor([0, 4, 5, 2, 1, 3])]  # Life is short eat dessert first
            """
        )
    example = load_example(settings)
    return f"# tokens: {' | '.join(example.tokens)}\ninputs = {_literal(example.embeddings)}\n"


def _scale_line(settings: Settings, d_k_expr: str = "keys.shape[-1]") -> str:
    if settings.scale:
        return f"scale = 1 / {d_k_expr} ** 0.5  # scale by 1/sqrt(d_k)"
    return "scale = 1.0  # scaling switched off in the sidebar"


_LINEAR_HELPER = textwrap.dedent(
    """\
    def linear(d_in, d_out, bias, g):
        # nn.Linear's default initialisation, drawn from generator g (weight, then bias)
        layer = torch.nn.Linear(d_in, d_out, bias=bias)
        with torch.no_grad():
            torch.nn.init.kaiming_uniform_(layer.weight, a=math.sqrt(5), generator=g)
            if bias:
                bound = 1 / math.sqrt(d_in)
                torch.nn.init.uniform_(layer.bias, -bound, bound, generator=g)
        return layer
    """
)


def _preamble_with_linear(settings: Settings) -> str:
    """Imports, the inputs, and the nn.Linear-with-generator helper the module snippets use."""
    return "import math\nimport torch\n\n" + inputs_code(settings) + "\n" + _LINEAR_HELPER


def simple_code(settings: Settings) -> str:
    return (
        "import torch\n\n"
        + inputs_code(settings)
        + textwrap.dedent(
            """
            scores = inputs @ inputs.T                 # (T, d) @ (d, T) -> (T, T)
            weights = torch.softmax(scores, dim=-1)    # each row sums to 1
            context = weights @ inputs                 # (T, T) @ (T, d) -> (T, d)
            print(weights)
            print(context)
            """
        )
    )


def trainable_code(settings: Settings) -> str:
    scheme = settings.preset_info.weights
    d_out = settings.d_out
    head = "import torch\n\n" + inputs_code(settings) + f"\ng = torch.Generator().manual_seed({settings.seed})\n"
    if scheme == "rand_w_at_x":
        body = textwrap.dedent(
            f"""\
            d_in, d_k, d_v = inputs.shape[1], {d_out}, {d_out + 4}
            W_query = torch.rand(d_k, d_in, generator=g)   # seed 003's layout: (d_out, d_in)
            W_key = torch.rand(d_k, d_in, generator=g)
            W_value = torch.rand(d_v, d_in, generator=g)
            queries = W_query.matmul(inputs.T).T           # (T, d_k)
            keys = W_key.matmul(inputs.T).T
            values = W_value.matmul(inputs.T).T            # (T, d_v)
            """
        )
    else:
        draw = "randn" if scheme == "randn" else "rand"
        body = textwrap.dedent(
            f"""\
            d_in, d_out = inputs.shape[1], {d_out}
            W_query = torch.{draw}(d_in, d_out, generator=g)
            W_key = torch.{draw}(d_in, d_out, generator=g)
            W_value = torch.{draw}(d_in, d_out, generator=g)
            queries = inputs @ W_query                     # (T, d_in) @ (d_in, d_out)
            keys = inputs @ W_key
            values = inputs @ W_value
            """
        )
    tail = textwrap.dedent(
        f"""\
        scores = queries @ keys.T                          # omega, (T, T)
        {_scale_line(settings)}
        weights = torch.softmax(scores * scale, dim=-1)
        context = weights @ values
        print(weights)
        print(context)
        """
    )
    return head + body + tail


def scaling_code(seed: int, trials: int) -> str:
    return textwrap.dedent(
        f"""\
        import torch

        g = torch.Generator().manual_seed({int(seed)})
        dims = torch.tensor([1, 2, 4, 8, 16, 32, 64, 128, 256, 512], dtype=torch.float64)
        trials = {int(trials)}
        # q.k for unit-normal q, k in R^d has the same distribution as |q| * z with
        # z ~ N(0, 1) and |q|^2 ~ chi-squared(d) = 2 * Gamma(d / 2): two numbers per trial.
        alpha = (dims / 2).expand(trials, len(dims)).contiguous()
        squared_length = 2 * torch._standard_gamma(alpha, generator=g)
        projection = torch.randn(trials, len(dims), generator=g, dtype=torch.float64)
        dots = squared_length.sqrt() * projection              # (trials, 10) samples of q.k
        unscaled_var = dots.var(dim=0, unbiased=False)          # ~ d_k
        scaled_var = (dots / dims.sqrt()).var(dim=0, unbiased=False)  # ~ 1
        print(unscaled_var)
        print(scaled_var)
        """
    )


def causal_code(settings: Settings, training: bool) -> str:
    dropout = settings.dropout if training else 0.0
    return _preamble_with_linear(settings) + textwrap.dedent(
        f"""
            g = torch.Generator().manual_seed({settings.seed})
            d_in, d_out = inputs.shape[1], {settings.d_out}
            W_query = linear(d_in, d_out, False, g)   # CausalAttention's draw order
            W_key = linear(d_in, d_out, False, g)
            W_value = linear(d_in, d_out, False, g)

            batch = inputs.unsqueeze(0)                   # (1, T, d_in)
            with torch.no_grad():
                queries, keys, values = W_query(batch), W_key(batch), W_value(batch)
            num_tokens = batch.shape[1]
            future = torch.triu(torch.ones(num_tokens, num_tokens), diagonal=1).bool()
            scores = queries @ keys.transpose(1, 2)       # (1, T, T)
            {_scale_line(settings)}
            scores = (scores * scale).masked_fill(future, -torch.inf)  # not masked_fill without '='!
            attn = torch.softmax(scores, dim=-1)
            weights = attn[0]

            p = {dropout}  # dropout rate ({"training" if training else "evaluation: no dropout"})
            if p > 0:
                g_drop = torch.Generator().manual_seed({settings.seed + 1})
                keep = torch.empty_like(attn).bernoulli_(1 - p, generator=g_drop).bool()
                attn = attn * keep / (1 - p)
            dropped = attn[0]
            print(weights)
            print(dropped)
            """
    )


def multihead_code(settings: Settings) -> str:
    return _preamble_with_linear(settings) + textwrap.dedent(
        f"""
            g = torch.Generator().manual_seed({settings.seed})
            d_in, d_out, num_heads = inputs.shape[1], {settings.d_out}, {settings.num_heads}
            head_dim = d_out // num_heads
            W_query = linear(d_in, d_out, False, g)
            W_key = linear(d_in, d_out, False, g)
            W_value = linear(d_in, d_out, False, g)
            out_proj = linear(d_out, d_out, True, g)

            x = inputs.unsqueeze(0)                                 # (b, T, d_in)
            b, T, _ = x.shape
            with torch.no_grad():
                queries = W_query(x).view(b, T, num_heads, head_dim).transpose(1, 2)  # (b, h, T, hd)
                keys = W_key(x).view(b, T, num_heads, head_dim).transpose(1, 2)
                values = W_value(x).view(b, T, num_heads, head_dim).transpose(1, 2)
                scores = queries @ keys.transpose(2, 3)             # (b, h, T, T)
                {_scale_line(settings, "head_dim")}
                future = torch.triu(torch.ones(T, T), diagonal=1).bool()
                attn = torch.softmax((scores * scale).masked_fill(future, -torch.inf), dim=-1)
                context = (attn @ values).transpose(1, 2).contiguous().view(b, T, d_out)
                output = out_proj(context)[0]                       # (T, d_out)
            weights = attn[0]                                       # (h, T, T)
            print(weights)
            print(output)
            """
    )


def cross_code(settings: Settings, second: torch.Tensor | None, d_v: int) -> str:
    second_line = (
        "x_2 = torch.rand(8, 16, generator=g)      # seed 003's second sequence\n"
        if second is None
        else f"x_2 = {_literal(second)}\n"
    )
    return (
        "import torch\n\n"
        + inputs_code(settings).replace("inputs", "x_1")
        + textwrap.dedent(
            f"""
            g = torch.Generator().manual_seed({settings.seed})
            d_in, d_k, d_v = x_1.shape[1], {settings.d_out}, {int(d_v)}
            W_query = torch.rand(d_k, d_in, generator=g)
            W_key = torch.rand(d_k, d_in, generator=g)
            W_value = torch.rand(d_v, d_in, generator=g)
            """
        )
        + second_line
        + textwrap.dedent(
            f"""\
            queries = W_query.matmul(x_1.T).T     # (T1, d_k)  from the first sequence
            keys = W_key.matmul(x_2.T).T          # (T2, d_k)  from the second
            values = W_value.matmul(x_2.T).T      # (T2, d_v)
            scores = queries @ keys.T             # (T1, T2): rectangular
            {_scale_line(settings)}
            weights = torch.softmax(scores * scale, dim=-1)
            context = weights @ values            # (T1, d_v)
            print(weights)
            print(context)
            """
        )
    )
