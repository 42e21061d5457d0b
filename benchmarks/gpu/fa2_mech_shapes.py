"""The rows of ``fa2_mech.py`` (no torch here: ``fa2_mech_predicted.py`` reads them too)."""

#: (batch, q heads, KV heads, keys, head_dim): one KV split (batch x KV heads >= 0.8 x 264)
DECODE_SHAPES = [(32, 32, 8, 4096, 128), (48, 32, 8, 4096, 128), (64, 32, 8, 4096, 128), (96, 32, 8, 4096, 128),
                 (128, 32, 8, 4096, 128), (192, 32, 8, 4096, 128),
                 (64, 32, 8, 512, 128), (64, 32, 8, 2048, 128), (64, 32, 8, 16384, 128),
                 (264, 8, 1, 4096, 128), (32, 8, 8, 4096, 128),
                 (64, 32, 8, 4096, 64), (64, 32, 8, 8192, 64), (64, 32, 8, 2048, 256), (64, 32, 8, 4096, 256)]
#: (batch, q heads, KV heads, keys, head_dim) small enough to stay in L2 (43 MB at 8 x 1 x 128 x 384)
L2_SHAPES = [(220, 8, 1, 384, 128), (220, 32, 8, 48, 128)]
#: decode grids again with 128 query rows a (sequence, KV head): (batch, KV heads, keys, head_dim)
FULLQ_SHAPES = [(64, 8, 4096, 128), (32, 8, 4096, 128), (64, 8, 4096, 64), (64, 8, 2048, 256)]
#: (batch, q heads, KV heads, head_dim, tokens, causal)
PREFILL_CASES = [(1, 8, 1, hd, L, True) for hd in (64, 128, 256) for L in (8192, 16384, 32768)] + \
    [(1, 32, 8, hd, 16384, True) for hd in (64, 256)] + [(1, 8, 1, hd, 16384, False) for hd in (64, 128, 256)]
#: held out (run r): other head counts, groups, head_dims (96 included), batches, lengths; predicted
#: by the model with both runs p/q changes and frozen before they ran
HOLDOUT_DECODE = [(48, 40, 8, 3072, 128), (128, 16, 2, 6144, 128), (300, 8, 1, 2048, 128), (64, 28, 4, 8192, 128),
                  (64, 32, 8, 4096, 96), (80, 16, 8, 3072, 256), (96, 32, 8, 1536, 64), (40, 32, 8, 12288, 128)]
HOLDOUT_PREFILL = [(1, 16, 2, 256, 24576, True), (2, 8, 8, 256, 8192, True), (1, 16, 4, 64, 49152, True),
                   (1, 32, 8, 96, 16384, True), (1, 32, 8, 128, 8192, False), (1, 8, 1, 256, 32768, False),
                   (1, 24, 8, 256, 12288, True), (4, 8, 2, 128, 6144, True)]
