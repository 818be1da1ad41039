"""The models the lessons run: each module is a model and its data, never the lesson layer.

- minilm.py            all-MiniLM-L6-v2 loaded from its wheel and run by our own forward pass (lesson 6)
- tiny_transformer.py  a tiny causal transformer, its copying tasks and its training loop (lesson 8)
"""
