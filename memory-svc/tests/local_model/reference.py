"""Reference vectors of all-MiniLM-L6-v2 for tests/local_model.rs, computed independently of candle:
BERT's forward pass written out in numpy (float64) from the safetensors weights, then
sentence-transformers' mean pooling and normalisation.

    python -m venv venv && venv/bin/pip install numpy tokenizers safetensors
    venv/bin/python memory-svc/tests/local_model/reference.py MODEL_DIR > memory-svc/tests/local_model/reference.json

MODEL_DIR is the all-MiniLM-L6-v2 folder (.ci/run unpacks it; see ADK_TEST_EMBEDDING_MODEL).
"""

import hashlib
import json
import math
import sys
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer

SENTENCES = [
    "How does she take her morning drink?",
    "I take my coffee black",
    "The train to Berlin leaves at nine",
    "Lena's flight lands in Lisbon on Tuesday; she wants a window seat.",
    "",
]


def layer_norm(x, w, b, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


def gelu(x):
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def embed(weights, config, ids):
    t = lambda name: weights[name].astype(np.float64)
    linear = lambda x, name: x @ t(name + ".weight").T + t(name + ".bias")
    eps = config["layer_norm_eps"]
    n = len(ids)
    x = (
        t("embeddings.word_embeddings.weight")[ids]
        + t("embeddings.position_embeddings.weight")[:n]
        + t("embeddings.token_type_embeddings.weight")[[0] * n]
    )
    x = layer_norm(x, t("embeddings.LayerNorm.weight"), t("embeddings.LayerNorm.bias"), eps)
    heads = config["num_attention_heads"]
    size = config["hidden_size"] // heads
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        split = lambda y: y.reshape(n, heads, size).transpose(1, 0, 2)
        q = split(linear(x, p + "attention.self.query"))
        k = split(linear(x, p + "attention.self.key"))
        v = split(linear(x, p + "attention.self.value"))
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(size)
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        scores /= scores.sum(-1, keepdims=True)
        context = (scores @ v).transpose(1, 0, 2).reshape(n, heads * size)
        attended = linear(context, p + "attention.output.dense")
        x = layer_norm(
            attended + x,
            t(p + "attention.output.LayerNorm.weight"),
            t(p + "attention.output.LayerNorm.bias"),
            eps,
        )
        hidden = gelu(linear(x, p + "intermediate.dense"))
        out = linear(hidden, p + "output.dense")
        x = layer_norm(
            out + x, t(p + "output.LayerNorm.weight"), t(p + "output.LayerNorm.bias"), eps
        )
    pooled = x.mean(0)
    return pooled / np.linalg.norm(pooled)


def main():
    model = Path(sys.argv[1])
    config = json.loads((model / "config.json").read_text())
    weights = load_file(str(model / "model.safetensors"))
    tokenizer = Tokenizer.from_file(str(model / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    # The well-known BERT uncased vocabulary: hello = 7592, world = 2088.
    assert tokenizer.encode("Hello world").ids == [101, 7592, 2088, 102]
    digest = hashlib.sha256((model / "model.safetensors").read_bytes()).hexdigest()
    vectors = [
        [round(float(x), 7) for x in embed(weights, config, tokenizer.encode(s).ids)]
        for s in SENTENCES
    ]
    json.dump(
        {"weights_sha256": digest, "sentences": SENTENCES, "vectors": vectors}, sys.stdout
    )


main()
