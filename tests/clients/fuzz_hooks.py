"""Schemathesis hooks for tests/clients/fuzz.

The REST API's long-polls wait up to 50 seconds for something to arrive, as
the document says; a fuzzer that asked for 50 seconds on every case would
spend its whole run waiting. So each wait a case asks for is shortened to
at most a second, just before it is sent: the relay still sees every other
value the fuzzer made (a negative, a string, a huge number are left as
they are), only a positive number of seconds above one waits one, and a
channel's wait that names none (30 seconds) waits one.
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
def before_call(ctx, case, **kwargs):
    # A channel's wait waits 30 seconds when no timeout is given.
    if case.operation.path.endswith("/wait"):
        if case.query is None:
            case.query = {}
        if isinstance(case.query, dict):
            case.query.setdefault("timeout_s", 1)
    _shorten(case.query)
    _shorten(case.body)
