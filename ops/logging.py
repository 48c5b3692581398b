"""Log records that name their run: ``run_id`` and ``thread_id`` on every record made while a
job executes a run (``agent_runs.log_context``), as JSON fields (``LOG_FORMAT=json``) or
at the end of a text line (``LOG_FORMAT=text``)."""

import logging

from agent_runs.log_context import run_id_var, thread_id_var


class RunContextFilter(logging.Filter):
    """Adds ``run_id`` and ``thread_id`` to the records made inside a run (none outside)."""

    def filter(self, record: logging.LogRecord) -> bool:
        run_id = run_id_var.get()
        if run_id is not None:
            record.run_id = run_id
            record.thread_id = thread_id_var.get()
        return True


class TextFormatter(logging.Formatter):
    """``time level logger message``, then ``run_id=… thread_id=…`` inside a run."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        run_id = getattr(record, "run_id", None)
        if run_id is None:
            return line
        head, newline, rest = line.partition("\n")  # after the message, before a traceback
        return (
            f"{head} run_id={run_id} thread_id={getattr(record, 'thread_id', None)}{newline}{rest}"
        )
