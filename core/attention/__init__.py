"""The attention library students read: the maths of every lesson, model-free.

functional   scaled_dot_product_attention with PyTorch's signature, masks, dropout
simple       attention without trainable weights (lesson 1)
modules      the book's classes, SelfAttention_v1 ... MultiHeadAttention, and their converters
stats        why scale: variance of q·k, softmax peakiness, saturation
head_measures  what a head does: previous-token share, sink share, entropy
long_context online softmax, tiled (FlashAttention-style) attention, time and memory
"""
