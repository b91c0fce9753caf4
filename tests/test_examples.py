"""The bundled examples: samples validate, crafted invalid records fail the right relation."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import ValidationError

from examples import booking, invoice, itinerary, meeting, receipt
from factorspec_sdk import relations_of
from factorspec_sdk.domains.trip import Itinerary, evaluate, itinerary_record
from factorspec_sdk.relations import build_layout


def _violated(model: Any, data: Any, ctx: Any) -> str:
    with pytest.raises(ValidationError) as info:
        model.model_validate(data, context=ctx)
    return str(info.value)


# ------------------------------------------------------------------ itinerary


def test_itinerary_relations_and_layout() -> None:
    names = [r.name for r in relations_of(Itinerary)]
    assert names == [
        "visits_every_city_once",
        "stays_follow_each_other",
        "stay_lengths",
        "flights_link_stays",
        "events_covered",
    ]
    layout = build_layout(Itinerary)
    assert layout.field("stays").node.max_length == 10  # type: ignore[union-attr]
    assert layout.field("flights").node.max_length == 9  # type: ignore[union-attr]


def test_itinerary_sample() -> None:
    ctx = itinerary.SAMPLE_CONTEXT
    assert len(ctx.cities) == 5 and len(ctx.events) >= 1
    assert f"visit 5 European cities for {ctx.total_days} days" in itinerary.SAMPLE_PROMPT
    golden = itinerary_record(ctx.golden)
    Itinerary.model_validate(golden, context=ctx)
    result = evaluate(ctx, golden)
    assert result.valid and result.exact_match


def test_itinerary_main(capsys: pytest.CaptureFixture[str]) -> None:
    itinerary.main()
    out = capsys.readouterr().out
    assert "Day 1-5: Copenhagen" in out and "Day 19-23: Budapest" in out


def test_itinerary_needs_context() -> None:
    with pytest.raises(ValidationError, match="needs a context"):
        Itinerary.model_validate(itinerary_record(itinerary.SAMPLE_CONTEXT.golden))


# ------------------------------------------------------------------ invoice

INVOICE: dict[str, Any] = {
    "items": [
        {"description": "notebook", "quantity": 3, "unit_price_cents": 450, "amount_cents": 1350},
        {"description": "pens", "quantity": 2, "unit_price_cents": 725, "amount_cents": 1450},
        {"description": "lamp", "quantity": 1, "unit_price_cents": 3999, "amount_cents": 3999},
    ],
    "subtotal_cents": 6799,
    "tax_cents": 543,
    "total_cents": 7342,
}


def test_invoice_sample() -> None:
    ctx = invoice.SAMPLE_CONTEXT
    inv = invoice.Invoice.model_validate(INVOICE, context=ctx)
    assert inv.total_cents == 7342
    for needle in ("3 notebooks", "$4.50", "2 boxes", "$7.25", "$39.99", "8%"):
        assert needle in invoice.SAMPLE_PROMPT
    invoice.main()


def _broken(path: tuple[Any, ...], value: int) -> dict[str, Any]:
    data = copy.deepcopy(INVOICE)
    target: Any = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return data


@pytest.mark.parametrize(
    ("path", "value", "relation"),
    [
        (("items", 0, "amount_cents"), 1351, "amount_is_quantity_times_price"),
        (("subtotal_cents",), 6800, "subtotal_is_sum"),
        (("tax_cents",), 544, "tax_at_rate"),
        (("total_cents",), 7343, "total_is_subtotal_plus_tax"),
    ],
)
def test_invoice_arithmetic(path: tuple[Any, ...], value: int, relation: str) -> None:
    assert relation in _violated(invoice.Invoice, _broken(path, value), invoice.SAMPLE_CONTEXT)


def test_invoice_tax_rounds_down() -> None:
    ctx = invoice.InvoiceContext(tax_rate_percent=7, max_items=5)
    data = {
        "items": [{"description": "x", "quantity": 1, "unit_price_cents": 99, "amount_cents": 99}],
        "subtotal_cents": 99,
        "tax_cents": 6,  # 6.93 -> 6
        "total_cents": 105,
    }
    invoice.Invoice.model_validate(data, context=ctx)
    assert "tax_at_rate" in _violated(
        invoice.Invoice, {**data, "tax_cents": 7, "total_cents": 106}, ctx
    )


def test_invoice_item_limit() -> None:
    ctx = invoice.InvoiceContext(tax_rate_percent=8, max_items=2)
    assert "item_limit" in _violated(invoice.Invoice, INVOICE, ctx)


def test_invoice_schema_bounds() -> None:
    with pytest.raises(ValidationError, match="less than or equal to 100"):
        invoice.Invoice.model_validate(
            _broken(("items", 0, "quantity"), 101), context=invoice.SAMPLE_CONTEXT
        )
    with pytest.raises(ValidationError, match="at least 1 item"):
        invoice.Invoice.model_validate({**INVOICE, "items": []}, context=invoice.SAMPLE_CONTEXT)
    build_layout(invoice.Invoice)


# ------------------------------------------------------------------ meeting


def test_meeting_sample() -> None:
    ctx = meeting.SAMPLE_CONTEXT
    m = meeting.Meeting.model_validate(
        {"day": "Tuesday", "start_hour": 12, "end_hour": 14}, context=ctx
    )
    assert m.day == "Tuesday"
    prompt = meeting.SAMPLE_PROMPT
    assert "Alice, Bob and Carol for 2 hours" in prompt and "9:00 to 17:00" in prompt
    assert "Monday or Tuesday" in prompt and "Bob is busy on Monday 13:00 to 17:00" in prompt
    build_layout(meeting.Meeting)
    meeting.main()


def test_meeting_sample_has_one_slot() -> None:
    ok = []
    for day in ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday"):
        for start in range(24):
            data = {"day": day, "start_hour": start, "end_hour": start + 2}
            try:
                meeting.Meeting.model_validate(data, context=meeting.SAMPLE_CONTEXT)
            except ValidationError:
                continue
            ok.append((day, start))
    assert ok == [("Tuesday", 12)]


@pytest.mark.parametrize(
    ("data", "relation"),
    [
        ({"day": "Tuesday", "start_hour": 12, "end_hour": 13}, "lasts_duration"),
        ({"day": "Tuesday", "start_hour": 7, "end_hour": 9}, "within_work_hours"),
        ({"day": "Tuesday", "start_hour": 16, "end_hour": 18}, "within_work_hours"),
        ({"day": "Friday", "start_hour": 12, "end_hour": 14}, "on_allowed_day"),
        ({"day": "Monday", "start_hour": 11, "end_hour": 13}, "everyone_free"),
        ({"day": "Tuesday", "start_hour": 13, "end_hour": 15}, "everyone_free"),
    ],
)
def test_meeting_invalid(data: dict[str, Any], relation: str) -> None:
    assert relation in _violated(meeting.Meeting, data, meeting.SAMPLE_CONTEXT)


def test_meeting_unknown_day_is_a_schema_error() -> None:
    with pytest.raises(ValidationError, match=r"literal_error|Input should be"):
        meeting.Meeting.model_validate(
            {"day": "Sunday", "start_hour": 12, "end_hour": 14}, context=meeting.SAMPLE_CONTEXT
        )


# ------------------------------------------------------------------ booking

BOOKING = {
    "guest": "Ingrid Solberg",
    "check_in": "2027-01-08",
    "nights": 4,
    "check_out": "2027-01-12",
    "breakfast": True,
}


def test_booking_sample(capsys: pytest.CaptureFixture[str]) -> None:
    booking.Booking.model_validate(BOOKING, context=booking.SAMPLE_CONTEXT)
    assert "week of 2027-01-04" in booking.SAMPLE_PROMPT
    booking.main()
    assert "2027-01-08 to 2027-01-12 (4 nights)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("change", "relation"),
    [
        ({"check_out": "2027-01-13"}, "nights_match"),
        ({"check_in": "2027-01-07", "check_out": "2027-01-11"}, "arrives_as_asked"),
        ({"nights": 5, "check_out": "2027-01-13"}, "stay_length"),
    ],
)
def test_booking_violations(change: dict[str, Any], relation: str) -> None:
    data = {**BOOKING, **change}
    assert relation in _violated(booking.Booking, data, booking.SAMPLE_CONTEXT)


def test_flexible_booking_blackouts_and_season() -> None:
    ctx = booking.FLEXIBLE_CONTEXT
    christmas = {**BOOKING, "check_in": "2026-12-21", "nights": 4, "check_out": "2026-12-25"}
    assert "avoids_blackouts" in _violated(booking.Booking, christmas, ctx)
    late = {**BOOKING, "check_in": "2027-03-29", "nights": 4, "check_out": "2027-04-02"}
    assert "in_season" in _violated(booking.Booking, late, ctx)
    booking.Booking.model_validate(
        {**christmas, "check_out": "2026-12-23", "nights": 2}, context=ctx
    )


# ------------------------------------------------------------------ receipt

RECEIPT: dict[str, Any] = receipt.SAMPLE_RECEIPT


def test_receipt_sample(capsys: pytest.CaptureFixture[str]) -> None:
    receipt.Receipt.model_validate(RECEIPT, context=receipt.SAMPLE_CONTEXT)
    assert "3 x croissant" in receipt.SAMPLE_PROMPT
    receipt.main()
    assert "total 13.80, paid 20.00, change 6.20" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("change", "relation"),
    [
        ({"total": 13.81}, "adds_up"),
        ({"change": 6.21}, "change_given"),
        ({"lines": [{**RECEIPT["lines"][0], "line_total": 5.86}, *RECEIPT["lines"][1:]]}, "priced"),
        ({"lines": RECEIPT["lines"][:2], "total": 10.65, "change": 9.35}, "as_ordered"),
    ],
)
def test_receipt_violations(change: dict[str, Any], relation: str) -> None:
    data = {**RECEIPT, **change}
    assert relation in _violated(receipt.Receipt, data, receipt.SAMPLE_CONTEXT)


def test_receipt_fixes_every_amount_once_the_items_are_named() -> None:
    from factorspec_sdk.graph import compile_spec
    from factorspec_sdk.graph.oracle import Oracle

    spec = compile_spec(receipt.Receipt, context=receipt.SAMPLE_CONTEXT)
    oracle = Oracle(spec)
    fixed = {k: v for k, (v, _) in oracle.determined(()).items()}
    assert fixed == {"len(lines)": 3, "total": 1380, "paid": 2000, "change": 620}  # cents
    named = oracle.determined((("len(lines)", 3), ("lines[0].item", "coffee")))
    assert {k: v for k, (v, _) in named.items() if k.startswith("lines[0]")} == {
        "lines[0].quantity": 2,
        "lines[0].unit_price": 240,
        "lines[0].line_total": 480,
    }
