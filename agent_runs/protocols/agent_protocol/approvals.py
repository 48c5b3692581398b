"""The Agent Protocol's answer to an approval step (``additional_input: {interruptId,
approved, arguments?, reason?}`` on ``POST …/steps`` of either set, or on the spec set's
``POST /api/tasks/:id/resume``), made by the core's rules (services/interrupts.py): a wrong
or late answer is the core's error (404, 409, 410, 422) with nothing written, and of two
answers at once, through any protocols, exactly one wins (both take the thread's lock)."""

from django.contrib.auth.models import AbstractBaseUser

from agent_runs.errors import InterruptNotAnApproval, InterruptNotFound
from agent_runs.models import Interrupt, Run, Thread
from agent_runs.protocols.agent_protocol.inbound import ApprovalAnswer
from agent_runs.selectors.interrupts import interrupt_get_for_user
from agent_runs.services.interrupts import interrupt_answer
from agent_runs.services.run_request import run_keeps_answer, run_step_budget
from agent_runs.services.runs import RunOptions, run_create


def approval_answer(*, user: AbstractBaseUser, thread: Thread, answer: ApprovalAnswer) -> Interrupt:
    """Answer one approval of the task ``thread`` (another task's, or a stranger's, is
    ``InterruptNotFound``); the interrupt as it is now, with its runs.

    The run that goes on with the held reply is made once the run's last open approval is
    answered, and goes as the held run went: straight through (``interrupt_answer`` makes
    and queues it), or, for a run the official set steps through, parked before its first
    stage (``run_create`` with the answer as a resume and a step budget of 0), so that the
    client's next step runs the next stage."""
    interrupt = interrupt_get_for_user(user=user, interrupt_id=answer.interrupt_id)
    if interrupt.thread_id != thread.pk:
        raise InterruptNotFound(answer.interrupt_id)
    if interrupt.kind != Interrupt.Kind.APPROVAL:
        raise InterruptNotAnApproval(interrupt.id)
    stepped = run_step_budget(interrupt.run) is not None
    others_open = (
        Interrupt.objects.filter(run_id=interrupt.run_id, status=Interrupt.Status.PENDING)
        .exclude(pk=interrupt.pk)
        .exists()
    )
    if stepped and interrupt.status == Interrupt.Status.PENDING and not others_open:
        # The run's last open approval: answered by the run that goes on (under the
        # thread's lock, the resume's rules: closed meanwhile is a 409, expired a 410).
        run_create(
            user=user,
            run_input=answer.run_input(thread_id=thread.pk),
            options=RunOptions(step_budget=0, answer_artifact=run_keeps_answer(interrupt.run)),
            protocol=Run.Protocol.AGENT_PROTOCOL,
        )
    else:
        interrupt_answer(user=user, interrupt_id=interrupt.id, payload=answer.payload())
    return interrupt_get_for_user(user=user, interrupt_id=interrupt.id)
