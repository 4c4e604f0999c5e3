"""The session sweep of every gateway process (``UpstreamPool``, opsux5) sleeps its period,
SCOUT_MCP_SESSION_SWEEP_SECONDS: it woke every second to compare clocks, whatever the period said, in every
uvicorn worker (opsux6), and so did a sweep turned off (0).

The pool runs its real lifespan (``UpstreamPool.running``) on trio with a virtual clock that jumps ahead whenever every
task sleeps, so an hour passes at once and nothing is timed; a trio instrument counts the steps the sweep's task takes
(each wake-up is one). That its sweeps close retired servers' sessions is test_faults'
``test_an_archived_servers_process_is_stopped_by_the_next_sweep``."""

from __future__ import annotations

import anyio
import pytest
from trio.abc import Instrument
from trio.lowlevel import Task
from trio.testing import MockClock

from mcpgateway.upstreams import UpstreamPool

HOUR = 3600


class SweepSteps(Instrument):
    """How many times the sweep's task ran (woke up)."""

    def __init__(self) -> None:
        self.count = 0

    def before_task_step(self, task: Task) -> None:
        if task.name.endswith(".sweeping"):
            self.count += 1


def _steps_in_an_hour() -> int:
    steps = SweepSteps()

    async def main() -> None:
        async with UpstreamPool().running():
            await anyio.sleep(HOUR)

    clock = MockClock(autojump_threshold=0)
    anyio.run(main, backend="trio", backend_options={"clock": clock, "instruments": [steps]})
    return steps.count


@pytest.mark.parametrize("period", [600, 1500])
def test_the_sweep_wakes_once_per_period(settings, period):
    settings.SCOUT_MCP_SESSION_SWEEP_SECONDS = period
    sweeps = HOUR // period
    # One step to start, one per sweep (a sweep with no session open reads nothing), one to be cancelled at the end.
    assert sweeps <= _steps_in_an_hour() <= sweeps + 2


def test_a_sweep_turned_off_never_wakes(settings):
    settings.SCOUT_MCP_SESSION_SWEEP_SECONDS = 0
    assert _steps_in_an_hour() <= 1
