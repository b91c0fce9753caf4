"""A workout plan: products of bounded ints, an ``Optional`` note, a str ``Enum``.

A coach's app plans a session from a time limit: two to six exercises, each for one muscle
group (a str ``Enum``), with sets, reps and rest in seconds (bounded ints) and an optional
note. The session's minutes cover every exercise's sets of reps at the context's seconds
per rep plus the rests (a sum of products of two fields), fit the limit, and no muscle group
is worked twice in a row.
"""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, Field

from factorspec_sdk import relation

__all__ = ["CONTEXT", "GOLDEN", "PROMPT", "Exercise", "Limits", "Muscle", "Workout"]


class Muscle(str, Enum):  # noqa: UP042 (the spelling users write)
    """The muscle group an exercise works."""

    LEGS = "legs"
    BACK = "back"
    CHEST = "chest"
    CORE = "core"


class Exercise(BaseModel):
    """One exercise of the session."""

    name: str = Field(max_length=30)
    muscle: Muscle
    sets: int = Field(ge=1, le=6)
    reps: int = Field(ge=1, le=20)
    rest_seconds: int = Field(ge=0, le=300)
    note: str | None = Field(default=None, max_length=60)


class Limits(BaseModel):
    """The context: the session's limit and the pace."""

    max_minutes: int
    seconds_per_rep: int


class Workout(BaseModel):
    """The session."""

    title: str = Field(max_length=60)
    exercises: list[Exercise] = Field(min_length=2, max_length=6)
    total_minutes: int

    @relation
    def fits(self, limits: Limits) -> bool:
        """The session fits the limit."""
        return self.total_minutes <= limits.max_minutes

    @relation
    def covers_the_work(self, limits: Limits) -> bool:
        """The minutes cover every set's reps and rest."""
        return self.total_minutes * 60 >= sum(
            e.sets * (e.reps * limits.seconds_per_rep + e.rest_seconds) for e in self.exercises
        )

    @relation
    def no_muscle_twice_in_a_row(self) -> bool:
        """Consecutive exercises work different muscle groups."""
        return all(a.muscle != b.muscle for a, b in zip(self.exercises, self.exercises[1:]))


CONTEXT = Limits(max_minutes=30, seconds_per_rep=4)

PROMPT = (
    "Plan a 30-minute full-body workout with 4 exercises: squats, rows, push-ups and a "
    "plank hold. Give each exercise its muscle group, sets, reps and rest in seconds, a "
    "short note where useful, and the session's total minutes. Reps take 4 seconds each."
)

GOLDEN = Workout.model_validate(
    {
        "title": "30-minute full body",
        "exercises": [
            {"name": "Squats", "muscle": "legs", "sets": 3, "reps": 12, "rest_seconds": 60},
            {"name": "Rows", "muscle": "back", "sets": 3, "reps": 10, "rest_seconds": 60},
            {
                "name": "Push-ups",
                "muscle": "chest",
                "sets": 3,
                "reps": 12,
                "rest_seconds": 45,
                "note": "knees down if needed",
            },
            {"name": "Plank", "muscle": "core", "sets": 3, "reps": 1, "rest_seconds": 30},
        ],
        "total_minutes": 25,
    },
    context=CONTEXT,
)
"""A session that covers its work (1,005 s) within 25 minutes."""
