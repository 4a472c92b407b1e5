#!/usr/bin/env python3
"""An OpenAI-compatible /embeddings endpoint that answers at once, for measuring what memory-svc
does around a model (storing, scanning and ranking vectors) at sizes a real model would take
hours to ingest on a small machine.

A text's vector is the sum of one pseudo-random integer vector per word (seeded by the word), so texts
that share words are near each other and every search has a definite ranking. Not a model:
its similarities mean nothing beyond shared words.

    python3 bench/hashed_embeddings.py --port 8089 --dimension 384 &
    adk-bench search --embedder openai:http://127.0.0.1:8089/v1 ...   # with --embedder-model
"""

import argparse
import hashlib
import json
import operator
import random
import struct
from functools import lru_cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8089)
    parser.add_argument("--dimension", type=int, default=384)
    args = parser.parse_args()

    @lru_cache(maxsize=100_000)
    def word_vector(word):
        seed = struct.unpack("<Q", hashlib.sha256(word.encode()).digest()[:8])[0]
        rng = random.Random(seed)
        return [rng.randint(-3, 3) for _ in range(args.dimension)]

    def embed(text):
        vector = [0] * args.dimension
        for word in text.lower().split() or [""]:
            vector = list(map(operator.add, vector, word_vector(word)))
        return vector

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            inputs = body["input"]
            inputs = [inputs] if isinstance(inputs, str) else inputs
            data = [
                {"object": "embedding", "index": i, "embedding": embed(text)}
                for i, text in enumerate(inputs)
            ]
            out = json.dumps({"object": "list", "data": data, "model": body.get("model")})
            out = out.encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *_):
            pass

    ThreadingHTTPServer(("127.0.0.1", args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
