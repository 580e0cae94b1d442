"""Exponential backoff with jitter for reconnects and callback retries: 100 ms doubling to 5 s,
each delay spread +-20 % so many executors do not retry in step."""

import random

INITIAL_DELAY = 0.1
MAX_DELAY = 5.0


class Backoff:
    def __init__(self) -> None:
        self._current = INITIAL_DELAY

    def next_delay(self) -> float:
        base = self._current
        self._current = min(self._current * 2, MAX_DELAY)
        return min(base * random.uniform(0.8, 1.2), MAX_DELAY)

    def reset(self) -> None:
        self._current = INITIAL_DELAY
