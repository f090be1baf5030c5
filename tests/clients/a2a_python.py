"""The official A2A Python SDK (a2a-sdk, pinned in requirements.txt) against
a relay, as `tests/relay/a2a.rs` drives it: one JSON line per step on stdout;
between steps it waits for a line on stdin, while the test acts as the
recipient.

  python a2a_python.py AGENT_URL SENDER_TOKEN OTHER_TOKEN
"""

import asyncio
import json
import sys
import uuid

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.helpers import get_artifact_text, get_message_text
from a2a.types.a2a_pb2 import GetTaskRequest, Message, Part, Role, SendMessageRequest, TaskState


def say(**step):
    print(json.dumps(step), flush=True)


def wait_for_the_test():
    sys.stdin.readline()


def bearer(token):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.AsyncClient(headers=headers, timeout=60)


async def client_for(url, token, streaming):
    """Streaming (the card offers it), or SendMessage returning at once."""
    config = ClientConfig(httpx_client=bearer(token), streaming=streaming, polling=not streaming)
    return await ClientFactory(config).create_from_url(url)


def question(text):
    return SendMessageRequest(
        message=Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)])
    )


def standing(task):
    return {
        "id": task.id,
        "context": task.context_id,
        "state": TaskState.Name(task.status.state),
        "text": get_message_text(task.status.message),
        "artifacts": [get_artifact_text(a) for a in task.artifacts],
    }


async def send(client, text, first=lambda task: None):
    """The task the question became, as the last event left it, and the
    states the events went through; `first` is told of the first."""
    task, states = None, []
    async for event in client.send_message(question(text)):
        kind = event.WhichOneof("payload")
        if kind == "task":
            task = standing(event.task)
        elif kind == "status_update":
            update = event.status_update
            task.update(state=TaskState.Name(update.status.state), text=get_message_text(update.status.message))
        else:
            raise RuntimeError(f"an event of kind {kind}")
        states.append(task["state"])
        if len(states) == 1:
            first(task)
    return dict(task, states=states)


async def main():
    url, token, other = sys.argv[1:4]
    card = await A2ACardResolver(bearer(None), url).get_agent_card()
    say(step="card", name=card.name, url=card.supported_interfaces[0].url,
        binding=card.supported_interfaces[0].protocol_binding)

    sender = await client_for(url, token, streaming=False)
    task = await send(sender, "which port does staging use?")
    say(step="sent", **task)
    wait_for_the_test()
    say(step="read", **standing(await sender.get_task(GetTaskRequest(id=task["id"]))))
    wait_for_the_test()
    say(step="answered", **standing(await sender.get_task(GetTaskRequest(id=task["id"]))))

    # Someone else, and nobody: the same card, but not the task.
    for who, credential in (("other", other), ("nobody", None)):
        client = await client_for(url, credential, streaming=False)
        try:
            found = await client.get_task(GetTaskRequest(id=task["id"]))
            say(step=who, found=standing(found))
        except Exception as refused:  # the SDK's own error types, named below
            say(step=who, error=type(refused).__name__, message=str(refused))

    # Streaming, as the card offers: each change, until the answer.
    # The test answers once the stream has said where the task stands.
    streaming = await client_for(url, token, streaming=True)
    asked = await send(streaming, "ready to deploy?", first=lambda task: say(step="asking", **task))
    say(step="streamed", **asked)


asyncio.run(main())
