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


async def client_for(url, token, polling):
    config = ClientConfig(httpx_client=bearer(token), polling=polling)
    return await ClientFactory(config).create_from_url(url)


def question(text):
    return SendMessageRequest(
        message=Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)])
    )


async def send(client, text):
    async for event in client.send_message(question(text)):
        if event.WhichOneof("payload") == "task":
            return event.task
    raise RuntimeError("SendMessage answered with no task")


def standing(task):
    return {
        "id": task.id,
        "context": task.context_id,
        "state": TaskState.Name(task.status.state),
        "text": get_message_text(task.status.message),
        "artifacts": [get_artifact_text(a) for a in task.artifacts],
    }


async def main():
    url, token, other = sys.argv[1:4]
    card = await A2ACardResolver(bearer(None), url).get_agent_card()
    say(step="card", name=card.name, url=card.supported_interfaces[0].url,
        binding=card.supported_interfaces[0].protocol_binding)

    sender = await client_for(url, token, polling=True)
    task = await send(sender, "which port does staging use?")
    say(step="sent", **standing(task))
    wait_for_the_test()
    say(step="read", **standing(await sender.get_task(GetTaskRequest(id=task.id))))
    wait_for_the_test()
    say(step="answered", **standing(await sender.get_task(GetTaskRequest(id=task.id))))

    # Someone else, and nobody: the same card, but not the task.
    for who, credential in (("other", other), ("nobody", None)):
        client = await client_for(url, credential, polling=True)
        try:
            found = await client.get_task(GetTaskRequest(id=task.id))
            say(step=who, found=standing(found))
        except Exception as refused:  # the SDK's own error types, named below
            say(step=who, error=type(refused).__name__, message=str(refused))

    # Blocking (no returnImmediately): the send waits for the answer.
    blocking = await client_for(url, token, polling=False)
    say(step="asking")
    say(step="blocked", **standing(await send(blocking, "ready to deploy?")))


asyncio.run(main())
