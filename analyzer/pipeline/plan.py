"""Between the stages: stage 1's edges grouped by conversation address (chain, Community ID),
with the timelines each group's replay needs. Engine-independent: the local engine runs these
groups in its worker processes, the Spark engine builds the same groups with a shuffle."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from analyzer.pipeline.decode import Edge, FileResult, Timeline


@dataclass
class Group:
    chain: str
    community_id: str
    edges: dict[int, Edge]

    @property
    def first(self) -> int:
        return min(self.edges)

    def needs_replay(self) -> bool:
        """Whether anything must be decoded (else its closed conversations' rows are all)."""
        return any(e.raw or e.state is not None and e.state["live"] for e in self.edges.values())

    def trivial(self) -> bool:
        """Only SYN edges: stage 1 decoded every packet and nothing came before."""
        return all(e.state is None and not e.raw for e in self.edges.values())


def groups(results: Iterable[tuple[str, int, FileResult]]) -> Iterator[Group]:
    """(chain, position, stage 1 result) of every file -> the non-trivial groups."""
    by: dict[tuple[str, str], dict[int, Edge]] = {}
    for chain, position, result in results:
        for cid, edge in result.edges.items():
            by.setdefault((chain, cid), {})[position] = edge
    for (chain, cid), edges in by.items():
        g = Group(chain, cid, edges)
        if not g.trivial():
            yield g


def timelines_for(group: Group, timelines: dict[int, Timeline]) -> dict[int, Timeline]:
    """The timelines of the files after the group's first (the first's own times never matter:
    a replay starts after its checkpoint or at its first held-back packet... of a later file)."""
    if not group.needs_replay():
        return {}
    return {p: t for p, t in timelines.items() if p >= group.first}
