"""How the chat's output (``ChatOutput``) joins a model's live text to the text stored
for it: on one line, once, and forgetting what no later text can complete."""

from __future__ import annotations

from dex_agents.cli.chat_output import ChatOutput


def test_stored_text_completes_the_open_live_line() -> None:
    output = ChatOutput()
    key = ("turn-1", "RunModel-1", 1)
    output.arrive(key, "Hel")
    assert output.flush() == "agent> Hel"
    output.arrive(key, "lo")
    assert output.stored("turn-1", "Hello there") == "lo there\n"
    output.arrive(key, " late")  # a delta read after its message: already shown
    assert output.flush() == ""
    assert output.line("tool> x -> succeeded") == "tool> x -> succeeded\n"


def test_a_line_of_another_kind_ends_the_open_live_line_first() -> None:
    output = ChatOutput()
    output.arrive(("turn-1", "RunModel-1", 1), "partial")
    assert output.flush() == "agent> partial"
    assert output.line("turn failed: boom") == "\nturn failed: boom\n"
    assert output.close() == ""


def test_deltas_read_after_their_stored_text_are_not_shown_again() -> None:
    output = ChatOutput()
    assert output.stored("turn-1", "Hello") == "agent> Hello\n"
    key = ("turn-1", "RunModel-1", 1)
    output.arrive(key, "Hel")
    assert output.flush() == ""
    output.arrive(key, "lo")
    assert output.flush() == ""
    # Another model call of the same turn that starts alike is shown: the text was claimed.
    output.arrive(("turn-1", "RunModel-2", 1), "Hel")
    assert output.flush() == "agent> Hel"


def test_held_back_deltas_that_say_something_else_are_shown_after_all() -> None:
    output = ChatOutput()
    assert output.stored("turn-1", "Hello") == "agent> Hello\n"
    key = ("turn-1", "RunModel-2", 1)
    output.arrive(key, "Hel")
    assert output.flush() == ""
    output.arrive(key, "p me")
    assert output.flush() == "agent> Help me"
    assert output.stored("turn-1", "Help me") == "\n"


def test_a_later_turn_forgets_the_calls_whose_text_was_shown() -> None:
    # A chat that follows a session for days kept every model call's text, and walked
    # them all at each stored text and flush.
    output = ChatOutput()
    for turn in range(1, 201):
        key = (f"turn-{turn}", "RunModel-1", 1)
        output.arrive(key, "Hel")
        # The previous turn's stored text comes with the snapshot read after this delta.
        if turn > 1:
            assert output.stored(f"turn-{turn - 1}", "Hello") == "lo\n"
        assert output.flush() == "agent> Hel"
        output.arrive(key, "lo")
        assert output.kept_calls <= 2
    assert output.stored("turn-200", "Hello") == "lo\n"
    # Every earlier turn's call has been forgotten: the next turn's delta leaves its own alone.
    output.arrive(("turn-201", "RunModel-1", 1), "Next")
    assert output.kept_calls == 1
    assert output.flush() == "agent> Next"


def test_live_text_of_another_turn_is_never_taken_for_a_stored_text() -> None:
    output = ChatOutput()
    assert output.stored("turn-1", "Done.") == "agent> Done.\n"
    output.arrive(("turn-2", "RunModel-3", 1), "Done.")
    assert output.flush() == "agent> Done."


def test_a_later_turn_forgets_the_stored_texts_shown_before_their_deltas() -> None:
    # A chat whose Stream lagged behind its snapshots kept every such text for its life.
    output = ChatOutput()
    for turn in range(1, 201):
        assert output.stored(f"turn-{turn}", "Hello") == "agent> Hello\n"
        key = (f"turn-{turn}", "RunModel-1", 1)
        output.arrive(key, "Hel")
        assert output.flush() == ""  # a late copy of the text shown: held back
        output.arrive(key, "lo")
        assert output.flush() == ""
        assert output.kept_early_texts <= 1
    # The next turn's delta that starts alike is its own text, shown.
    output.arrive(("turn-201", "RunModel-1", 1), "Hel")
    assert output.flush() == "agent> Hel"
    assert output.kept_early_texts == 0


def test_a_retried_model_calls_stored_text_completes_the_retry_not_the_failed_attempt() -> None:
    output = ChatOutput()
    failed, retried = ("turn-1", "RunModel-1", 1), ("turn-1", "RunModel-1", 2)
    output.arrive(failed, "Hel")
    assert output.flush() == "agent> Hel"  # shown before the attempt failed
    output.arrive(retried, "Hel")
    assert output.flush() == "\nagent> Hel"
    # Before, the failed attempt's text claimed it: 'agent> lo' showed below the retry's.
    assert output.stored("turn-1", "Hello") == "lo\n"
    output.arrive(("turn-2", "RunModel-3", 1), "Next")
    assert output.kept_calls == 1  # the failed attempt goes with the calls shown


def test_a_retry_is_held_back_as_a_copy_of_a_stored_text_shown_before_it() -> None:
    output = ChatOutput()
    output.arrive(("turn-1", "RunModel-1", 1), "Hel")  # taken with the snapshot that stored it
    assert output.stored("turn-1", "Hello") == "agent> Hello\n"  # the failed attempt claimed it
    output.arrive(("turn-1", "RunModel-1", 2), "Hello")
    # Before, the failed attempt kept the stored text as the one it copied: the retry's
    # text showed it again.
    assert output.flush() == ""


def test_a_later_turn_forgets_the_calls_that_never_got_a_stored_text() -> None:
    # A cancelled turn's model call kept its text for the life of the chat.
    output = ChatOutput()
    for turn in range(1, 201):
        output.arrive((f"turn-{turn}", "RunModel-1", 1), "Hel")
        assert output.flush().endswith("agent> Hel")
        if turn % 2:  # stored; the other turns are cancelled before their text is
            assert output.stored(f"turn-{turn}", "Hello") == "lo\n"
        assert output.kept_calls <= 2
    # The last turn's call may still get its stored text, with the next turn's first delta.
    output.arrive(("turn-201", "RunModel-1", 1), "Next")
    assert output.stored("turn-200", "Hello") == "lo\n"
    output.arrive(("turn-202", "RunModel-1", 1), "Next")
    assert output.kept_calls == 2  # turn-201's, which may still get its text, and this one
