"""The event schema at the edge: every way an event is refused, and what the refusal says."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pydantic
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from sleepmem.core.errors import ValidationError
from sleepmem.ingest.validation import EventValidationError, validate_event, validate_events
from sleepmem.models.events import Event, EventFields, EventKind, Limits, Role

BASE: dict[str, Any] = {"tenant": "acme", "agent": "support-bot", "content": "hello"}


def refusal(**fields: Any) -> EventValidationError:
    with pytest.raises(EventValidationError) as caught:
        validate_event({**BASE, **fields})
    return caught.value


class TestRequiredScope:
    @pytest.mark.parametrize("field", ["tenant", "agent"])
    def test_a_missing_required_level_is_named(self, field: str) -> None:
        data = {k: v for k, v in BASE.items() if k != field}
        with pytest.raises(EventValidationError) as caught:
            validate_event(data)
        assert caught.value.field == field
        assert caught.value.message == "this field is required"

    @pytest.mark.parametrize("field", ["tenant", "agent"])
    def test_an_empty_required_level_is_refused_with_the_rule(self, field: str) -> None:
        err = refusal(**{field: ""})
        assert err.field == field
        assert f"{field} is required" in err.message
        assert "1-128 characters" in err.message

    @pytest.mark.parametrize("field", ["tenant", "agent", "user", "project", "session"])
    def test_a_level_with_forbidden_characters_is_refused(self, field: str) -> None:
        err = refusal(**{field: "two words"})
        assert err.field == field
        assert "letters, digits and _ . : @ -" in err.message

    def test_a_level_longer_than_128_characters_is_refused(self) -> None:
        err = refusal(user="u" * 129)
        assert err.field == "user"
        assert "1-128 characters" in err.message

    def test_a_level_that_starts_with_punctuation_is_refused(self) -> None:
        assert refusal(project="-proj").field == "project"

    def test_a_missing_level_is_taken_from_the_defaults(self) -> None:
        event = validate_event({"content": "hi"}, defaults={"tenant": "acme", "agent": "bot"})
        assert (event["tenant"], event["agent"]) == ("acme", "bot")

    def test_a_level_given_in_the_event_beats_the_default(self) -> None:
        event = validate_event({**BASE, "user": "u2"}, defaults={"user": "u1"})
        assert event["user"] == "u2"


class TestFieldRules:
    def test_an_unknown_kind_lists_the_allowed_kinds(self) -> None:
        err = refusal(kind="chat")
        assert err.field == "kind"
        assert err.message == "must be one of " + ", ".join(k.value for k in EventKind)

    def test_an_unknown_role_lists_the_allowed_roles(self) -> None:
        err = refusal(role="bot")
        assert err.field == "role"
        assert err.message == "must be one of " + ", ".join(r.value for r in Role)

    def test_content_that_is_not_a_string_is_refused(self) -> None:
        err = refusal(content=123)
        assert (err.field, err.message) == ("content", "must be a string")

    def test_an_unparseable_time_asks_for_iso_8601(self) -> None:
        err = refusal(at="yesterday")
        assert err.field == "at"
        assert "ISO 8601" in err.message

    def test_a_naive_time_is_taken_as_utc(self) -> None:
        event = validate_event({**BASE, "at": "2024-05-01T12:00:00"})
        assert event["at"] == datetime(2024, 5, 1, 12, tzinfo=UTC)

    def test_an_unknown_field_is_named_with_the_allowed_ones(self) -> None:
        err = refusal(colour="red")
        assert err.field == "colour"
        assert err.message.startswith("is not an event field; allowed fields are event_id")

    @pytest.mark.parametrize("bad", ["has space", "", "x" * 129, 42])
    def test_a_malformed_event_id_is_refused(self, bad: Any) -> None:
        err = refusal(event_id=bad)
        assert err.field == "event_id"
        assert err.message.startswith("event_id must be 1-128 characters")


class TestSizeLimits:
    def test_content_over_the_default_32_kib_is_refused_with_sizes(self) -> None:
        err = refusal(content="x" * (32 * 1024 + 1))
        assert err.field == "content"
        assert f"content is {32 * 1024 + 1} bytes, over the limit of {32 * 1024}" in err.message

    def test_content_size_counts_utf8_bytes_not_characters(self) -> None:
        with pytest.raises(EventValidationError) as caught:
            validate_event({**BASE, "content": "记" * 4}, limits=Limits(content_max_bytes=10))
        assert "content is 12 bytes, over the limit of 10" in caught.value.message

    def test_the_content_limit_is_configurable(self) -> None:
        limits = Limits(content_max_bytes=64 * 1024)
        event = validate_event({**BASE, "content": "x" * (40 * 1024)}, limits=limits)
        assert len(event["content"]) == 40 * 1024

    def test_meta_over_its_limit_is_refused(self) -> None:
        err = refusal(meta={"blob": "y" * (8 * 1024)})
        assert err.field == "meta"
        assert "over the limit of 8192" in err.message

    def test_meta_that_is_not_an_object_is_refused(self) -> None:
        err = refusal(meta=["a", "b"])
        assert (err.field, err.message) == ("meta", "must be a JSON object")

    def test_meta_holding_a_non_json_value_is_refused(self) -> None:
        err = refusal(meta={"when": object()})
        assert err.field == "meta"
        assert "meta must be a JSON object of plain values" in err.message

    def test_a_refusal_does_not_echo_the_content(self) -> None:
        secret_looking = "do-not-echo-" + "z" * (32 * 1024)
        err = refusal(content=secret_looking)
        assert "do-not-echo" not in str(err)


class TestBatches:
    def test_every_bad_field_of_every_event_is_listed_with_its_index(self) -> None:
        with pytest.raises(EventValidationError) as caught:
            validate_events([BASE, {**BASE, "kind": "chat", "role": "bot"}, {"content": "x"}])
        fields = [p.field for p in caught.value.problems]
        assert fields == [
            "events[1].kind",
            "events[1].role",
            "events[2].tenant",
            "events[2].agent",
        ]
        assert caught.value.field == "events[1].kind"

    def test_an_item_that_is_not_an_object_is_named_by_index(self) -> None:
        with pytest.raises(EventValidationError) as caught:
            validate_events([BASE, "just text"])  # type: ignore[list-item]
        assert caught.value.field == "events[1]"
        assert caught.value.message == "must be a JSON object with the event fields"

    def test_a_batch_over_the_maximum_is_refused(self) -> None:
        with pytest.raises(EventValidationError) as caught:
            validate_events([BASE] * 4, max_events=3)
        assert caught.value.field == "events"
        assert caught.value.message == "at most 3 events per batch; split it"

    def test_a_valid_batch_keeps_order_and_gets_distinct_ids(self) -> None:
        events = validate_events([{**BASE, "content": str(i)} for i in range(5)])
        assert [e["content"] for e in events] == ["0", "1", "2", "3", "4"]
        assert len({e["event_id"] for e in events}) == 5

    def test_the_refusal_is_a_sleepmem_validation_error(self) -> None:
        with pytest.raises(ValidationError):
            validate_events([{"content": "x"}])

    def test_an_event_instance_passes_through_unchanged(self) -> None:
        event = Event(**BASE)
        assert [Event.model_validate(e) for e in validate_events([event])] == [event]

    def test_an_event_instance_is_rechecked_under_tighter_limits(self) -> None:
        event = Event(**{**BASE, "content": "x" * 100})
        with pytest.raises(EventValidationError) as caught:
            validate_events([event], limits=Limits(content_max_bytes=50))
        assert caught.value.field == "events[0].content"


def _mostly(good: list[Any], bad: list[Any]) -> st.SearchStrategy[Any]:
    # Valid values eight times as often, so that whole events pass often enough to compare.
    return st.sampled_from(good * 8 + bad)


_REQUIRED = {
    "tenant": _mostly(["acme"], ["", "two words", None]),
    "agent": _mostly(["bot", "b" * 128], ["-bot", "b" * 129]),
}
_OPTIONAL = {
    "event_id": _mostly(["e-1"], ["", "has space", 7]),
    "user": _mostly(["u1", ""], ["a/b"]),
    "session": _mostly(["s1", "ok:1@x"], ["ü"]),
    "kind": _mostly(["message", "session_end"], ["chat", 3]),
    "role": _mostly(["user", "tool"], ["bot"]),
    "content": _mostly(["", "hi", "记" * 16], ["x" * 70, "记" * 17, 5]),
    "at": _mostly(["2024-05-01T12:00:00", "2024-05-01T12:00:00+02:00"], ["soon", "2024-13-01"]),
    "meta": _mostly([{}, {"a": 1}], [{"blob": "y" * 80}, ["x"], {"x": object()}]),
}


class TestTheWireFormMatchesTheModel:
    """The edge validates plain dicts (fast); the drain builds Event models. Same rules."""

    def test_both_know_the_same_fields(self) -> None:
        assert set(EventFields.__annotations__) == set(Event.model_fields)

    @settings(max_examples=300, deadline=None)
    @given(st.fixed_dictionaries(_REQUIRED, optional=_OPTIONAL))
    def test_an_event_is_refused_by_both_or_read_alike_by_both(self, data: dict[str, Any]) -> None:
        limits = Limits(content_max_bytes=64, meta_max_bytes=40)
        data = {"event_id": "e-1", "at": "2024-05-01T12:00:00Z", **data}
        event(f"accepted: {_accepted(data, limits)}")
        try:
            model = Event.model_validate(data, context={"limits": limits})
        except pydantic.ValidationError as exc:
            with pytest.raises(EventValidationError) as caught:
                validate_event(data, limits=limits)
            model_fields = {".".join(map(str, e["loc"])) for e in exc.errors()}
            assert {p.field for p in caught.value.problems} == model_fields
        else:
            wire = validate_event(data, limits=limits)
            assert Event.model_validate(wire, context={"limits": limits}) == model


def _accepted(data: dict[str, Any], limits: Limits) -> bool:
    try:
        Event.model_validate(data, context={"limits": limits})
    except pydantic.ValidationError:
        return False
    return True


_SECRET_NAME = "sk-proj-" + "Ab3dE5gH7jK9" * 2  # a valid name by the pattern, but a key
_PLAIN_REQUIRED = {
    "tenant": _mostly(["acme", "b" * 128], ["", "two words", None, "acme\n", _SECRET_NAME]),
    "agent": _mostly(["bot"], ["-bot", "b" * 129, b"bot"]),
}
_PLAIN_OPTIONAL = {
    "event_id": _mostly(["e-1", "caller:42"], ["", "has space", 7, None, "e-1\n", _SECRET_NAME]),
    "user": _mostly(["u1", ""], ["a/b", None, "é"]),
    "project": _mostly(["p1", ""], [3, _SECRET_NAME]),
    "session": _mostly(["s1", "ok:1@x"], ["ü", "s1\n"]),
    "kind": _mostly(["message", EventKind.feedback], ["chat", 3, Role.user]),
    "role": _mostly(["user", Role.tool], ["bot", EventKind.message]),
    "content": _mostly(
        ["", "hi", "记" * 16, "my password is hunter2!"], ["x" * 70, "a\x00b", "\ud800", 5]
    ),
    "meta": _mostly(
        [{}, {"a": 1}, {"k": {"n": [1, "x"]}}, {"pin": 1234}],
        [{"blob": "y" * 80}, ["x"], {"x": object()}, {1: "a"}, {"a": "\x00"}],
    ),
    "at": st.sampled_from([datetime(2024, 5, 1, tzinfo=UTC), "2024-05-01T12:00:00Z", "soon"]),
    "colour": st.just("blue"),
}
_DEFAULTS = st.sampled_from(
    [{}, {"tenant": "acme"}, {"tenant": "acme", "user": "u9"}, {"session": "s\n"}, {"kind": "x"}]
)
_FIXED_TIME = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def _either_way(call: Any, *, plain: bool) -> tuple[str, Any]:
    """What ``call`` answers with the plain path on or off, ids and time made repeatable."""
    from sleepmem.ingest import validation

    counter = iter(range(10**6))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(validation, "next_event_id", lambda: f"gen{next(counter)}")
        patch.setattr(validation, "utcnow", lambda: _FIXED_TIME)
        if not plain:
            patch.setattr(validation, "_plain_event", lambda *_a, **_k: None)
        try:
            answer = call()
        except EventValidationError as exc:
            return "refused", [p.as_dict() for p in exc.problems]
    events = answer if isinstance(answer, list) else [answer]
    # Values, their order and their types (an EventKind member equals its str value). A
    # generated id is any id: the plain path may draw one for an event it hands on.
    return "accepted", [[(k, type(v), _any_generated(k, v)) for k, v in e.items()] for e in events]


def _any_generated(key: str, value: Any) -> Any:
    return "gen" if key == "event_id" and value.startswith("gen") else value


# Small enough that generated contents and metas cross the limits.
_SMALL = Limits(content_max_bytes=64, meta_max_bytes=40)


def _answers_alike(call: Callable[[], Any]) -> None:
    plain = _either_way(call, plain=True)
    event(f"answer: {plain[0]}")
    assert plain == _either_way(call, plain=False)


class TestThePlainPathAnswersAsTheGeneralPathDoes:
    """Most events skip the core validator; what they get is what it would have given:
    the same refusals worded the same way, the same fields in the same order and types."""

    @settings(max_examples=400, deadline=None)
    @given(st.fixed_dictionaries(_PLAIN_REQUIRED, optional=_PLAIN_OPTIONAL), _DEFAULTS)
    def test_an_event_gets_the_same_answer_either_way(
        self, data: dict[str, Any], defaults: dict[str, str]
    ) -> None:
        _answers_alike(lambda: validate_event(data, limits=_SMALL, defaults=defaults))

    @settings(max_examples=200, deadline=None)
    @given(
        st.lists(
            st.fixed_dictionaries(_PLAIN_REQUIRED, optional=_PLAIN_OPTIONAL), max_size=3
        ),
        _DEFAULTS,
    )
    def test_a_batch_gets_the_same_answer_either_way(
        self, batch: list[dict[str, Any]], defaults: dict[str, str]
    ) -> None:
        _answers_alike(lambda: validate_events(batch, limits=_SMALL, defaults=defaults))

    def test_a_common_event_takes_the_plain_path(self) -> None:
        # Else the two tests above would compare the general path with itself.
        from sleepmem.ingest import validation

        data = {**BASE, "user": "u1", "kind": "message", "meta": {"channel": "chat"}}
        plain = validation._plain_event(data, {}, Limits())
        assert plain is not None
        assert plain["kind"] is EventKind.message

    def test_meta_changed_by_the_caller_after_the_emit_changes_nothing_accepted(self) -> None:
        meta: dict[str, Any] = {"channel": "chat"}
        accepted = validate_event({**BASE, "meta": meta})
        meta["channel"] = "sms"
        assert accepted["meta"] == {"channel": "chat"}

    def test_a_name_holding_a_secret_is_refused_on_every_later_event_too(self) -> None:
        for _ in range(2):  # the second time, from what the first one remembered
            with pytest.raises(EventValidationError) as caught:
                validate_event({**BASE, "user": _SECRET_NAME})
            assert caught.value.field == "user"
            assert "looks like a secret" in caught.value.message
