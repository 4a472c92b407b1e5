#!/usr/bin/env python3
"""Tries hybrid fusion settings on the rankings of two `adk-bench recall` runs of the same
questions, one `--mode keyword` and one `--mode semantic`, both with `--limit 50 --rankings FILE`
(the candidates memory-svc's hybrid mode fuses), and prints recall@3 and recall@5 of each setting
on the paraphrase questions and on all the others, next to keyword search's own.

    python3 bench/recall/fuse.py KEYWORD.jsonl SEMANTIC.jsonl

Two families are tried:
  rrf    weighted reciprocal rank fusion, as memory-svc does it (memory-svc/src/fusion.rs): an
         entry scores the sum over the rankings that found it, among their first `depth`, of
         weight / (k + rank); k, the semantic weight (the keyword one is 1) and depth vary.
  gated  the same with the semantic ranking used only when its best cosine similarity reaches
         a threshold (keyword search alone otherwise).

The setting chosen is the one with the best paraphrase recall@3 among those whose recall@5 on
the other questions is within 1 point of keyword search's (half the 2-point allowance, as a
margin for the held-out questions); ties go to the better recall@5 over all questions. Run it on
the `--split dev` rankings only: the held-out questions are for reporting the chosen setting.
No dependencies; deterministic.
"""

from __future__ import annotations

import json
import sys

PARAPHRASE = "paraphrase"


def load(path: str) -> dict[str, dict]:
    with open(path, encoding="utf-8") as f:
        return {q["id"]: q for q in map(json.loads, f)}


def recall(ranked: list[str], answers: list[str], k: int) -> float:
    top = set(ranked[:k])
    return sum(a in top for a in answers) / len(answers)


def rrf(keyword: list[str], semantic: list[str], k: float, weight: float, depth: int) -> list[str]:
    scores: dict[str, float] = {}
    order: list[str] = []
    for ranking, w in ((keyword[:depth], 1.0), (semantic[:depth], weight)):
        for rank, id_ in enumerate(ranking, 1):
            if id_ not in scores:
                scores[id_] = 0.0
                order.append(id_)
            scores[id_] += w / (k + rank)
    # Stable, as fusion.rs: equal scores keep the keyword ranking's order, then the semantic one's.
    return sorted(order, key=lambda i: -scores[i])


def evaluate(questions, fused_of) -> dict[str, float]:
    sums = {"p3": 0.0, "p5": 0.0, "o3": 0.0, "o5": 0.0, "a5": 0.0}
    n = {"p": 0, "o": 0}
    for q in questions:
        ranked = fused_of(q)
        part = "p" if q["kind"] == PARAPHRASE else "o"
        n[part] += 1
        sums[part + "3"] += recall(ranked, q["answers"], 3)
        sums[part + "5"] += recall(ranked, q["answers"], 5)
        sums["a5"] += recall(ranked, q["answers"], 5)
    total = n["p"] + n["o"]
    return {
        "paraphrase@3": sums["p3"] / max(n["p"], 1),
        "paraphrase@5": sums["p5"] / max(n["p"], 1),
        "others@3": sums["o3"] / max(n["o"], 1),
        "others@5": sums["o5"] / max(n["o"], 1),
        "all@5": sums["a5"] / max(total, 1),
    }


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    keyword, semantic = load(sys.argv[1]), load(sys.argv[2])
    if keyword.keys() != semantic.keys():
        sys.exit("the two files do not hold the same questions")
    questions = [dict(keyword[i], sem=semantic[i]) for i in sorted(keyword)]

    base = evaluate(questions, lambda q: q["ranked"])
    sem = evaluate(questions, lambda q: q["sem"]["ranked"])
    settings = []
    for k in (1, 5, 10, 20, 30, 60, 100):
        for weight in (0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0):
            for depth in (10, 20, 50):
                name = f"rrf k={k} semantic_weight={weight} depth={depth}"
                settings.append((name, lambda q, k=k, w=weight, d=depth:
                                 rrf(q["ranked"], q["sem"]["ranked"], k, w, d)))
                for gate in (0.3, 0.4, 0.5):
                    def gated(q, k=k, w=weight, d=depth, g=gate):
                        best = q["sem"]["scores"][0] if q["sem"]["scores"] else 0.0
                        semantic_ranking = q["sem"]["ranked"] if best >= g else []
                        return rrf(q["ranked"], semantic_ranking, k, w, d)
                    settings.append((f"gated cosine>={gate} {name}", gated))

    results = [(name, evaluate(questions, f)) for name, f in settings]
    floor = base["others@5"] - 0.01
    admissible = [r for r in results if r[1]["others@5"] >= floor - 1e-12]
    admissible.sort(key=lambda r: (-r[1]["paraphrase@3"], -r[1]["all@5"]))

    def row(name, m):
        print(f"| {name} | {m['paraphrase@3']:.3f} | {m['paraphrase@5']:.3f} | "
              f"{m['others@3']:.3f} | {m['others@5']:.3f} | {m['all@5']:.3f} |")

    print(f"{len(questions)} questions, {len(results)} settings, "
          f"{len(admissible)} within 1 point of keyword recall@5 on the others")
    print("| setting | paraphrase@3 | paraphrase@5 | others@3 | others@5 | all@5 |")
    print("|---|---:|---:|---:|---:|---:|")
    row("keyword alone", base)
    row("semantic alone", sem)
    for name, m in admissible[:15]:
        row(name, m)
    if admissible:
        print(f"\nchosen: {admissible[0][0]}")


if __name__ == "__main__":
    main()
