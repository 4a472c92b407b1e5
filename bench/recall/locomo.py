#!/usr/bin/env python3
"""Converts the LoCoMo conversations (long two-person conversations over many sessions, with
questions asked afterwards and the turns that answer each) into the corpus and questions of
`adk-bench recall`, as an external check of retrieval on data this project was never tuned on.

    python3 bench/recall/locomo.py PATH [--out DIR]

PATH is `locomo10.json` as published with the LoCoMo paper (a list of conversations, each with
`conversation` and `qa`), or a directory of one JSON file per conversation (the same fields at
the top level). The data's licence does not allow redistributing it: it is not checked in, so
download it yourself. DIR (default `/tmp/locomo`) receives `corpus.jsonl` and `questions.jsonl`.

Each conversation is one user's memory; each of its sessions one ingested session, its turns
one event each (the speaker as author, the text as said; image captions are left out), a minute
apart from the session's date. Questions keep their category as their kind:
  1 multi_hop, 2 when, 3 open_domain, 4 single_hop, 5 adversarial
(adversarial questions ask about something the conversation does not say; their evidence is
the turn that could mislead). The answer turns are the question's evidence ids ("D3:12": the
12th turn of session 3); evidence that names no turn is dropped, and with it a question left
without any. A question's source is its position in the conversation (`qa-N`), so `--split`
halves every category alike.
"""

from __future__ import annotations

import argparse
import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

KINDS = {1: "multi_hop", 2: "when", 3: "open_domain", 4: "single_hop", 5: "adversarial"}
SESSION = re.compile(r"session_(\d+)")
# "D3:12"; a few evidence strings hold several ids or stray characters ("D8:6; D9:17").
TURN_ID = re.compile(r"D(\d+):(\d+)")


def conversations(path: Path) -> list[tuple[str, dict, list[dict]]]:
    """(name, sessions and speakers, questions) of every conversation at `path`."""
    if path.is_dir():
        samples = [(p.stem, json.loads(p.read_text(encoding="utf-8")))
                   for p in sorted(path.glob("*.json"))]
    else:
        data = json.loads(path.read_text(encoding="utf-8"))
        samples = [(str(s.get("sample_id", i)), s) for i, s in enumerate(data)]
    return [(name, s.get("conversation", s), s["qa"]) for name, s in samples]


def session_start(text: str) -> datetime:
    """LoCoMo's session dates, "4:04 pm on 20 January, 2023", as UTC."""
    return datetime.strptime(text.replace(",", ""), "%I:%M %p on %d %B %Y").replace(
        tzinfo=timezone.utc)


def convert(name: str, conversation: dict, qa: list[dict]) -> tuple[list[dict], list[dict]]:
    user = "locomo-" + re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-")
    sessions, turn_ids = [], {}
    numbers = sorted({int(m.group(1)) for k in conversation
                      if (m := SESSION.fullmatch(k)) and isinstance(conversation[k], list)})
    for n in numbers:
        start = session_start(conversation[f"session_{n}_date_time"])
        events = []
        for i, turn in enumerate(conversation[f"session_{n}"]):
            id_ = f"{user}-s{n:02d}-t{i + 1:03d}"
            turn_ids[turn["dia_id"]] = id_
            events.append(dict(id=id_, author=turn["speaker"], text=turn["text"],
                               timestamp=(start + timedelta(minutes=i)).strftime(
                                   "%Y-%m-%dT%H:%M:%SZ")))
        if events:
            sessions.append(dict(type="session", user=user, session_id=f"{user}-s{n:02d}",
                                 events=events))
    questions = []
    for i, q in enumerate(qa):
        cited = (f"D{a}:{b}" for e in q.get("evidence", []) for a, b in TURN_ID.findall(e))
        answers = list(dict.fromkeys(turn_ids[c] for c in cited if c in turn_ids))
        if answers:
            questions.append(dict(id=f"{user}-q{i + 1:03d}", user=user,
                                  kind=KINDS[q["category"]], question=q["question"],
                                  answers=answers, source=f"qa-{i + 1}"))
    return sessions, questions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", type=Path, help="locomo10.json, or a directory of conversations")
    parser.add_argument("--out", type=Path, default=Path("/tmp/locomo"))
    args = parser.parse_args()
    corpus, questions = [], []
    for name, conversation, qa in conversations(args.path):
        c, q = convert(name, conversation, qa)
        corpus += c
        questions += q
    args.out.mkdir(parents=True, exist_ok=True)
    for file, rows in (("corpus.jsonl", corpus), ("questions.jsonl", questions)):
        with open(args.out / file, "w", encoding="utf-8") as f:
            f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    turns = sum(len(s["events"]) for s in corpus)
    print(f"{args.out}: {len(corpus)} sessions, {turns} turns, {len(questions)} questions")


if __name__ == "__main__":
    main()
