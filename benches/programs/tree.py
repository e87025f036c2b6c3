# A program shaped like a JSON service: build a tree of dicts, lists and strings, write it
# out as JSON, parse it back, count keys in the text, drop everything; three times.
# Run by `cargo xtask programs` (the `python-json` and `python-malloc` rows).
import json
import random

random.seed(2)


def tree(depth):
    if depth == 0:
        return {
            "id": random.randint(0, 1 << 30),
            "name": "x" * random.randint(1, 40),
            "tags": [random.random() for _ in range(random.randint(0, 6))],
        }
    kids = [tree(depth - 1) for _ in range(random.randint(2, 6))]
    return {"kids": kids, "label": str(depth) * random.randint(1, 20)}


for _ in range(3):
    t = tree(7)
    text = json.dumps(t)
    back = json.loads(text)
    counts = {}
    for piece in text.split(","):
        counts[piece[:12]] = counts.get(piece[:12], 0) + 1
    print(len(text), len(counts), len(back["kids"]))
    del t, text, back, counts
