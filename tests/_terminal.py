"""What a child process started by a test gets from a terminal that the suite may lack."""

from __future__ import annotations

import signal


def ctrl_c_as_in_a_terminal() -> None:
    """`preexec_fn` for a child that a test interrupts with SIGINT: the signal's default
    disposition, as a terminal's foreground process has it. A suite started as a
    background job by a shell without job control inherits SIGINT ignored, and so would
    the child (Python then installs no KeyboardInterrupt handler): Ctrl-C would do
    nothing, which is not what such a test asks about."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
