"""A small built-in training corpus for the locally made tokenizer.

Checkpoints are made here, never downloaded, and so is their tokenizer: a byte-level BPE
trained on this text. Its only jobs are to be deterministic, cover ordinary English,
code and chat-style text, and give a few hundred useful merges; byte-level fallback
encodes anything else losslessly.
"""

from __future__ import annotations

CORPUS: tuple[str, ...] = (
    "The quick brown fox jumps over the lazy dog. Pack my box with five dozen liquor jugs.",
    "A model is served by many workers. Each worker holds some layers of the model and "
    "streams the rest from its peers, so a new instance can start answering requests "
    "before it has loaded all of its weights.",
    "Kubernetes schedules pods onto nodes. A deployment keeps a number of replicas running, "
    "and an autoscaler changes that number when the load on the service goes up or down.",
    "The network moves data between machines. When one sender feeds many receivers, a chain "
    "or a tree lets every receiver forward what it has already received to the next one.",
    "Question: What is the capital of France? Answer: The capital of France is Paris.",
    "Question: How many days are there in a week? Answer: There are seven days in a week.",
    "User: Hello! Can you help me write a short poem about the sea?\n"
    "Assistant: Of course. The sea is wide and deep and blue; it sings at night and "
    "sparkles in the morning light.",
    "User: What time is it?\nAssistant: I do not have a clock, but you can check your device.",
    "def add(a, b):\n    return a + b\n\n\nfor i in range(10):\n    print(add(i, i * 2))\n",
    "import json\n\nwith open('config.json') as f:\n    config = json.load(f)\n"
    "print(config['hidden_size'], config['num_hidden_layers'])\n",
    "class Worker:\n    def __init__(self, name: str) -> None:\n        self.name = name\n\n"
    "    def run(self) -> int:\n        return 0\n",
    '{"model": "llama", "prompt": "Once upon a time", "max_tokens": 16, "stream": true}',
    "Once upon a time there was a little girl who lived in a village near the forest. "
    "Every day she walked to the river to fetch water, and every day she sang a song.",
    "In the beginning the system was small. Then it grew, and the people who built it "
    "learned that simple parts, clearly named and carefully tested, last the longest.",
    "Numbers: 0 1 2 3 4 5 6 7 8 9 10 11 12 100 1000 2024 3.14159 2.71828 -1 +1 50% $20.",
    "Punctuation and symbols: ( ) [ ] { } < > = + - * / \\ | & ^ % $ # @ ! ? , . ; : ' \" ~ `",
    "Monday, Tuesday, Wednesday, Thursday, Friday, Saturday and Sunday are the days of the week.",
    "January February March April May June July August September October November December",
    "The weather today is sunny with a light breeze. Tomorrow it will rain in the afternoon.",
    "Good engineering is about trade-offs: latency against throughput, memory against speed, "
    "and simplicity against generality. Measure first, then decide.",
    "She said that the results were better than expected, and they agreed to publish them.",
    "Water boils at one hundred degrees Celsius at sea level and freezes at zero degrees.",
    "The library opens at nine in the morning and closes at six in the evening on weekdays.",
    "Scientists observe, form hypotheses, run experiments and share what they have found.",
)


def corpus_lines(repeat: int = 3) -> list[str]:
    """The corpus as training lines (repeated so frequent pairs clearly win)."""
    return [line for _ in range(repeat) for line in CORPUS]
