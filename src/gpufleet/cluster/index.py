"""Bucket index: integer ids grouped by an integer value, answers "value >= k" in O(answer).

The scheduler asks "which nodes have at least k free GPUs?" thousands of times
per cycle; scanning 5,000 nodes each time is what makes schedulers slow at
scale. Ids live in one bucket per value, and the distinct values present are
kept sorted, so a query skips straight to the buckets that qualify.

Buckets are sorted lists rather than sets so that every query has one
canonical order (ascending value, then ascending id): the same state always
yields the same answer, whatever history of moves produced it, so a rolled-back
what-if or a rebuilt state cannot change later placement decisions. The price
is a `list.insert`/`del` per move, a memmove of at most one bucket (tens of
kilobytes at 20,000 nodes, microseconds), against O(1) for a set.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable, Iterator


class BucketIndex:
    """Ids bucketed by value; the caller owns the values and reports each move."""

    __slots__ = ("_buckets", "_values")

    def __init__(self, items: Iterable[tuple[int, int]] = ()) -> None:
        buckets: dict[int, list[int]] = {}
        for item, value in items:
            buckets.setdefault(value, []).append(item)
        for bucket in buckets.values():
            bucket.sort()
        self._buckets = buckets
        self._values = sorted(buckets)

    def move(self, item: int, old: int, new: int) -> None:
        """Move `item` from the bucket of `old` to that of `new`: O(log n) + one memmove."""
        if old == new:
            return
        buckets = self._buckets
        bucket = buckets[old]
        if len(bucket) == 1:
            del buckets[old]
            values = self._values
            del values[bisect_left(values, old)]
        else:
            del bucket[bisect_left(bucket, item)]
        target = buckets.get(new)
        if target is None:
            buckets[new] = [item]
            insort(self._values, new)
        else:
            insort(target, item)

    def at_least(self, k: int) -> Iterator[int]:
        """Ids whose value is >= k, smallest value first (best fit), then by id."""
        values = self._values
        buckets = self._buckets
        for value in values[bisect_left(values, k) :]:
            yield from buckets[value]

    def first_at_least(self, k: int) -> int | None:
        """The first id `at_least(k)` would yield (None if none): O(log values)."""
        values = self._values
        i = bisect_left(values, k)
        return self._buckets[values[i]][0] if i < len(values) else None

    def room(self, per: int) -> int:
        """Sum over ids of value // per, for values >= per: O(distinct values)."""
        values = self._values
        buckets = self._buckets
        return sum([v // per * len(buckets[v]) for v in values[bisect_left(values, per) :]])

    def items_between(self, low: int, high: int) -> Iterator[tuple[int, int]]:
        """(id, value) for values in [low, high), smallest value first, then by id."""
        values = self._values
        buckets = self._buckets
        for value in values[bisect_left(values, low) : bisect_left(values, high)]:
            for item in buckets[value]:
                yield item, value

    def count_at_least(self, k: int) -> int:
        """How many ids have value >= k: O(distinct values), not O(ids)."""
        values = self._values
        buckets = self._buckets
        return sum(len(buckets[v]) for v in values[bisect_left(values, k) :])

    def sizes_at_least(self, k: int) -> Iterator[tuple[int, int]]:
        """(value, how many ids hold it) for each value >= k, ascending: O(distinct values)."""
        values = self._values
        buckets = self._buckets
        for value in values[bisect_left(values, k) :]:
            yield value, len(buckets[value])

    def total(self) -> int:
        """Sum of every id's value: O(distinct values)."""
        buckets = self._buckets
        return sum([v * len(buckets[v]) for v in self._values])

    def max_value(self, default: int = 0) -> int:
        """The largest value any id holds (`default` when empty): O(1)."""
        values = self._values
        return values[-1] if values else default

    def dump(self) -> dict[int, tuple[int, ...]]:
        """Value -> ids, for tests comparing an index with a brute-force recount."""
        return {v: tuple(self._buckets[v]) for v in self._values}


class SortedIds:
    """A set of ints kept sorted, so iteration order is canonical (see module doc)."""

    __slots__ = ("_items",)

    def __init__(self, items: Iterable[int] = ()) -> None:
        self._items = sorted(set(items))

    def add(self, item: int) -> None:
        insort(self._items, item)

    def remove(self, item: int) -> None:
        del self._items[bisect_left(self._items, item)]

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[int]:
        return iter(self._items)
