"""connector_tool and ConnectorToolSource, one call at a time, on the fake Connector SDK."""

from __future__ import annotations

import dataclasses
import json
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import attrs
import pytest

from dex_agents.adapters.connectors.fence import CAN_RESEND, CLAIMED, NOT_SENT, fence_marker
from dex_agents.adapters.connectors.manifest import parse_operation_manifest
from dex_agents.builtin_loop import FrameworkToolSourceRouter
from dex_agents.connectors import (
    CONNECTOR_NOT_SENT_RETRY_LATER,
    CONNECTOR_RESULT_TRUNCATED_NOTE,
    ConnectorToolSource,
    connector_tool,
)
from dex_agents.domain.errors import ToolExecutionError, ToolOutcomeUnknownError
from dex_agents.domain.tool_calls import AgentToolCall, ToolCallStatus
from dex_agents.domain.tool_effects import ToolEffect, ToolPolicy
from dex_agents.domain.tool_step_options import ToolCallRetryPolicy, ToolCallStepOptions
from dex_agents.ports.runner import (
    AgentTurnContext,
    DeferredToolExecution,
    ToolCallStepOptionsProvider,
)
from dex_agents.ports.tool_source import ToolSource
from tests.adapters.connectors.fake_sdk import (
    Branch,
    Call,
    DexRetry,
    FakeOperation,
    RetryError,
    derive_call_id,
    returning,
)
from tests.app.fake_tool_source import execution_of

REFUND = {"charge": "ch_1", "amount": 100}


def record_of(name: str, arguments: str = "{}") -> AgentToolCall:
    return AgentToolCall(
        tool_call_id="c1",
        tool_name=name,
        arguments=arguments,
        turn_id="t1",
        tool_source_reference=name,
        effect=ToolEffect.READ,
        requires_approval=False,
        status=ToolCallStatus.APPROVED,
        deferral_order=0,
    )


def operation(name: str, branch: Branch | None = None, **fields: Any) -> FakeOperation:
    return FakeOperation("stripe", name, returning(branch or Branch("ok")), **fields)


def turn(policies: dict[str, ToolPolicy] | None = None) -> AgentTurnContext:
    return cast(AgentTurnContext, SimpleNamespace(tool_policies=policies or {}))


def _turn(*records: AgentToolCall) -> AgentTurnContext:
    """A model call of turn ``t1`` that already recorded ``records``."""
    return AgentTurnContext(
        flow_id="s1",
        turn_id="t1",
        attempt=1,
        messages=(),
        events=execution_of(record_of("x")).events,
        heartbeat=execution_of(record_of("x")).heartbeat,
        tool_calls={record.tool_call_id: record for record in records},
    )


def build(source: ConnectorToolSource, name: str, arguments: Any, policies: Any = None) -> Any:
    return source.deferred_tool_call(
        turn(policies), tool_call_id="c1", tool_name=name, arguments=json.dumps(arguments)
    )


def execution(
    name: str, arguments: Any, *, attempt: int = 1, checkpoint: str | None = None
) -> tuple[DeferredToolExecution, list[str]]:
    record = record_of(name, json.dumps(arguments))
    saved: list[str] = []

    async def save(text: str) -> None:
        saved.append(text)

    base = execution_of(record)
    return (
        DeferredToolExecution(
            flow_id=base.flow_id,
            tool_call=record,
            idempotency_key=base.idempotency_key,
            attempt=attempt,
            events=base.events,
            heartbeat=base.heartbeat,
            save_heartbeat_checkpoint=save,
            heartbeat_checkpoint=checkpoint,
            context=SimpleNamespace(step_execution_id="step-7"),
        ),
        saved,
    )


# connector_tool: nothing is exposed by default.


def test_a_tool_takes_its_name_description_schema_and_effect_from_the_manifest() -> None:
    refund = connector_tool(operation("createRefund"), "billing")
    listed = refund.listed()
    assert (listed.name, listed.description) == ("stripe_create_refund", "Refund a charge.")
    assert listed.input_schema["required"] == ["charge", "amount"]
    assert listed.effect is ToolEffect.NON_IDEMPOTENT_WRITE
    assert connector_tool(operation("listChargeIDs"), "r").name == "stripe_list_charge_ids"
    assert (
        connector_tool(operation("cancelSubscription"), "r").effect is ToolEffect.IDEMPOTENT_WRITE
    )
    assert connector_tool(operation("createRefund"), "r", name="refund").name == "refund"


@pytest.mark.parametrize("name", ["", "x" * 65, "refund money", "refund.v2", "rückerstattung"])
def test_a_name_of_your_own_must_be_one_a_model_takes(name: str) -> None:
    # A model provider refuses such a name only at the first model call; an empty
    # name once fell back to the default silently.
    with pytest.raises(ValueError, match="a connector tool name must be 1 to 64 ASCII letters"):
        connector_tool(operation("createRefund"), "r", name=name)
    assert connector_tool(operation("createRefund"), "r", name="x" * 64).name == "x" * 64


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("deleteCustomer", "lacks agent.exposed: true"),
        ("exportCharges", "agent keys this version does not know: \\['cache'\\]"),
        ("searchCharges", "uses 'pattern', which a connector tool cannot check"),
        ("noSuchOperation", "has no operation 'noSuchOperation'"),
    ],
)
def test_an_operation_the_manifest_does_not_expose_plainly_is_refused(
    name: str, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        connector_tool(operation(name), "r")


ENTRY: dict[str, Any] = {
    "kind": "mutation",
    "inputSchema": {"type": "object"},
    "requiredBranches": ["refunded"],
    "agent": {"exposed": True},
}


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([], "dex-connector.json is not a JSON object"),
        ({"connectorId": "x", "operations": []}, "operations must be an object"),
        (
            {"connectorId": "x", "operations": {"op": {**ENTRY, "requiredBranches": "refunded"}}},
            "requiredBranches must be a list of branch names",
        ),
        (
            {"connectorId": "x", "operations": {"op": {**ENTRY, "kind": ["query"]}}},
            "has kind \\['query'\\]; use 'query' or 'mutation'",
        ),
        (
            {"connectorId": "x", "operations": {"op": {**ENTRY, "description": 5}}},
            "description must be a string",
        ),
        (
            {
                "connectorId": "x",
                "operations": {"op": {**ENTRY, "executeMethodTimeoutSeconds": 1e300}},
            },
            "executeMethodTimeout is too long",
        ),
        (
            {
                "connectorId": "x",
                "operations": {"op": {**ENTRY, "retryPolicy": {"backoffCoefficient": "2"}}},
            },
            "retryPolicy.backoffCoefficient must be a number, not '2'",
        ),
        (
            {
                "connectorId": "x",
                "operations": {"op": {**ENTRY, "agent": {"exposed": True, "retry": ["safe"]}}},
            },
            "has agent.retry \\['safe'\\]; the only value is 'safe'",
        ),
    ],
)
def test_a_malformed_manifest_entry_is_refused_with_what_is_wrong(
    document: Any, message: str
) -> None:
    # A requiredBranches string once read as a set of letters: a refund that
    # succeeded then recorded outcome_unknown. The others crashed with no name.
    with pytest.raises(ValueError, match=message):
        parse_operation_manifest(document, "op")


def test_a_manifest_that_is_not_json_names_its_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "broken_connector"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "dex-connector.json").write_text('{"connectorId": ')
    monkeypatch.syspath_prepend(str(tmp_path))
    broken = FakeOperation("broken", "op", returning(Branch("ok")), "broken_connector")
    with pytest.raises(
        ValueError, match=r"^dex-connector\.json of package 'broken_connector' is not JSON: "
    ):
        connector_tool(broken, "r")


def test_the_source_refuses_two_tools_of_one_name() -> None:
    with pytest.raises(ValueError, match="two connector tools are named 'stripe_create_refund'"):
        ConnectorToolSource(
            [
                connector_tool(operation("createRefund"), "a"),
                connector_tool(operation("createRefund"), "b"),
            ]
        )


# Building calls: effect from the manifest, approval from the manifest, the tool and the policy.


def test_writes_are_ordered_and_reads_are_not() -> None:
    source = ConnectorToolSource(
        [
            connector_tool(operation("createRefund"), "r"),
            connector_tool(operation("listChargeIDs"), "r"),
        ]
    )
    assert isinstance(source, ToolSource)
    assert isinstance(source, ToolCallStepOptionsProvider)
    assert source.declared_tool_names() == ("stripe_create_refund", "stripe_list_charge_ids")
    write = build(source, "stripe_create_refund", REFUND)
    read = build(source, "stripe_list_charge_ids", {"customer": "cu_1"})
    assert (write.ordered, read.ordered) == (True, False)
    assert write.policy == ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False)
    assert read.policy == ToolPolicy(ToolEffect.READ, requires_approval=False)
    assert write.tool_source_reference == "stripe_create_refund"


def test_approval_follows_the_manifest_the_tool_and_a_session_policy_in_that_order() -> None:
    recommended = ConnectorToolSource([connector_tool(operation("cancelSubscription"), "r")])
    assert build(recommended, "stripe_cancel_subscription", {"id": "s"}).policy.requires_approval
    overridden = ConnectorToolSource(
        [connector_tool(operation("cancelSubscription"), "r", requires_approval=False)]
    )
    assert not build(overridden, "stripe_cancel_subscription", {"id": "s"}).policy.requires_approval
    policy = {"stripe_cancel_subscription": ToolPolicy(ToolEffect.READ, requires_approval=False)}
    merged = build(recommended, "stripe_cancel_subscription", {"id": "s"}, policy).policy
    assert merged == ToolPolicy(ToolEffect.IDEMPOTENT_WRITE, requires_approval=False)


def test_a_predicate_decides_per_call_and_one_that_raises_asks() -> None:
    source = ConnectorToolSource(
        [
            connector_tool(
                operation("createRefund"),
                "r",
                requires_approval=lambda arguments: arguments["amount"] > 5000,
            ),
            connector_tool(
                operation("listChargeIDs"), "r", requires_approval=lambda arguments: 1 / 0 > 0
            ),
        ]
    )
    assert build(
        source, "stripe_create_refund", {"charge": "c", "amount": 9000}
    ).policy.requires_approval
    assert not build(source, "stripe_create_refund", REFUND).policy.requires_approval
    assert build(source, "stripe_list_charge_ids", {"customer": "c"}).policy.requires_approval
    # Arguments that break the schema never run, so they never wait.
    assert not build(source, "stripe_create_refund", {"amount": 9000}).policy.requires_approval


@pytest.mark.parametrize("rule", ["no", 0, {"amount": 5000}])
def test_an_approval_rule_that_is_neither_a_bool_nor_a_predicate_is_refused(rule: Any) -> None:
    # Called per call, it raised, and a raising rule asks: every call waited silently.
    with pytest.raises(TypeError, match="requires_approval must be True, False, None or a"):
        connector_tool(operation("createRefund"), "r", requires_approval=rule)


def test_an_async_predicate_is_refused() -> None:
    # Found by an audit: the call is built inside RunModel, which cannot await it, so
    # its coroutine counted as True: every call waited, with a "never awaited" warning.
    async def large(arguments: Any) -> bool:
        return bool(arguments["amount"] > 5000)

    with pytest.raises(TypeError) as raised:
        connector_tool(operation("createRefund"), "r", requires_approval=large)  # type: ignore[arg-type]
    assert str(raised.value) == (
        "requires_approval must be a synchronous predicate of the arguments, not the "
        "coroutine function large: a call's approval is decided without awaiting"
    )


def test_arguments_that_break_the_schema_never_wait_whatever_asks() -> None:
    # They never run, so no one should be asked to approve them: not for the
    # manifest's agent.approval, requires_approval=True, or a session policy.
    source = ConnectorToolSource(
        [
            connector_tool(operation("cancelSubscription"), "r"),
            connector_tool(operation("createRefund"), "r", requires_approval=True),
        ]
    )
    asks = {"stripe_create_refund": ToolPolicy(ToolEffect.READ, requires_approval=True)}
    broken = build(source, "stripe_cancel_subscription", {}).policy
    assert broken == ToolPolicy(ToolEffect.IDEMPOTENT_WRITE, requires_approval=False)
    assert not build(source, "stripe_create_refund", {"amount": 1}, asks).policy.requires_approval
    assert build(source, "stripe_cancel_subscription", {"id": "s"}).policy.requires_approval
    assert build(source, "stripe_create_refund", REFUND, asks).policy.requires_approval


def test_a_calls_tool_step_gets_the_operations_timeout_and_at_most_three_attempts() -> None:
    source = ConnectorToolSource([connector_tool(operation("createRefund"), "r")])
    record = record_of("stripe_create_refund")
    assert source.tool_call_step_options(record) == ToolCallStepOptions(
        timeout=timedelta(seconds=30),
        retry_policy=ToolCallRetryPolicy(
            maximum_attempts=3, initial_interval=timedelta(seconds=1), backoff_coefficient=2.0
        ),
    )


async def test_a_name_the_source_does_not_have_fails_without_approval_and_never_runs() -> None:
    # Found by an audit: deferred_tool_call raised ToolExecutionError, so a runner
    # that defers the model's calls to the source failed its RunModel attempt on a
    # name the model made up, and so the turn, where the design records such a call
    # failed, unapproved (unclassified, no approval).
    refund = operation("createRefund")
    source = ConnectorToolSource([connector_tool(refund, "r")])
    call = source.deferred_tool_call(
        _turn(), tool_call_id="c1", tool_name="stripe_nope", arguments="{}"
    )
    assert call.policy == ToolPolicy(ToolEffect.UNCLASSIFIED, requires_approval=False)
    assert not call.ordered
    with pytest.raises(ToolExecutionError) as raised:
        await source.execute_deferred_tool_call(execution("stripe_nope", {})[0])
    assert str(raised.value) == "'stripe_nope' is not a tool of connector source 'connectors'"
    assert refund.runs == []


async def test_a_framework_adapter_rebuilds_a_recorded_call_of_a_tool_a_deploy_removed() -> None:
    # Found by an audit: the router rebuilds a recorded call of a tool the listing
    # lacks (replay-only) through its source, which raised ToolExecutionError, so a
    # Step-mode adapter's RunModel failed after a deploy removed the tool.
    before = FrameworkToolSourceRouter(
        [ConnectorToolSource([connector_tool(operation("createRefund"), "r")])]
    )
    listing = await before.list_tools(_turn(), [])
    arguments = json.dumps(REFUND)
    built = before.deferred_tool_call(_turn(), "c1", "stripe_create_refund", arguments, listing)
    record = attrs.evolve(
        record_of("stripe_create_refund", arguments),
        effect=built.policy.effect,
        requires_approval=bool(built.policy.requires_approval),
        ordered=built.ordered,
        tool_source_reference=built.tool_source_reference,
    )
    after = FrameworkToolSourceRouter(
        [ConnectorToolSource([connector_tool(operation("listChargeIDs"), "r")])]
    )
    listing = await after.list_tools(_turn(record), [])
    assert listing.replay_only_tools == frozenset({"stripe_create_refund"})
    rebuilt = after.deferred_tool_call(
        _turn(record), "c1", "stripe_create_refund", arguments, listing
    )
    assert rebuilt == built


# Running calls.


async def test_a_call_runs_the_operation_with_a_call_id_stable_across_attempts() -> None:
    refund = operation("createRefund", Branch("refunded", {"id": "re_1", "amount": 100}))
    source = ConnectorToolSource([connector_tool(refund, "billing")])
    first, _ = execution("stripe_create_refund", REFUND)
    again, _ = execution("stripe_create_refund", REFUND, attempt=2, checkpoint=None)
    result = await source.execute_deferred_tool_call(first)
    assert result.output == '{"amount":100,"id":"re_1"}'
    await source.execute_deferred_tool_call(again)
    expected = Call(
        derive_call_id("s1", "step-7", "createRefund"), "billing", first.idempotency_key
    )
    assert [run[:3] for run in refund.runs] == [("mutation", expected, REFUND)] * 2


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"charge": "c"}, "is missing 'amount'"),
        ({"charge": "c", "amount": 0}, "amount must be at least 1"),
        ({"charge": "c", "amount": 1, "tip": 2}, "tip is not an argument"),
        ({"charge": "c", "amount": 1, "reason": "bored"}, "reason must be one of"),
        ({"charge": 7, "amount": 1}, "charge must be string"),
    ],
)
async def test_arguments_that_break_the_schema_never_run(arguments: Any, message: str) -> None:
    refund = operation("createRefund")
    source = ConnectorToolSource([connector_tool(refund, "r")])
    with pytest.raises(ToolExecutionError, match=message):
        await source.execute_deferred_tool_call(execution("stripe_create_refund", arguments)[0])
    assert refund.runs == []


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
async def test_arguments_with_a_constant_json_lacks_never_run(constant: str) -> None:
    listed = operation("listChargeIDs")
    source = ConnectorToolSource([connector_tool(listed, "r")])
    run, _ = execution("stripe_list_charge_ids", {})
    record = attrs.evolve(run.tool_call, arguments=f'{{"customer": "c", "extra": {constant}}}')
    with pytest.raises(ToolExecutionError, match=f"are not JSON: {constant} is not a JSON value"):
        await source.execute_deferred_tool_call(dataclasses.replace(run, tool_call=record))
    assert listed.runs == []


@pytest.mark.parametrize("number", ["1e400", "-1e400"])
async def test_arguments_with_a_number_past_floats_range_never_run(number: str) -> None:
    # Found by an audit: json.loads reads 1e400 as infinity, which is no JSON value,
    # and the operation got it, where NaN and Infinity were refused.
    listed = operation("listChargeIDs")
    source = ConnectorToolSource([connector_tool(listed, "r")])
    run, _ = execution("stripe_list_charge_ids", {})
    record = attrs.evolve(run.tool_call, arguments=f'{{"customer": "c", "extra": {number}}}')
    with pytest.raises(ToolExecutionError) as raised:
        await source.execute_deferred_tool_call(dataclasses.replace(run, tool_call=record))
    assert str(raised.value) == (
        f"stripe_list_charge_ids: the arguments are not JSON: number {number} is out of range"
    )
    assert listed.runs == []


async def test_arguments_nested_too_deeply_wait_for_no_approval_and_never_run() -> None:
    refund = operation("createRefund")
    source = ConnectorToolSource([connector_tool(refund, "r")])
    deep = '{"charge": ' + "[" * 100_000 + "]" * 100_000 + "}"
    built = source.deferred_tool_call(
        turn(), tool_call_id="c1", tool_name="stripe_create_refund", arguments=deep
    )
    assert built.policy.requires_approval is False
    run, _ = execution("stripe_create_refund", REFUND)
    record = attrs.evolve(run.tool_call, arguments=deep)
    with pytest.raises(ToolExecutionError, match=r"^stripe_create_refund: .* nested too deeply$"):
        await source.execute_deferred_tool_call(dataclasses.replace(run, tool_call=record))
    assert refund.runs == []


async def test_arguments_too_deep_for_a_recursive_schema_wait_for_no_approval_and_never_run() -> (
    None
):
    # Found by an audit: JSON that json.loads read but that nests deeper than the
    # schema check can recurse raised RecursionError, which failed the RunModel
    # attempt when the call was built, and the tool Step when it ran (a Step failure).
    found = operation("filterCustomers")
    source = ConnectorToolSource([connector_tool(found, "r")])
    depth = 400
    deep = '{"filter": ' + '{"all": [' * depth + '{"email": "a@b"}' + "]}" * depth + "}"
    assert json.loads(deep)
    built = source.deferred_tool_call(
        turn(), tool_call_id="c1", tool_name="stripe_filter_customers", arguments=deep
    )
    assert built.policy.requires_approval is False
    run, _ = execution("stripe_filter_customers", {})
    record = attrs.evolve(run.tool_call, arguments=deep)
    with pytest.raises(ToolExecutionError) as raised:
        await source.execute_deferred_tool_call(dataclasses.replace(run, tool_call=record))
    assert str(raised.value) == "stripe_filter_customers: the arguments are nested too deeply"
    assert found.runs == []


async def test_branches_map_to_records_by_the_first_matching_row() -> None:
    declined = Branch("declined", error_kind="card", message="insufficient funds")
    source = ConnectorToolSource(
        [
            connector_tool(operation("createRefund", declined), "r"),
            connector_tool(
                operation("listChargeIDs", Branch("notFound", None, "lookup", "no customer")), "r"
            ),
        ]
    )
    with pytest.raises(
        ToolExecutionError,
        match=r"^stripe createRefund returned declined: card: insufficient funds$",
    ):
        await source.execute_deferred_tool_call(execution("stripe_create_refund", REFUND)[0])
    with pytest.raises(ToolExecutionError, match=r"^stripe listChargeIDs returned notFound"):
        await source.execute_deferred_tool_call(
            execution("stripe_list_charge_ids", {"customer": "c"})[0]
        )
    for branch in ("uncertain", "defect", "surprise"):
        uncertain = ConnectorToolSource(
            [connector_tool(operation("createRefund", Branch(branch)), "r")]
        )
        with pytest.raises(ToolOutcomeUnknownError):
            await uncertain.execute_deferred_tool_call(execution("stripe_create_refund", REFUND)[0])


def fenced(
    *markers: tuple[str, str | None], then: Branch | None = None, retry: bool = False
) -> FakeOperation:
    """A Mutation whose fence saves ``markers`` (state, provider ID) for this call and attempt."""

    async def script(call: Call, context: Any, arguments: Any) -> Branch:
        for state, provider_id in markers:
            await context.heartbeat(fence_marker(state, call.call_id, context.attempt, provider_id))
        if retry:
            raise RetryError("provider busy")
        return then or Branch("declined", error_kind="card", message="no")

    return FakeOperation("stripe", "createRefund", script)


async def test_a_listed_rejection_after_the_fence_claimed_a_send_is_outcome_unknown() -> None:
    source = ConnectorToolSource([connector_tool(fenced((CLAIMED, None)), "r")])
    run, saved = execution("stripe_create_refund", REFUND)
    with pytest.raises(ToolOutcomeUnknownError):
        await source.execute_deferred_tool_call(run)
    assert [json.loads(text)["dexFence"] for text in saved] == [CLAIMED]


async def test_a_can_resend_after_a_claim_without_a_provider_id_lets_the_listing_decide() -> None:
    source = ConnectorToolSource([connector_tool(fenced((CLAIMED, None), (CAN_RESEND, None)), "r")])
    with pytest.raises(ToolExecutionError, match="returned declined"):
        await source.execute_deferred_tool_call(execution("stripe_create_refund", REFUND)[0])
    provider = ConnectorToolSource(
        [connector_tool(fenced((CLAIMED, "re_9"), (CAN_RESEND, None)), "r")]
    )
    with pytest.raises(ToolOutcomeUnknownError):
        await provider.execute_deferred_tool_call(execution("stripe_create_refund", REFUND)[0])


async def test_a_retry_that_reads_an_earlier_claim_may_have_sent() -> None:
    async def script(call: Call, context: Any, arguments: Any) -> Branch:
        context.last_heartbeat_details()
        return Branch("declined")

    source = ConnectorToolSource(
        [connector_tool(FakeOperation("stripe", "createRefund", script), "r")]
    )
    call_id = derive_call_id("s1", "step-7", "createRefund")
    for checkpoint in (
        None,
        "progress 40%",
        fence_marker(CLAIMED, call_id, 1),
        fence_marker(NOT_SENT, "other", 1),
    ):
        run, _ = execution("stripe_create_refund", REFUND, attempt=2, checkpoint=checkpoint)
        with pytest.raises(ToolOutcomeUnknownError):
            await source.execute_deferred_tool_call(run)
    run, _ = execution(
        "stripe_create_refund", REFUND, attempt=2, checkpoint=fence_marker(NOT_SENT, call_id, 1)
    )
    with pytest.raises(ToolExecutionError, match="returned declined"):
        await source.execute_deferred_tool_call(run)


async def test_a_can_resend_of_a_retry_does_not_clear_an_earlier_attempts_claim() -> None:
    # canResend proves only that this attempt sent nothing; attempt 1 claimed a send
    # and may have made it, so a rejection now must not invite the model to call again.
    async def script(call: Call, context: Any, arguments: Any) -> Branch:
        context.last_heartbeat_details()
        await context.heartbeat(fence_marker(CLAIMED, call.call_id, context.attempt))
        await context.heartbeat(fence_marker(CAN_RESEND, call.call_id, context.attempt))
        return Branch("declined", error_kind="card", message="no")

    source = ConnectorToolSource(
        [connector_tool(FakeOperation("stripe", "createRefund", script), "r")]
    )
    call_id = derive_call_id("s1", "step-7", "createRefund")
    claimed = fence_marker(CLAIMED, call_id, 1)
    run, _ = execution("stripe_create_refund", REFUND, attempt=2, checkpoint=claimed)
    with pytest.raises(ToolOutcomeUnknownError):
        await source.execute_deferred_tool_call(run)
    not_sent = fence_marker(NOT_SENT, call_id, 1)
    run, _ = execution("stripe_create_refund", REFUND, attempt=2, checkpoint=not_sent)
    with pytest.raises(ToolExecutionError, match="returned declined"):
        await source.execute_deferred_tool_call(run)


async def test_a_retry_request_retries_a_read_and_settles_a_single_attempt_write() -> None:
    async def busy(call: Call, context: Any, arguments: Any) -> Branch:
        raise RetryError("rate limited")

    reads = ConnectorToolSource(
        [connector_tool(FakeOperation("stripe", "listChargeIDs", busy), "r")]
    )
    with pytest.raises(DexRetry, match="rate limited"):
        await reads.execute_deferred_tool_call(
            execution("stripe_list_charge_ids", {"customer": "c"})[0]
        )
    not_sent = ConnectorToolSource([connector_tool(fenced((NOT_SENT, None), retry=True), "r")])
    with pytest.raises(ToolExecutionError, match=CONNECTOR_NOT_SENT_RETRY_LATER):
        await not_sent.execute_deferred_tool_call(execution("stripe_create_refund", REFUND)[0])
    maybe_sent = ConnectorToolSource([connector_tool(fenced((CLAIMED, None), retry=True), "r")])
    with pytest.raises(ToolOutcomeUnknownError):
        await maybe_sent.execute_deferred_tool_call(execution("stripe_create_refund", REFUND)[0])


async def test_a_long_result_is_cut_with_the_note() -> None:
    listed = operation("listChargeIDs", Branch("listed", ["ch_" + "x" * 50] * 10))
    source = ConnectorToolSource(
        [connector_tool(listed, "r", max_result_bytes=100)], max_result_bytes=10_000
    )
    result = await source.execute_deferred_tool_call(
        execution("stripe_list_charge_ids", {"customer": "c"})[0]
    )
    assert result.output.endswith(CONNECTOR_RESULT_TRUNCATED_NOTE)
    assert len(result.output.removesuffix(CONNECTOR_RESULT_TRUNCATED_NOTE)) == 100
    assert result.truncated_output_bytes == len(
        json.dumps(["ch_" + "x" * 50] * 10, separators=(",", ":"))
    )


async def test_the_step_context_exposes_only_what_the_fence_uses() -> None:
    # The design: the operation sees the attempt, the earlier heartbeat value and
    # heartbeat, nothing of the session, the engine or the tool call.
    exposed: list[list[str]] = []

    async def script(call: Call, context: Any, arguments: Any) -> Branch:
        exposed.append(sorted(name for name in dir(context) if not name.startswith("_")))
        return Branch("refunded", {})

    source = ConnectorToolSource(
        [connector_tool(FakeOperation("stripe", "createRefund", script), "r")]
    )
    await source.execute_deferred_tool_call(execution("stripe_create_refund", REFUND)[0])
    assert exposed == [["attempt", "heartbeat", "last_heartbeat_details"]]


async def test_outside_an_engine_step_a_call_is_refused() -> None:
    source = ConnectorToolSource([connector_tool(operation("createRefund"), "r")])
    run, _ = execution("stripe_create_refund", REFUND)
    with pytest.raises(ToolExecutionError, match="only inside an engine"):
        await source.execute_deferred_tool_call(
            DeferredToolExecution(**{**vars(run), "context": None})
        )
