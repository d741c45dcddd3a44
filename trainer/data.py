"""The corpus: generated on the spot from a small grammar, so nothing is downloaded and runs are repeatable."""

from __future__ import annotations

import random
from dataclasses import dataclass

SUBJECTS = ("the drafter", "a target model", "the scheduler", "every thread", "the compiler", "one kernel",
            "the engineer", "a block mask", "the optimizer", "the flight recorder")
VERBS = ("predicts", "compiles", "verifies", "drafts", "accepts", "rejects", "traces", "logs", "writes", "reads")
OBJECTS = ("the next block", "four tokens", "a hidden state", "the log file", "a checkpoint", "the graph",
           "its own backward", "the masked tokens", "a speculative step", "the loss")
ENDINGS = (".", " quickly.", " again.", " in parallel.", " at once.", " before the launch.")

MASK = "\x00"  # the drafter's [MASK] token: never produced by the grammar


def generate_corpus(n_sentences: int = 4000, seed: int = 0) -> str:
    """Sentences from a tiny grammar: structured enough that a small model's loss falls fast."""
    rng = random.Random(seed)
    out = []
    for _ in range(n_sentences):
        out.append(f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}{rng.choice(ENDINGS)}")
    return " ".join(out)


@dataclass(frozen=True)
class Vocab:
    """A character vocabulary; id 0 is the mask token."""

    chars: str

    @classmethod
    def from_text(cls, text: str) -> "Vocab":
        """Every character of the text, plus the mask token at id 0."""
        return cls(MASK + "".join(sorted(set(text) - {MASK})))

    @property
    def size(self) -> int:
        """How many token ids there are."""
        return len(self.chars)

    @property
    def mask_id(self) -> int:
        """The id of the mask token."""
        return 0

    def encode(self, text: str) -> list[int]:
        """Text to token ids."""
        index = {c: i for i, c in enumerate(self.chars)}
        return [index[c] for c in text]

    def decode(self, ids) -> str:
        """Token ids to text (mask shown as '_')."""
        return "".join("_" if i == 0 else self.chars[i] for i in ids)
