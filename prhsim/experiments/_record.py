"""The base of every plain-data result of the experiments: a frozen pydantic model that refuses unknown fields, so a
result serialises to JSON and reads back as it was written (results.json of ``prhsim run`` and of every sweep)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Record(BaseModel):
    """A frozen result record: fields are set once, and an unknown field is an error."""

    model_config = ConfigDict(extra="forbid", frozen=True)
