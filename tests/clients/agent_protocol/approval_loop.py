# mypy: ignore-errors
"""An approval over the official Agent Protocol v1, with the unmodified official client
(``agent-protocol-client==1.1.0``, pinned in requirements.txt next to this file).

Run with the python of this directory's own virtualenv:

    tests/clients/agent_protocol/.venv/bin/python approval_loop.py BASE_URL TOKEN approve|reject

It creates a task whose run stops on a tool call that needs approval, executes bodiless
steps until one is the ``approval`` step (or the last), executes one more bodiless step (the
approval step again, as it stands), answers it with a step whose ``additional_input`` is
``{interruptId, approved}``, then executes bodiless steps to the last one; then the answer
again (late) and an unknown interrupt (the errors the client raises). It prints one JSON
document with everything it saw; tests/agent_runs/protocols/agent_protocol/
test_approvals_client.py asserts on it.
"""

import asyncio
import json
import sys

from agent_protocol_client import (
    AgentApi,
    ApiClient,
    Configuration,
    StepRequestBody,
    TaskRequestBody,
)
from agent_protocol_client.exceptions import ApiException

TASK_INPUT = "Put a standup in my calendar"
MAX_STEPS = 10


def step_seen(step):
    if step is None:
        return None
    return {
        "type": type(step).__name__,
        "task_id": step.task_id,
        "step_id": step.step_id,
        "name": step.name,
        "status": step.status,
        "input": step.input,
        "additional_input": step.additional_input,
        "output": step.output,
        "output_type": type(step.output).__name__,
        "additional_output": step.additional_output,
        "is_last": step.is_last,
    }


async def error_of(call):
    try:
        answer = await call
    except ApiException as error:
        return {"type": type(error).__name__, "status": error.status, "body": error.body}
    return {"type": "no error", "answer": repr(answer)}


async def main(base_url, token, approved):
    configuration = Configuration(host=base_url)
    async with ApiClient(
        configuration, header_name="Authorization", header_value=f"Bearer {token}"
    ) as api_client:
        api = AgentApi(api_client)
        seen = {}
        task = await api.create_agent_task(task_request_body=TaskRequestBody(input=TASK_INPUT))
        task_id = task.task_id
        seen["task_id"] = task_id

        before = []
        while len(before) < MAX_STEPS:
            step = await api.execute_agent_task_step(task_id=task_id)
            before.append(step_seen(step))
            if step is None or step.is_last or step.name == "approval":
                break
        seen["before"] = before
        if not before or not before[-1] or before[-1]["name"] != "approval":
            return seen
        approval = before[-1]
        again = await api.execute_agent_task_step(task_id=task_id)
        seen["again"] = step_seen(again)

        interrupt_id = approval["additional_output"]["interrupt"]["id"]
        answer = {"interruptId": interrupt_id, "approved": approved}
        answered = await api.execute_agent_task_step(
            task_id=task_id, step_request_body=StepRequestBody(additional_input=answer)
        )
        seen["answered"] = step_seen(answered)

        after = []
        while len(after) < MAX_STEPS:
            step = await api.execute_agent_task_step(task_id=task_id)
            after.append(step_seen(step))
            if step is None or step.is_last:
                break
        seen["after"] = after

        steps = await api.list_agent_task_steps(task_id=task_id, current_page=1, page_size=100)
        seen["steps"] = [step_seen(step) for step in steps.steps]
        seen["approval_got"] = step_seen(
            await api.get_agent_task_step(task_id=task_id, step_id=approval["step_id"])
        )
        seen["errors"] = {
            "late": await error_of(
                api.execute_agent_task_step(
                    task_id=task_id, step_request_body=StepRequestBody(additional_input=answer)
                )
            ),
            "unknown": await error_of(
                api.execute_agent_task_step(
                    task_id=task_id,
                    step_request_body=StepRequestBody(
                        additional_input={"interruptId": "int-unknown", "approved": True}
                    ),
                )
            ),
        }
        return seen


if __name__ == "__main__":
    base_url, token, verdict = sys.argv[1], sys.argv[2], sys.argv[3]
    seen = asyncio.run(main(base_url, token, verdict == "approve"))
    print(json.dumps(seen, ensure_ascii=False))
