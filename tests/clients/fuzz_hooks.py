"""Schemathesis hooks for tests/clients/fuzz.

The REST API's long-polls wait up to 50 seconds for something to arrive, as
the document says; a fuzzer that asked for 50 seconds on every case would
spend its whole run waiting. So each wait a case asks for is shortened to
at most a second, just before it is sent: any number of seconds above one,
a huge one too, becomes one (how the relay clamps a huge wait to 50 s is
held by the unit tests of wire/whole.rs and the contract tests, not here),
while every other value the fuzzer made (a negative, a fraction, a string,
a boolean, a null) reaches the relay as it was made; and a channel's wait
that names none (30 seconds) waits one. A stream never ends by itself: its
status and headers come at once, and its request is given a second, not
the run's five, before the fuzzer lets it go.
"""

import schemathesis

WAITS = ("timeout_s", "timeout_seconds", "wait_seconds", "wait_for_reply_seconds")


def _shorten(values):
    if not isinstance(values, dict):
        return
    for name in WAITS:
        value = values.get(name)
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            continue
        if isinstance(value, bool) or not seconds > 1:
            continue
        values[name] = 1 if isinstance(value, (int, float)) else "1"


@schemathesis.hook
def before_call(ctx, case, kwargs):
    if case.operation.path.endswith("/stream"):
        kwargs["timeout"] = 1
    # A channel's wait waits 30 seconds when no timeout is given.
    if case.operation.path.endswith("/wait"):
        if case.query is None:
            case.query = {}
        if isinstance(case.query, dict):
            case.query.setdefault("timeout_s", 1)
    _shorten(case.query)
    _shorten(case.body)
