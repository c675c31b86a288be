"""The FLIP-15 termination-attempt protocol for synchronous rounds.

After each round the loop head starts an attempt with a fresh id. Every
operator of the scope reports its status for the round: BUSY with the number
of records it produced, or IDLE. The counts come from the counters Spark
collected while materialising the round (`observe`), so an attempt costs no
Spark job. Operators are classified as in FLIP-15:

- type 1: loop heads (the loop variables), which receive the feedback;
- type 2: operators whose output is fed back (they put records in flight);
- type 3: every other operator of the scope.

Nested loops report that they terminated (they always have when the outer
round ends: an inner activation runs to termination inside the outer round).
The head decides: terminate when no record is in flight on any feedback edge,
when the `until empty(S)` stream produced nothing, or when `rounds` is
reached; otherwise continue, unless this was the last round `max` allows.
"""
from __future__ import annotations

from typing import Iterator, Optional

from attrs import define, field

BUSY, IDLE = "BUSY", "IDLE"


@define
class OperatorReport:
    op: str  # node id
    name: str
    type: int  # spec.FlipType
    records: int

    @property
    def status(self) -> str:
        return BUSY if self.records > 0 else IDLE


@define
class Attempt:
    id: int
    scope: str
    activation: int
    round: int
    in_flight: dict  # feedback variable -> records fed back this round
    operators: list = field(factory=list)  # OperatorReport
    nested_terminated: list = field(factory=list)  # scope ids of inner loops that reported termination
    until_records: Optional[int] = None
    decision: str = "continue"  # continue | no-feedback | until-empty | rounds | max-stop | max-fail

    @property
    def terminated(self) -> bool:
        return self.decision != "continue"

    def busy(self) -> list:
        return [o for o in self.operators if o.status == BUSY]

    def to_json(self) -> dict:
        return {
            "id": self.id, "scope": self.scope, "activation": self.activation, "round": self.round,
            "in_flight": self.in_flight, "until_records": self.until_records, "decision": self.decision,
            "nested_terminated": self.nested_terminated,
            "operators": {o.op: {"name": o.name, "type": int(o.type), "status": o.status, "records": o.records}
                          for o in self.operators},
        }

    def describe(self) -> str:
        flight = ", ".join(f"{v}: {n}" for v, n in self.in_flight.items())
        busy = ", ".join(f"{o.name} ({o.records})" for o in self.busy()) or "none"
        return (f"attempt #{self.id} loop {self.scope} activation {self.activation} round {self.round}: "
                f"in flight [{flight}]; BUSY operators: {busy}; decision: {self.decision}")


@define
class TerminationProtocol:
    """One per loop activation: runs an attempt after every round and decides."""

    scope: str
    activation: int
    max_rounds: int
    on_max: str  # fail | stop
    rounds: Optional[int]  # exactly this many rounds, when set
    operator_types: dict  # node id -> (spec.FlipType, name)
    ids: Iterator[int]  # the run's attempt ids: each attempt takes a fresh one
    attempts: list = field(factory=list)

    def attempt(self, round_no: int, in_flight: dict, counts: dict, until_records: Optional[int],
                nested: list) -> Attempt:
        reports = [OperatorReport(op, name, t, int(counts.get(op, 0)))
                   for op, (t, name) in sorted(self.operator_types.items())]
        a = Attempt(next(self.ids), self.scope, self.activation, round_no, dict(in_flight), reports,
                    list(nested), until_records)
        if sum(in_flight.values()) == 0:
            a.decision = "no-feedback"
        elif until_records is not None and until_records == 0:
            a.decision = "until-empty"
        elif self.rounds is not None and round_no + 1 >= self.rounds:
            a.decision = "rounds"
        elif round_no + 1 >= self.max_rounds:
            a.decision = "max-stop" if self.on_max == "stop" else "max-fail"
        self.attempts.append(a)
        return a


class LoopMaxError(Exception):
    """A loop reached `max` rounds without terminating (exit code 3)."""

    def __init__(self, attempt: Attempt, max_rounds: int):
        self.attempt = attempt
        self.max_rounds = max_rounds
        super().__init__(
            f"loop `{attempt.scope}` did not terminate within max {max_rounds} rounds\n"
            f"  last attempt: round {attempt.round}, records in flight per feedback edge: "
            + ", ".join(f"{v} = {n}" for v, n in attempt.in_flight.items())
            + "\n  BUSY operators: " + (", ".join(f"{o.name} ({o.records} records)" for o in attempt.busy()) or "none")
            + "\n  raise `max N`, or add `on max stop` to accept the result after max rounds"
        )
