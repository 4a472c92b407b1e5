#!/usr/bin/env python3
"""Semantic-ranking ideas tried on real vectors, outside the service: recall@3/recall@5 per
question kind of the recall corpus when its entries and questions are ranked by cosine
similarity in several ways. Every vector comes from the model through
`memory-svc/examples/embed_texts.rs`, so trying an idea takes seconds, not a server build;
an idea that wins here is then built into memory-svc and measured with `adk-bench recall`.

    cargo build --release -p memory-svc --example embed_texts
    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install numpy
    /tmp/venv/bin/python bench/recall/semantic_variants.py --split dev --corpus DIR

The `own text` row is memory-svc's semantic mode (SearchMemory with mode SEMANTIC): each entry's
own text, and the question without the words that name an author of the user's entries
(written capitalised, possibly with 's), as `memories.rs` embeds a query. Its figures match
`adk-bench recall --mode semantic` on the same questions. With `--fuse KEYWORD.jsonl` (the
rankings of a keyword run of the same questions) every ranking is fused with keyword search's
as memory-svc's hybrid mode fuses them, and the first row then matches `--mode hybrid`.
Vectors are kept by text in `target/semantic-variants/`, one file per model folder.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
from fuse import rrf

# memory-svc's hybrid fusion (memory-svc/src/fusion.rs).
RRF_K, SEMANTIC_WEIGHT, DEPTH = 20.0, 2.0, 10

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
NAME = re.compile(r"\w+(?:['’]s)?")
POSSESSIVE = re.compile(r"['’]s$")


class Vectors:
    """Texts' vectors from embed_texts, cached in a file."""

    def __init__(self, model: str, cache: Path) -> None:
        self.model, self.cache = model, cache
        self.known: dict[str, list[float]] = json.loads(cache.read_text()) if cache.exists() else {}

    def of(self, texts: list[str]) -> np.ndarray:
        missing = sorted({t for t in texts if t not in self.known})
        if missing:
            program = ROOT / "target" / "release" / "examples" / "embed_texts"
            out = subprocess.run(
                [str(program), self.model],
                input="\n".join(json.dumps(t) for t in missing),
                capture_output=True,
                text=True,
                check=True,
            ).stdout.splitlines()
            self.known.update((t, json.loads(line)) for t, line in zip(missing, out, strict=True))
            self.cache.write_text(json.dumps(self.known))
        return np.array([self.known[t] for t in texts], dtype=np.float32)


def load(corpus: Path, split: str) -> tuple[dict, list[dict]]:
    users: dict[str, dict] = {}
    for line in (corpus / "corpus.jsonl").open():
        record = json.loads(line)
        user = users.setdefault(record["user"], {"entries": [], "authors": set()})
        items = record.get("events") or record.get("memories") or []
        # A session's (or a memory call's) entries in order: an entry's neighbours.
        group = list(range(len(user["entries"]), len(user["entries"]) + len(items)))
        for item in items:
            user["entries"].append(dict(item, group=group))
            user["authors"].add(item["author"])
    questions = [json.loads(line) for line in (corpus / "questions.jsonl").open()]
    if split != "all":
        even = split == "dev"
        questions = [q for q in questions if (int(q["source"].split("-")[-1]) % 2 == 0) == even]
    return users, questions


def neighbour(user: dict, i: int, step: int) -> str | None:
    group = user["entries"][i]["group"]
    at = group.index(i) + step
    return user["entries"][group[at]]["text"] if 0 <= at < len(group) else None


def query_text(question: str, authors: set[str], instead: str) -> str:
    names = {a.lower() for a in authors}

    def swap(m: re.Match[str]) -> str:
        word = m.group(0)
        if word[0].isupper() and POSSESSIVE.sub("", word).lower() in names:
            return instead + ("'s" if instead and POSSESSIVE.search(word) else "")
        return word

    return " ".join(NAME.sub(swap, question).split())


Score = Callable[[dict, dict], np.ndarray]


def report(
    label: str,
    questions: list[dict],
    score: Score,
    users: dict,
    within: str,
    keyword: dict[str, list[str]] | None,
) -> None:
    hits: dict[str, list[tuple[float, float]]] = {}
    for q in questions:
        user = users[q["user"]]
        pool = user[within]
        s = score(q, user)[pool]
        ids = [user["entries"][pool[i]]["id"] for i in np.argsort(-s, kind="stable")[:50]]
        if keyword is not None:
            kept = {user["entries"][i]["id"] for i in pool}
            ranked = [i for i in keyword[q["id"]] if i in kept]
            ids = rrf(ranked, ids, RRF_K, SEMANTIC_WEIGHT, DEPTH)
        ids = ids[:5]
        answers = set(q["answers"])
        got = (len(answers & set(ids[:3])) / len(answers), len(answers & set(ids)) / len(answers))
        for kind in (q["kind"], "all", "all but paraphrase" if q["kind"] != "paraphrase" else None):
            if kind:
                hits.setdefault(kind, []).append(got)
    kinds = ["paraphrase", "all but paraphrase", "all"] + sorted(
        k for k in hits if k not in ("paraphrase", "all but paraphrase", "all")
    )
    cells = " | ".join(
        f"{np.mean([h[0] for h in hits[k]]):.3f} / {np.mean([h[1] for h in hits[k]]):.3f}"
        for k in kinds
    )
    print(f"| {label} | {cells} |")


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--corpus", type=Path, default=HERE)
    ap.add_argument("--split", choices=["all", "dev", "held-out"], default="dev")
    ap.add_argument(
        "--fuse",
        type=Path,
        help="the rankings of an `adk-bench recall --mode keyword --limit 50 --rankings FILE` run "
        "of the same questions: each semantic ranking is then fused with it as memory-svc's "
        "hybrid mode does, and the table is of the fused rankings",
    )
    ap.add_argument("--model", default=os.path.expanduser("~/.cache/adk-services/all-MiniLM-L6-v2"))
    ap.add_argument(
        "--bank",
        type=int,
        default=310,
        help="entries per user in the `memory bank` rows: every answer and note, "
        "then other entries drawn at random (seed 1)",
    )
    args = ap.parse_args()
    keyword = None
    if args.fuse:
        with args.fuse.open(encoding="utf-8") as f:
            keyword = {q["id"]: q["ranked"] for q in map(json.loads, f)}

    cache = ROOT / "target" / "semantic-variants"
    cache.mkdir(parents=True, exist_ok=True)
    vectors = Vectors(
        args.model, cache / f"{hashlib.sha256(args.model.encode()).hexdigest()[:16]}.json"
    )
    users, questions = load(args.corpus, args.split)
    every = [json.loads(line) for line in (args.corpus / "questions.jsonl").open()]
    draw = random.Random(1)
    for name, user in users.items():
        entries = user["entries"]
        before = [(neighbour(user, i, -1) or "") + " " + e["text"] for i, e in enumerate(entries)]
        after = [e["text"] + " " + (neighbour(user, i, 1) or "") for i, e in enumerate(entries)]
        user["own"] = vectors.of([e["text"] for e in entries])
        user["before"] = vectors.of([t.strip() for t in before])
        user["after"] = vectors.of([t.strip() for t in after])
        user["all"] = np.arange(len(entries))
        answers = {a for q in every if q["user"] == name for a in q["answers"]}
        bank = [i for i, e in enumerate(entries) if e["id"] in answers or e["author"] == "memory"]
        others = [i for i in range(len(entries)) if i not in set(bank)]
        bank += draw.sample(others, max(0, min(len(others), args.bank - len(bank))))
        user["bank"] = np.array(sorted(bank))
    for instead in ("", "someone", "you"):
        texts = [query_text(q["question"], users[q["user"]]["authors"], instead) for q in questions]
        for q, v in zip(questions, vectors.of(texts), strict=True):
            q[f"v{instead}"] = v

    def own(q: dict, u: dict, instead: str = "") -> np.ndarray:
        return u["own"] @ q[f"v{instead}"]

    def with_context(weight: float) -> Score:
        return lambda q, u: (
            own(q, u) + weight * np.maximum(u["before"] @ q["v"], u["after"] @ q["v"])
        )

    def with_summed(weight: float) -> Score:
        # The same idea without embedding more text: the entry's vector plus a neighbour's,
        # normalised (an entry without that neighbour keeps its own).
        def score(q: dict, u: dict) -> np.ndarray:
            if "summed" not in u:
                vs = u["own"]
                sums = []
                for step in (-1, 1):
                    summed = vs.copy()
                    for i, e in enumerate(u["entries"]):
                        j = e["group"].index(i) + step
                        if 0 <= j < len(e["group"]):
                            summed[i] = vs[i] + vs[e["group"][j]]
                    sums.append(summed / np.linalg.norm(summed, axis=1, keepdims=True))
                u["summed"] = sums
            before, after = u["summed"]
            return own(q, u) + weight * np.maximum(before @ q["v"], after @ q["v"])

        return score

    def with_neighbours(weight: float) -> Score:
        def score(q: dict, u: dict) -> np.ndarray:
            s = own(q, u)
            best = np.full_like(s, -np.inf)
            for i, e in enumerate(u["entries"]):
                at = e["group"].index(i)
                for j in (at - 1, at + 1):
                    if 0 <= j < len(e["group"]):
                        best[i] = max(best[i], s[e["group"][j]])
            return s + weight * np.where(np.isfinite(best), best, 0.0)

        return score

    def feedback(k: int, weight: float) -> Score:
        def score(q: dict, u: dict) -> np.ndarray:
            top = np.argsort(-own(q, u))[:k]
            v = q["v"] + weight * u["own"][top].mean(axis=0)
            return u["own"] @ (v / np.linalg.norm(v))

        return score

    ranked = "hybrid, fused with keyword search" if keyword else "semantic"
    print(
        f"{args.corpus}, {args.split} questions: {len(questions)}; {ranked}; recall@3 / recall@5\n"
    )
    kinds = ["paraphrase", "all but paraphrase", "all"] + sorted(
        {q["kind"] for q in questions} - {"paraphrase"}
    )
    print("| ranking | " + " | ".join(kinds) + " |")
    print("|---|" + "---:|" * len(kinds))
    rows: list[tuple[str, Score, str]] = [("own text (memory-svc's semantic mode)", own, "all")]
    for instead in ("someone", "you"):
        rows.append(
            (f"the query's names read as '{instead}'", lambda q, u, i=instead: own(q, u, i), "all")
        )
    for weight in (0.3, 0.5, 0.7):
        rows.append(
            (
                f"+ {weight} x best of (previous + own, own + next) texts",
                with_context(weight),
                "all",
            )
        )
    for weight in (0.3, 0.7):
        rows.append(
            (
                f"+ {weight} x best of (previous + own, own + next) vectors",
                with_summed(weight),
                "all",
            )
        )
    for weight in (0.2, 0.4):
        rows.append((f"+ {weight} x the best neighbour's score", with_neighbours(weight), "all"))
    for k, weight in ((3, 0.3), (3, 0.6), (5, 0.3)):
        rows.append(
            (f"query moved towards its top {k} (weight {weight})", feedback(k, weight), "all")
        )
    rows.append((f"own text, a memory bank of {args.bank} entries per user", own, "bank"))
    for label, score, within in rows:
        report(label, questions, score, users, within, keyword)
    return 0


if __name__ == "__main__":
    sys.exit(main())
