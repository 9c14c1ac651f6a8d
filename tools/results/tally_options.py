"""The command-line options every verb that selects retries shares, defined once.

MAX_TASK_RETRIES reaches mop-up's plan and the supervisor's `targets` as the same option, so its
range, default and meaning cannot drift between the verbs that read it.
"""

from __future__ import annotations

import click

from tools.results import tally_core


def max_task_retries_option(f):
    """--max-task-retries: MAX_TASK_RETRIES, 0..MAX_TASK_RETRIES_CAP, default DEFAULT_MAX_TASK_RETRIES."""
    return click.option("--max-task-retries", type=click.IntRange(min=0, max=tally_core.MAX_TASK_RETRIES_CAP),
                        default=tally_core.DEFAULT_MAX_TASK_RETRIES, show_default=True,
                        help="MAX_TASK_RETRIES: a task whose infra error survived this many attempts in a row (per "
                        "open slot) is a final error, not retried (a higher value gives such a task one more try; "
                        "0: no limit).")(f)
