# mypy: ignore-errors
"""agbenchmark's loop over the official Agent Protocol v1, with the unmodified official client
(``agent-protocol-client==1.1.0``, pinned in requirements.txt next to this file).

Run with the python of this directory's own virtualenv (the client is aiohttp + pydantic v1):

    tests/clients/agent_protocol/.venv/bin/python agbenchmark_loop.py BASE_URL TOKEN WORKDIR

``BASE_URL`` is the server's address without ``/ap/v1`` (the client appends its paths to its
``host``). It drives a task as AutoGPT's ``benchmark/agbenchmark/agent_api_interface.py`` does:
create the task, upload its input artifacts, execute steps with no body until one is the
last (or the client gives no step), then list and download the artifacts. Then a second turn
(a step with an input, then bodiless steps to the last one), the read routes, and the errors
the client raises. It prints one JSON document on stdout with everything it saw; the pytest
side (tests/agent_runs/protocols/agent_protocol/test_official_client.py) asserts on it.
"""

import asyncio
import hashlib
import json
import sys
import uuid
from pathlib import Path

from agent_protocol_client import (
    AgentApi,
    ApiClient,
    Configuration,
    StepRequestBody,
    TaskRequestBody,
)
from agent_protocol_client.exceptions import ApiException

TASK_INPUT = "Summarise the brief I attached"
SECOND_INPUT = "And what is on my calendar?"
UPLOAD_RELATIVE_DIR = "notes"
UPLOAD_NAME = "brief.txt"
UPLOAD_BYTES = "Meet Bob at 10.\nLunch at noon: café ☕\n".encode()
MAX_STEPS = 10  # a turn that never reaches is_last stops here (and the test says so)


def artifact_seen(artifact):
    return {
        "type": type(artifact).__name__,
        "artifact_id": artifact.artifact_id,
        "agent_created": artifact.agent_created,
        "file_name": artifact.file_name,
        "relative_path": artifact.relative_path,
    }


def step_seen(step):
    """What the client made of a step answer: ``None`` is what it gives for a status it does
    not deserialize (a 201), silently."""
    if step is None:
        return None
    return {
        "type": type(step).__name__,
        "task_id": step.task_id,
        "step_id": step.step_id,
        "name": step.name,
        "status": step.status,
        "input": step.input,
        "output": step.output,
        "output_type": type(step.output).__name__,
        "additional_output": step.additional_output,
        "artifacts": [artifact_seen(artifact) for artifact in step.artifacts],
        "is_last": step.is_last,
    }


def task_seen(task):
    return {
        "type": type(task).__name__,
        "task_id": task.task_id,
        "input": task.input,
        "artifacts": [artifact_seen(artifact) for artifact in task.artifacts],
    }


def pagination_seen(pagination):
    return {
        "total_items": pagination.total_items,
        "total_pages": pagination.total_pages,
        "current_page": pagination.current_page,
        "page_size": pagination.page_size,
    }


def error_seen(error):
    return {"type": type(error).__name__, "status": error.status, "body": error.body}


async def until_last(api, task_id, step):
    """agbenchmark's loop from ``step``, a turn's first: bodiless steps until the step is the
    last or the client gives none."""
    steps = []
    while True:
        steps.append(step_seen(step))
        if not step or step.is_last or len(steps) >= MAX_STEPS:
            return steps
        step = await api.execute_agent_task_step(task_id=task_id)


async def upload_artifacts(api, task_id, artifacts_in):
    """agbenchmark's upload: each file under ``artifacts_in`` with its folder as the path."""
    uploaded = []
    for file_path in sorted(p for p in artifacts_in.rglob("*") if p.is_file()):
        relative_path = (
            "/".join(str(file_path).split("artifacts_in/", 1)[-1].split("/")[:-1]) or None
        )
        artifact = await api.upload_agent_task_artifacts(
            task_id=task_id, file=str(file_path), relative_path=relative_path
        )
        uploaded.append(artifact_seen(artifact))
    return uploaded


async def download_artifacts(api, task_id):
    """agbenchmark's download: list the task's artifacts and fetch each one."""
    listed = await api.list_agent_task_artifacts(task_id=task_id)
    artifacts = []
    for artifact in listed.artifacts:
        content = await api.download_agent_task_artifact(
            task_id=task_id, artifact_id=artifact.artifact_id
        )
        artifacts.append(
            {
                **artifact_seen(artifact),
                "content_type": type(content).__name__,
                "text": bytes(content).decode("utf-8", errors="replace"),
                "sha256": hashlib.sha256(bytes(content)).hexdigest(),
            }
        )
    return {"artifacts": artifacts, "pagination": pagination_seen(listed.pagination)}


async def expect_error(call):
    try:
        answer = await call
    except ApiException as error:
        return error_seen(error)
    return {"type": "no error", "answer": repr(answer)}


async def main(base_url, token, workdir):
    artifacts_in = workdir / "artifacts_in"
    (artifacts_in / UPLOAD_RELATIVE_DIR).mkdir(parents=True, exist_ok=True)
    (artifacts_in / UPLOAD_RELATIVE_DIR / UPLOAD_NAME).write_bytes(UPLOAD_BYTES)

    configuration = Configuration(host=base_url)
    async with ApiClient(
        configuration, header_name="Authorization", header_value=f"Bearer {token}"
    ) as api_client:
        api = AgentApi(api_client)
        seen = {"uploaded_text": UPLOAD_BYTES.decode()}

        task = await api.create_agent_task(
            task_request_body=TaskRequestBody(input=TASK_INPUT, additional_input=None)
        )
        seen["created"] = None if task is None else task_seen(task)
        if task is None:  # the 201 regression: nothing more to drive
            return seen
        task_id = task.task_id

        seen["uploaded"] = await upload_artifacts(api, task_id, artifacts_in)
        first = await api.execute_agent_task_step(task_id=task_id)
        seen["first_turn"] = await until_last(api, task_id, first)
        seen["after_first_turn"] = await download_artifacts(api, task_id)

        first = await api.execute_agent_task_step(
            task_id=task_id, step_request_body=StepRequestBody(input=SECOND_INPUT)
        )
        seen["second_turn"] = await until_last(api, task_id, first)
        seen["after_second_turn"] = await download_artifacts(api, task_id)

        tasks = await api.list_agent_tasks(current_page=1, page_size=100)
        seen["tasks"] = {
            "tasks": [task_seen(t) for t in tasks.tasks],
            "pagination": pagination_seen(tasks.pagination),
        }
        seen["task"] = task_seen(await api.get_agent_task(task_id=task_id))
        steps = await api.list_agent_task_steps(task_id=task_id, current_page=1, page_size=100)
        seen["steps"] = {
            "steps": [step_seen(s) for s in steps.steps],
            "pagination": pagination_seen(steps.pagination),
        }
        seen["steps_got"] = [
            step_seen(await api.get_agent_task_step(task_id=task_id, step_id=s.step_id))
            for s in steps.steps
        ]
        small_page = await api.list_agent_task_steps(task_id=task_id, current_page=2, page_size=4)
        seen["steps_page_2_of_4"] = {
            "steps": [s.step_id for s in small_page.steps],
            "pagination": pagination_seen(small_page.pagination),
        }

        unknown = str(uuid.uuid4())
        seen["errors"] = {
            "step_after_last_without_input": await expect_error(
                api.execute_agent_task_step(task_id=task_id)
            ),
            "unknown_task": await expect_error(api.get_agent_task(task_id=unknown)),
            "step_of_unknown_task": await expect_error(
                api.execute_agent_task_step(task_id=unknown)
            ),
            "unknown_step": await expect_error(
                api.get_agent_task_step(task_id=task_id, step_id=unknown)
            ),
            "unknown_artifact": await expect_error(
                api.download_agent_task_artifact(task_id=task_id, artifact_id=unknown)
            ),
        }
        return seen


if __name__ == "__main__":
    base_url, token, workdir = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    print(json.dumps(asyncio.run(main(base_url, token, workdir)), ensure_ascii=False))
