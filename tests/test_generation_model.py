"""End to end on the real SmolLM2 model: every record valid, speculation exact."""

from __future__ import annotations

import datetime as dt
import enum
from typing import TYPE_CHECKING, Annotated, Literal

import pytest
from pydantic import BaseModel, Field

from examples import booking, invoice, itinerary_dates, meeting, receipt
from factorspec_sdk import Client, TokenBudgetError, relation
from factorspec_sdk.domains.trip import Itinerary, evaluate, generate_problem, prompt_for
from factorspec_sdk.domains.trip_dates import (
    DatedItinerary,
    dated_problem,
    dated_prompt_for,
    dated_record,
)
from factorspec_sdk.graph import compile_spec
from factorspec_sdk.tokens.plan import Planner
from factorspec_sdk.writer.automaton import Writer
from tests.drafter.test_stats import check_parts
from tests.greedy import CHUNKING_TOLERANCE, assert_same_greedy
from tests.helpers import Post

if TYPE_CHECKING:
    from factorspec_sdk.engines.embedded import EmbeddedEngine

pytestmark = pytest.mark.model

# 3-8 cities; problems with several valid orders keep genuine choices for the model
PROBLEMS = [generate_problem(3 + i % 6, seed=100 + i, unique=i % 2 == 0) for i in range(16)]


def test_trip_records_are_valid(embedded_engine: EmbeddedEngine) -> None:
    client = Client(embedded_engine)
    for start in range(0, len(PROBLEMS), 8):  # batches of 8 share each forward
        chunk = PROBLEMS[start : start + 8]
        results = client.generate_batch(
            Itinerary, [prompt_for(p) for p in chunk], contexts=chunk, return_result=True
        )
        for problem, result in zip(chunk, results, strict=True):
            Itinerary.model_validate_json(result.text, context=problem)
            assert evaluate(problem, result.text, model=Itinerary).valid
            assert result.stats.tokens_per_step > 4


def test_itinerary_provenance_and_stream_on_the_real_model(embedded_engine: EmbeddedEngine) -> None:
    """Day numbers and flights follow from the cities; the stream ends with the record."""
    problem = PROBLEMS[1]  # 4 cities, several valid orders: the model chooses among them
    client = Client(embedded_engine)
    with client.stream(Itinerary, prompt_for(problem), context=problem) as stream:
        views = [v.model_dump() for v in stream]
    result = stream.result
    assert views[-1] == result.value.model_dump()
    assert evaluate(problem, result.text, model=Itinerary).valid
    for view in views:  # every view agrees with the record so far
        for got, final in zip(view["stays"] or [], result.value.stays, strict=False):
            assert final.city.startswith(got["city"] or "")
            assert got["first_day"] in (None, final.first_day)
    prov = result.provenance
    cities = [prov.sources[f"stays[{k}].city"].origin for k in range(len(problem.cities))]
    assert "model" in cities  # the problem has several valid orders: the model picks one
    for k in range(len(problem.cities)):
        for day in ("first_day", "last_day"):
            source = prov.sources[f"stays[{k}].{day}"]
            assert source.origin == "relations", source
            assert {"stay_lengths", "stays_follow_each_other"} <= set(source.relations)
    for k in range(len(problem.cities) - 1):
        for leaf in ("day", "origin", "destination"):
            assert prov.sources[f"flights[{k}].{leaf}"].origin == "relations"
    assert prov.share("relations") > prov.share("model")


def test_invoice_and_meeting_are_valid(embedded_engine: EmbeddedEngine) -> None:
    client = Client(embedded_engine)
    bill = client.generate(
        invoice.Invoice, invoice.SAMPLE_PROMPT, context=invoice.SAMPLE_CONTEXT, max_tokens=600
    )
    invoice.Invoice.model_validate(bill.model_dump(), context=invoice.SAMPLE_CONTEXT)
    slot = client.generate(meeting.Meeting, meeting.SAMPLE_PROMPT, context=meeting.SAMPLE_CONTEXT)
    meeting.Meeting.model_validate(slot.model_dump(), context=meeting.SAMPLE_CONTEXT)


def test_sampled_records_are_valid(embedded_engine: EmbeddedEngine) -> None:
    client = Client(embedded_engine)
    problems = PROBLEMS[:6]
    plans = client.generate_batch(
        Itinerary,
        [prompt_for(p) for p in problems],
        contexts=problems,
        temperature=0.8,
        top_p=0.95,
        seed=3,
    )
    for problem, plan in zip(problems, plans, strict=True):
        Itinerary.model_validate(plan.model_dump(), context=problem)


def test_greedy_speculative_equals_one_token_per_forward(
    embedded_engine_fp32: EmbeddedEngine,
) -> None:
    """Token for token, on 4 prompts with genuine choices.

    fp32 logits agree across chunkings to ~1e-4, so the records are equal except past a
    masked top-two tie below `CHUNKING_TOLERANCE` (see tests/greedy.py), which a wrong mask
    or a wrong verification would not produce.
    """
    problems = [generate_problem(3, seed=500 + i, unique=False) for i in range(4)]
    prompts = [prompt_for(p) for p in problems]
    plain = Client(embedded_engine_fp32, speculative=False).generate_batch(
        Itinerary, prompts, contexts=problems, return_result=True
    )
    fast = Client(embedded_engine_fp32, max_guesses=2).generate_batch(
        Itinerary, prompts, contexts=problems, return_result=True
    )
    choices = same = 0
    for problem, prompt, a, b in zip(problems, prompts, plain, fast, strict=True):
        how = assert_same_greedy(
            embedded_engine_fp32, Itinerary, prompt, problem, a.tokens, b.tokens, CHUNKING_TOLERANCE
        )
        same += how.same
        assert a.stats.verify_steps == a.stats.tokens
        assert b.stats.verify_steps < a.stats.verify_steps / 4
        choices += b.stats.verify_steps
    assert choices > 4  # the model did make choices, not just follow forced text
    assert same >= len(problems) - 1  # a split needs a tie within 1e-3: at most one here


def test_string_lengths_on_the_real_model(embedded_engine_fp32: EmbeddedEngine) -> None:
    """Free strings closed where ``len()`` relations allow: valid, and speculation is exact.

    The title's length is odd and fixes ``n``, which is then a certain token; the body's
    length is a multiple of 3 above the title's. A budget of 48 tokens makes the body close
    early (budget masks over string lengths) and keeps the test short.
    """
    prompts = [
        "Write a short post about autumn in Paris as JSON.",
        "Write a post announcing a new bakery as JSON.",
    ]
    plain = Client(embedded_engine_fp32, speculative=False).generate_batch(
        Post, prompts, max_tokens=48, return_result=True
    )
    fast = Client(embedded_engine_fp32, max_guesses=2).generate_batch(
        Post, prompts, max_tokens=48, return_result=True
    )
    for prompt, a, b in zip(prompts, plain, fast, strict=True):
        for result in (a, b):
            assert result.stats.tokens <= 48
            post = Post.model_validate_json(result.text)
            assert len(post.title) == 2 * post.n + 1 and len(post.body) % 3 == 0
        assert_same_greedy(
            embedded_engine_fp32, Post, prompt, None, a.tokens, b.tokens, CHUNKING_TOLERANCE
        )
        assert b.stats.verify_steps < a.stats.verify_steps


def test_dated_itineraries_on_the_real_model(embedded_engine_fp32: EmbeddedEngine) -> None:
    """The trip with calendar dates: valid, exact, and every date drafted as certain tokens.

    The sample (one valid plan) is one certain run: a verify step or two for ~300 tokens. On
    problems with several valid orders the model picks the cities; the dates follow.
    """
    sample = Client(embedded_engine_fp32).generate(
        DatedItinerary,
        itinerary_dates.SAMPLE_PROMPT,
        context=itinerary_dates.SAMPLE_CONTEXT,
        return_result=True,
    )
    golden = dated_record(
        itinerary_dates.SAMPLE_CONTEXT, list(itinerary_dates.SAMPLE_CONTEXT.golden)
    )
    assert sample.value.model_dump(mode="json") == golden
    assert sample.stats.verify_steps <= 2 < 250 < sample.stats.tokens
    start = itinerary_dates.SAMPLE_CONTEXT.start
    problems = [dated_problem(generate_problem(3, seed=510, unique=False), start)]
    prompts = [dated_prompt_for(p) for p in problems]
    plain = Client(embedded_engine_fp32, speculative=False).generate_batch(
        DatedItinerary, prompts, contexts=problems, return_result=True
    )
    fast = Client(embedded_engine_fp32, max_guesses=2).generate_batch(
        DatedItinerary, prompts, contexts=problems, return_result=True
    )
    for problem, prompt, a, b in zip(problems, prompts, plain, fast, strict=True):
        DatedItinerary.model_validate_json(b.text, context=problem)
        assert_same_greedy(
            embedded_engine_fp32,
            DatedItinerary,
            prompt,
            problem,
            a.tokens,
            b.tokens,
            CHUNKING_TOLERANCE,
        )
        assert b.stats.verify_steps < a.stats.verify_steps / 8


def test_bookings_with_dates_on_the_real_model(embedded_engine_fp32: EmbeddedEngine) -> None:
    """Dates the relations fix are certain text; dates the model picks are valid; exact.

    In the sample, the week and weekday fix the check-in and the nights fix the check-out, so
    everything after the guest's name but ``breakfast`` is one certain run. In the flexible
    request the model writes the check-in digit by digit among the feasible dates.
    """
    contexts = [booking.SAMPLE_CONTEXT, booking.FLEXIBLE_CONTEXT]
    prompts = [booking.SAMPLE_PROMPT, booking.FLEXIBLE_PROMPT]
    plain = Client(embedded_engine_fp32, speculative=False).generate_batch(
        booking.Booking, prompts, contexts=contexts, max_tokens=60, return_result=True
    )
    fast = Client(embedded_engine_fp32, max_guesses=2).generate_batch(
        booking.Booking, prompts, contexts=contexts, max_tokens=60, return_result=True
    )
    for ctx, prompt, a, b in zip(contexts, prompts, plain, fast, strict=True):
        for result in (a, b):
            record = booking.Booking.model_validate_json(result.text, context=ctx)
            assert (record.check_out - record.check_in).days == record.nights
        assert_same_greedy(
            embedded_engine_fp32,
            booking.Booking,
            prompt,
            ctx,
            a.tokens,
            b.tokens,
            CHUNKING_TOLERANCE,
        )
        assert b.stats.verify_steps < a.stats.verify_steps
    sample = booking.Booking.model_validate_json(fast[0].text, context=contexts[0])
    assert (sample.check_in.isoformat(), sample.check_out.isoformat()) == (
        "2027-01-08",
        "2027-01-12",
    )
    # the certain run from the check-in to breakfast (~25 tokens) costs one verify step
    assert fast[0].stats.verify_steps <= plain[0].stats.verify_steps - 20


def test_receipts_with_float_amounts_on_the_real_model(
    embedded_engine_fp32: EmbeddedEngine,
) -> None:
    """Float amounts the relations fix are certain text; the record is valid; exact.

    Once the model names a line's item, its quantity, price and line total follow from the
    order and the price list; the total, the paid amount and the change follow from the
    order alone.
    """
    ctx, prompt = receipt.SAMPLE_CONTEXT, receipt.SAMPLE_PROMPT
    plain = Client(embedded_engine_fp32, speculative=False).generate(
        receipt.Receipt, prompt, context=ctx, max_tokens=200, return_result=True
    )
    fast = Client(embedded_engine_fp32, max_guesses=2).generate(
        receipt.Receipt, prompt, context=ctx, max_tokens=200, return_result=True
    )
    for result in (plain, fast):
        record = receipt.Receipt.model_validate_json(result.text, context=ctx)
        assert (record.total, record.paid, record.change) == (13.8, 20.0, 6.2)
    assert_same_greedy(
        embedded_engine_fp32,
        receipt.Receipt,
        prompt,
        ctx,
        plain.tokens,
        fast.tokens,
        CHUNKING_TOLERANCE,
    )
    # measured: 143 plain steps, 7 speculative (every amount and most keys are certain)
    assert fast.stats.verify_steps * 5 < plain.stats.verify_steps


@pytest.mark.parametrize(
    ("model", "context", "prompt"),
    [
        (meeting.Meeting, meeting.SAMPLE_CONTEXT, meeting.SAMPLE_PROMPT),
        (invoice.Invoice, invoice.SAMPLE_CONTEXT, invoice.SAMPLE_PROMPT),
    ],
    ids=["meeting", "invoice"],
)
def test_tight_budgets_finish_on_the_real_model(
    embedded_engine: EmbeddedEngine, model: type[BaseModel], context: object, prompt: str
) -> None:
    """With max_tokens at the shortest record (and a little above), records finish, valid.

    The invoice's wide numbers under arithmetic relations make a tight budget cost oracle
    time (~10 s a record on two cores), so it runs once.
    """
    planner = Planner(Writer(compile_spec(model, context)), embedded_engine.tokenizer)
    shortest = planner.min_tokens(planner.start())
    client = Client(embedded_engine)
    runs = [(shortest, 0.0), (shortest + 5, 0.0), (shortest + 1, 0.8)]
    for budget, temperature in runs if model is meeting.Meeting else runs[:1]:
        result = client.generate(
            model,
            prompt,
            context=context,
            max_tokens=budget,
            temperature=temperature,
            seed=1,
            return_result=True,
        )
        assert result.stats.tokens <= budget
        model.model_validate_json(result.text, context=context)
    with pytest.raises(TokenBudgetError) as info:
        client.generate(model, prompt, context=context, max_tokens=shortest - 1)
    assert info.value.min_tokens == shortest


class _Office(BaseModel):
    day: dt.date
    opens: dt.time
    closes: dt.time
    minutes: int


class _Review(BaseModel):
    title: str = Field(max_length=30)
    start: dt.datetime
    end: dt.datetime
    reminder: dt.time

    @relation
    def as_asked(self, office: _Office) -> bool:
        length = dt.timedelta(minutes=office.minutes)
        return self.start.date() == office.day and self.end - self.start == length

    @relation
    def in_office_hours(self, office: _Office) -> bool:
        return office.opens <= self.start.time() and self.end.time() <= office.closes

    @relation
    def reminder_before(self) -> bool:
        return self.reminder == (self.start - dt.timedelta(minutes=15)).time()


class _Refund(BaseModel):
    kind: Literal["refund"]
    amount: int = Field(ge=1, le=500)


class _Escalate(BaseModel):
    kind: Literal["escalate"]
    team: Literal["billing", "shipping"]


class _Reply(BaseModel):
    kind: Literal["reply"]
    text: str = Field(max_length=40)


class _Order(BaseModel):
    total: int
    lost: bool


class _Decision(BaseModel):
    summary: str = Field(max_length=40)
    action: _Refund | _Escalate | _Reply

    @relation
    def refund_within_total(self, order: _Order) -> bool:
        return not isinstance(self.action, _Refund) or self.action.amount <= order.total

    @relation
    def lost_parcels_go_to_shipping(self, order: _Order) -> bool:
        return not order.lost or (self.action.kind == "escalate" and self.action.team == "shipping")


class _Site(BaseModel):
    taken: list[str]


class _Signup(BaseModel):
    username: str = Field(min_length=3, max_length=10)
    password: str = Field(min_length=6, max_length=12)
    confirm: str = Field(max_length=12)

    @relation
    def username_is_free(self, site: _Site) -> bool:
        return self.username not in site.taken and self.username != self.password

    @relation
    def confirmed(self) -> bool:
        return self.confirm == self.password


class _Shares(BaseModel):
    shares: dict[Literal["rent", "food", "fun"], int] = Field(min_length=2)

    @relation
    def whole(self) -> bool:
        return sum(self.shares.values()) == 100 and all(v > 0 for v in self.shares.values())


@pytest.mark.parametrize(
    ("model", "context", "prompt"),
    [
        (_Signup, _Site(taken=["alice", "admin"]), "Sign up Alice to the forum."),
        (_Shares, None, "Split my income into a budget."),
        (
            _Review,
            _Office(day=dt.date(2026, 12, 7), opens=dt.time(9), closes=dt.time(17), minutes=90),
            "Schedule a 90-minute design review on Monday 7 December.",
        ),
        (_Decision, _Order(total=80, lost=False), "Customer wants money back for a broken mug."),
        (_Decision, _Order(total=80, lost=True), "My parcel never arrived."),
    ],
    ids=["strings", "dict", "datetimes", "union-open", "union-fixed"],
)
def test_datetimes_and_unions_on_the_real_model(
    embedded_engine_fp32: EmbeddedEngine, model: type[BaseModel], context: object, prompt: str
) -> None:
    """Valid records with compared strings, a dict, datetime, time and union fields;
    speculative greedy is exact."""
    plain = Client(embedded_engine_fp32, speculative=False).generate(
        model, prompt, context=context, max_tokens=160, return_result=True
    )
    fast = Client(embedded_engine_fp32, max_guesses=2).generate(
        model, prompt, context=context, max_tokens=160, return_result=True
    )
    for result in (plain, fast):
        model.model_validate_json(result.text, context=context)  # the relations hold
    assert_same_greedy(
        embedded_engine_fp32, model, prompt, context, plain.tokens, fast.tokens, CHUNKING_TOLERANCE
    )
    assert fast.stats.verify_steps < plain.stats.verify_steps


class Priority(enum.StrEnum):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


class Ticket(BaseModel):
    """The record of issue #39's timing ticket: every kind of leaf a support ticket has."""

    title: str = Field(max_length=60)
    priority: Priority
    category: Literal["bug", "feature", "question"]
    assignee: str | None = Field(default=None, max_length=20)
    tags: list[Annotated[str, Field(pattern=r"^[a-z][a-z-]{1,15}$")]] = Field(
        min_length=1, max_length=3
    )
    confidence: float = Field(ge=0, le=1)


def test_a_ticket_names_where_its_time_went_on_the_real_model(
    embedded_engine: EmbeddedEngine,
) -> None:
    """Every part of the call's wall is named, and the parts add up to it."""
    prompt = "The login page crashes with a 500 error when the password has a plus sign."
    result = Client(embedded_engine).generate(Ticket, prompt, return_result=True)
    check_parts(result.stats)
    stats = result.stats
    assert stats.forward_seconds > 0 and stats.spec_seconds > 0 and stats.prompt_seconds > 0
    assert stats.validate_seconds > 0 and stats.batch_seconds == 0.0
