#!/usr/bin/env python3
"""Tries hybrid fusion settings on the rankings of `adk-bench recall` runs, one `--mode keyword`
and one `--mode semantic` per corpus, all with `--limit 50 --rankings FILE` (the candidates
memory-svc fuses), chooses a setting on the dev questions of every corpus given (the
even-numbered bank items) and reports it, beside keyword and semantic search alone, on their
held-out questions (the odd ones).

    python3 bench/recall/fuse.py DIR KEYWORD.jsonl SEMANTIC.jsonl [DIR KEYWORD.jsonl SEMANTIC.jsonl ...]

DIR is the corpus's directory (its `questions.jsonl` says which bank item each question was
written from). Families tried:
  rrf     weighted reciprocal rank fusion (memory-svc/src/fusion.rs; SEARCH_MODE_HYBRID is
          k=20 semantic_weight=2 depth=10): an entry scores the sum over the rankings that found
          it, among their first `depth`, of weight / (k + rank); k, the semantic weight (the
          keyword one is 1) and depth vary.
  gated   the keyword ranking as it is when its best match holds at least `floor` of the
          query's terms (stopwords dropped, English Snowball stems; in the entry's text, author
          and metadata), else rrf with the semantic weight `weak`; `strong` is the semantic
          weight otherwise (0: keyword alone). memory-svc's default mode with a model.
  convex  a convex combination of normalised scores: an entry scores
          (1 - w) * bm25 / best bm25 * (f + (1 - f) * coverage) + w * cosine / best cosine, each
          part 0 where its ranking did not find the entry among its first `depth`; coverage is
          the share of the query's terms the entry holds, f its floor (1: coverage ignored).

A setting is admissible when, on every corpus's dev questions, its recall@5 on every question
kind is at least keyword search's, and on paraphrases at least SEARCH_MODE_HYBRID's. The chosen
one changes keyword search's answers least: the most of keyword search's top 5 kept in its own
(mean over the corpora), then the best mean paraphrase recall@5, then the best mean recall@5.
Deterministic; needs the Snowball stemmers (`pip install snowballstemmer`).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable

import snowballstemmer

PARAPHRASE = "paraphrase"

# NLTK's English stopwords, as memory-svc drops them from queries.
STOPWORDS = set("""a about above after again against ain all am an and any are aren aren't as at be because been before being below between both but by can couldn couldn't d did didn didn't do does doesn doesn't doing don don't down during each few for from further had hadn hadn't has hasn hasn't have haven haven't having he he'd he'll her here hers herself he's him himself his how i i'd if i'll i'm in into is isn isn't it it'd it'll it's its itself i've just ll m ma me mightn mightn't more most mustn mustn't my myself needn needn't no nor not now o of off on once only or other our ours ourselves out over own re s same shan shan't she she'd she'll she's should shouldn shouldn't should've so some such t than that that'll the their theirs them themselves then there these they they'd they'll they're they've this those through to too under until up ve very was wasn wasn't we we'd we'll we're were weren weren't we've what when where which while who whom why will with won won't wouldn wouldn't y you you'd you'll your you're yours yourself yourselves you've""".split())
STEM = snowballstemmer.stemmer("english")
WORD = re.compile(r"[\w'’]+")


def terms(text: str) -> list[str]:
    """A text's terms as memory-svc's English analysis makes them (near enough: its words are
    UAX #29's)."""
    words = [w.replace("’", "'") for w in WORD.findall(text.lower())]
    return [STEM.stemWord(w) for w in words]


def query_terms(text: str) -> list[str]:
    words = [w.replace("’", "'") for w in WORD.findall(text.lower())]
    meaningful = [w for w in words if w not in STOPWORDS] or words
    return list(dict.fromkeys(STEM.stemWord(w) for w in meaningful))


def entry_terms(directory: str) -> dict[str, set[str]]:
    """The terms of each entry's text, author and metadata values, by id."""
    out: dict[str, set[str]] = {}
    with open(f"{directory}/corpus.jsonl", encoding="utf-8") as f:
        for record in map(json.loads, f):
            for e in record.get("events", []) + record.get("memories", []):
                values = [str(v) for v in (e.get("custom_metadata") or {}).values()]
                out[e["id"]] = set(terms(" ".join([e["text"], e["author"], *values])))
    return out


def load(path: str) -> dict[str, dict]:
    with open(path, encoding="utf-8") as f:
        return {q["id"]: q for q in map(json.loads, f)}


def recall(ranked: list[str], answers: list[str], k: int) -> float:
    top = set(ranked[:k])
    return sum(a in top for a in answers) / len(answers)


def rrf(q: dict, k: float, weight: float, depth: int) -> list[str]:
    scores: dict[str, float] = {}
    for ranking, w in ((q["ranked"][:depth], 1.0), (q["sem"]["ranked"][:depth], weight)):
        for rank, id_ in enumerate(ranking, 1):
            scores[id_] = scores.get(id_, 0.0) + w / (k + rank)
    # Stable, as fusion.rs: equal scores keep the keyword ranking's order, then the semantic one's.
    return sorted(scores, key=lambda i: -scores[i])


def convex(q: dict, weight: float, depth: int, floor: float) -> list[str]:
    scores: dict[str, float] = {}
    kw_ids, kw = q["ranked"][:depth], q["scores"][:depth]
    for id_, s, c in zip(kw_ids, kw, q["coverage"][:depth]):
        scores[id_] = (1 - weight) * s / kw[0] * (floor + (1 - floor) * c)
    sem_ids, sem = q["sem"]["ranked"][:depth], q["sem"]["scores"][:depth]
    if sem and sem[0] > 0:
        for id_, s in zip(sem_ids, sem):
            scores[id_] = scores.get(id_, 0.0) + weight * max(s / sem[0], 0.0)
    # Stable: equal scores keep the keyword ranking's order, then the semantic one's.
    return sorted(scores, key=lambda i: -scores[i])


def gated(q: dict, k: float, strong: float, weak: float, floor: float, depth: int) -> list[str]:
    weight = strong if q["coverage"][:1] and q["coverage"][0] >= floor else weak
    return rrf(q, k, weight, depth)


def by_kind(questions: list[dict], fused_of: Callable[[dict], list[str]]) -> dict[str, dict]:
    """recall@3 and recall@5 per kind, and over all questions ("all")."""
    sums: dict[str, list[float]] = {}
    for q in questions:
        ranked = fused_of(q)
        for kind in (q["kind"], "all"):
            s = sums.setdefault(kind, [0.0, 0.0, 0.0])
            s[0] += 1
            s[1] += recall(ranked, q["answers"], 3)
            s[2] += recall(ranked, q["answers"], 5)
    return {k: {"n": int(s[0]), "r3": s[1] / s[0], "r5": s[2] / s[0]} for k, s in sums.items()}


def kept_of(questions: list[dict], fused_of: Callable[[dict], list[str]]) -> float:
    """The mean share of keyword search's top 5 that a fusion keeps in its own top 5, over the
    questions keyword search finds anything for: how little it changes what keyword search
    would have answered."""
    shares = [len(set(fused_of(q)[:5]) & set(q["ranked"][:5])) / len(q["ranked"][:5])
              for q in questions if q["ranked"]]
    return sum(shares) / len(shares)


def settings() -> list[tuple[str, Callable[[dict], list[str]]]]:
    out: list[tuple[str, Callable[[dict], list[str]]]] = []
    for k in (5, 10, 20, 60):
        for weight in (0.1, 0.25, 0.5, 0.75, 1.0, 2.0):
            for depth in (10, 20, 50):
                out.append((f"rrf k={k} semantic_weight={weight} depth={depth}",
                            lambda q, k=k, w=weight, d=depth: rrf(q, k, w, d)))
    for weight in (0.2, 0.3, 0.4, 0.5, 0.6, 0.7):
        for depth in (10, 20, 50):
            for floor in (0.0, 0.25, 0.5, 0.75, 1.0):
                out.append((f"convex semantic_weight={weight} depth={depth} coverage_floor={floor}",
                            lambda q, w=weight, d=depth, f=floor: convex(q, w, d, f)))
    for k in (5, 10, 20, 60):
        for strong in (0.0, 0.1, 0.25, 0.5):
            for weak in (1.0, 2.0, 4.0):
                for floor in (0.34, 0.5, 0.67, 0.75, 1.0):
                    for depth in (10, 20, 50):
                        out.append((f"gated k={k} strong={strong} weak={weak} floor={floor} depth={depth}",
                                    lambda q, k=k, s=strong, w=weak, f=floor, d=depth: gated(q, k, s, w, f, d)))
    return out


def main() -> None:
    args = sys.argv[1:]
    if not args or len(args) % 3:
        sys.exit(__doc__)
    corpora = []  # (name, dev questions, held-out questions)
    for i in range(0, len(args), 3):
        directory, kw_path, sem_path = args[i:i + 3]
        keyword, semantic = load(kw_path), load(sem_path)
        if keyword.keys() != semantic.keys():
            sys.exit(f"{kw_path} and {sem_path} do not hold the same questions")
        asked = load(f"{directory}/questions.jsonl")
        held_terms = entry_terms(directory)
        dev, held = [], []
        for id_ in sorted(keyword):
            wanted = query_terms(asked[id_]["question"])
            coverage = [sum(t in held_terms[e] for t in wanted) / max(len(wanted), 1)
                        for e in keyword[id_]["ranked"]]
            q = dict(keyword[id_], sem=semantic[id_], coverage=coverage)
            source = asked[id_]["source"]
            (dev if int(source.rsplit("-", 1)[1]) % 2 == 0 else held).append(q)
        corpora.append((directory, dev, held))

    def keyword(q: dict) -> list[str]:
        return q["ranked"]

    def semantic(q: dict) -> list[str]:
        return q["sem"]["ranked"]

    def hybrid(q: dict) -> list[str]:
        return rrf(q, 20, 2.0, 10)

    base = [by_kind(dev, keyword) for _, dev, _ in corpora]
    today = [by_kind(dev, hybrid) for _, dev, _ in corpora]
    scored = []
    for name, f in settings():
        results = [by_kind(dev, f) for _, dev, _ in corpora]
        admissible = all(r[kind]["r5"] >= b[kind]["r5"] - 1e-9
                         for r, b in zip(results, base) for kind in b) and all(
            r[PARAPHRASE]["r5"] >= t[PARAPHRASE]["r5"] - 1e-9 for r, t in zip(results, today))
        kept = sum(kept_of(dev, f) for _, dev, _ in corpora) / len(corpora)
        para = sum(r[PARAPHRASE]["r5"] for r in results) / len(results)
        all5 = sum(r["all"]["r5"] for r in results) / len(results)
        scored.append((admissible, kept, para, all5, name, f))
    scored.sort(key=lambda s: (not s[0], -s[1], -s[2], -s[3]))
    print(f"{len(scored)} settings, {sum(s[0] for s in scored)} admissible on the dev questions "
          f"of {len(corpora)} corpora; the admissible ones keeping most of keyword's top 5:")
    print("| setting | admissible | keyword top 5 kept | paraphrase@5 | all@5 |")
    print("|---|---|---:|---:|---:|")
    for admissible, kept, para, all5, name, _ in scored[:15]:
        print(f"| {name} | {'yes' if admissible else 'no'} | {kept:.3f} | {para:.3f} "
              f"| {all5:.3f} |")
    chosen = scored[0]
    print(f"\nchosen: {chosen[4]}\n")
    for directory, dev, held in corpora:
        for split, questions in (("dev", dev), ("held-out", held)):
            rows = [("keyword", by_kind(questions, keyword)),
                    ("semantic", by_kind(questions, semantic)),
                    ("hybrid", by_kind(questions, hybrid)),
                    ("chosen", by_kind(questions, chosen[5]))]
            kinds = sorted(k for k in rows[0][1] if k != "all") + ["all"]
            print(f"{directory}, {split}: recall@5 per kind (paraphrase: recall@3 too)")
            print("| ranking | " + " | ".join(f"{k} ({rows[0][1][k]['n']})" for k in kinds)
                  + " | paraphrase@3 |")
            print("|---|" + "---:|" * (len(kinds) + 1))
            for label, r in rows:
                print(f"| {label} | " + " | ".join(f"{r[k]['r5']:.3f}" for k in kinds)
                      + f" | {r[PARAPHRASE]['r3']:.3f} |")
            print()


if __name__ == "__main__":
    main()
