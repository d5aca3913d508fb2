"""Drives `snowpea mcp serve` with the official MCP Python SDK (PyPI `mcp`, its stdio client
and ClientSession), issue 38. Run by front/mcp/tests/mcp_client.rs against a real suite
with the scripted provider; written against the MCP spec and the SDK, not the server code.

Env: SNOWPEA_BIN (the snowpea binary), SNOWPEA_TEST_HOME (the suite's home), WORKDIR (the
project folder). Talks to the Rust test with JSON lines on stdout ({"event": ...}); the Rust
side answers "native" approvals from a second native client. Any failed check raises
(exit code 1) with the reason; every wait is bounded.
"""

import json
import os
import sys

import anyio
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client

BIN = os.environ["SNOWPEA_BIN"]
HOME = os.environ["SNOWPEA_TEST_HOME"]
WORKDIR = os.environ["WORKDIR"]
WAIT = 60


def say(event, **fields):
    print(json.dumps({"event": event, **fields}), flush=True)


def check(cond, what):
    if not cond:
        raise AssertionError(f"check failed: {what}")


def text_of(result):
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def server():
    return StdioServerParameters(command=BIN, args=["mcp", "serve", "--home", HOME], cwd=WORKDIR)


class Host:
    """One MCP host connection: records progress, elicitations and list-changed notices."""

    def __init__(self, elicit_answer=None):
        self.elicit_answer = elicit_answer
        self.elicitations = []
        self.notices = []

    async def elicitation(self, context, params):
        self.elicitations.append(params)
        return self.elicit_answer

    async def messages(self, message):
        if isinstance(message, types.ServerNotification):
            message = message.root if hasattr(message, "root") else message
        self.notices.append(type(message).__name__)

    def session(self, read, write):
        kwargs = {"message_handler": self.messages}
        if self.elicit_answer is not None:
            kwargs["elicitation_callback"] = self.elicitation
        return ClientSession(read, write, **kwargs)


async def call(session, name, args, progress=None):
    with anyio.fail_after(WAIT):
        return await session.call_tool(name, args, progress_callback=progress)


async def history(session, session_id):
    result = await call(session, "snowpea_session_history", {"sessionId": session_id})
    check(not result.is_error, f"history: {text_of(result)}")
    return text_of(result)


async def main_host():
    """Elicitation-capable host: listings, a turn with progress, a follow-up, cancellation,
    an approval answered through elicitation, memory, resources and argument errors."""
    host = Host(elicit_answer=types.ElicitResult(action="accept", content={"decision": "allow"}))
    async with stdio_client(server()) as (read, write):
        async with host.session(read, write) as session:
            with anyio.fail_after(WAIT):
                init = await session.initialize()
            check(init.server_info.name == "snowpea", f"server name {init.server_info.name}")
            check(init.capabilities.tools is not None, "tools capability")
            check(init.capabilities.resources and init.capabilities.resources.list_changed, "resources.list_changed")
            check(init.capabilities.prompts is not None, "prompts capability")

            tools = {t.name: t for t in (await session.list_tools()).tools}
            expected = {"snowpea_prompt", "snowpea_sessions", "snowpea_session_history",
                        "snowpea_memory_search", "snowpea_memory_write", "snowpea_schedule", "snowpea_jobs"}
            check(expected <= set(tools), f"tools {sorted(tools)}")
            check(tools["snowpea_prompt"].input_schema["required"] == ["text"], "snowpea_prompt schema")
            prompts = [p.name for p in (await session.list_prompts()).prompts]
            check("help" in prompts, f"prompts {prompts}")
            got = await session.get_prompt("help", {"args": ""})
            check("/help" in got.messages[0].content.text, "prompt text")
            await session.list_resources()

            # A turn with a tool call, streamed as progress.
            progress = []

            async def on_progress(value, total, message):
                progress.append(message or "")

            result = await call(session, "snowpea_prompt", {"text": "write the file", "workdir": WORKDIR}, on_progress)
            text = text_of(result)
            check(not result.is_error, f"prompt failed: {text}")
            check("Wrote a.txt." in text, f"answer: {text}")
            check("tools run: write_file" in text, f"tools: {text}")
            check("files changed:" in text and "a.txt" in text, f"files: {text}")
            sid = result.structured_content["sessionId"]
            check(any(m.startswith("tool call: write_file") for m in progress), f"progress {progress}")
            check(any(m.startswith("turn started") for m in progress), f"progress {progress}")
            with open(os.path.join(WORKDIR, "a.txt")) as f:
                check(f.read() == "hello mcp\n", "a.txt content")
            say("session", sessionId=sid)

            # A follow-up in the same session.
            result = await call(session, "snowpea_prompt", {"text": "what did you write", "sessionId": sid})
            check("I wrote a.txt earlier." in text_of(result), f"follow-up: {text_of(result)}")
            check(result.structured_content["sessionId"] == sid, "same session")
            transcript = await history(session, sid)
            check("user: write the file" in transcript and "user: what did you write" in transcript, transcript)

            # Cancelling the request interrupts the turn.
            started = anyio.Event()

            async def on_slow_progress(value, total, message):
                if (message or "").startswith("turn started"):
                    started.set()

            async with anyio.create_task_group() as tg:
                async def slow():
                    await session.call_tool("snowpea_prompt", {"text": "slow answer", "sessionId": sid},
                                            progress_callback=on_slow_progress)
                scope = anyio.CancelScope()

                async def run_slow():
                    with scope:
                        await slow()
                tg.start_soon(run_slow)
                with anyio.fail_after(WAIT):
                    await started.wait()
                scope.cancel()
            with anyio.fail_after(WAIT):
                while "turn done (interrupted)" not in await history(session, sid):
                    await anyio.sleep(0.2)
            say("interrupted", sessionId=sid)

            # An approval answered through elicitation.
            result = await call(session, "snowpea_prompt", {"text": "run the elicited command", "workdir": WORKDIR})
            text = text_of(result)
            check(len(host.elicitations) == 1, f"elicitations {host.elicitations}")
            check("shell" in host.elicitations[0].message, host.elicitations[0].message)
            check("Elicited ran." in text and "tools run: shell" in text, f"elicited: {text}")
            with open(os.path.join(WORKDIR, "elicited.txt")) as f:
                check(f.read().strip() == "elicited", "elicited.txt")

            # Memory: write, then search.
            result = await call(session, "snowpea_memory_write", {"text": "The user prefers tabs over spaces", "tags": ["pref"]})
            check(not result.is_error and result.structured_content["id"], f"memory write: {text_of(result)}")
            result = await call(session, "snowpea_memory_search", {"query": "tabs"})
            check("prefers tabs" in text_of(result), f"memory search: {text_of(result)}")

            # A memory longer than 64 KiB is an argument error naming text, checked before the call.
            result = await call(session, "snowpea_memory_write", {"text": "x" * (64 * 1024 + 1)})
            check(result.is_error and "invalid argument text" in text_of(result)
                  and "memory.write failed" not in text_of(result), f"long memory: {text_of(result)}")

            # A prompt line longer than the transcript's bound is cut, not the whole transcript.
            result = await call(session, "snowpea_prompt", {"text": "huge " + "x" * (600 * 1024), "workdir": WORKDIR})
            check(not result.is_error, f"huge prompt: {text_of(result)[:300]}")
            huge_sid = result.structured_content["sessionId"]
            transcript = await history(session, huge_sid)
            check("user: huge xxx" in transcript and "more bytes cut]" in transcript
                  and "lines dropped" not in transcript and "turn done (complete)" in transcript,
                  f"huge transcript: {transcript[:300]}")
            with anyio.fail_after(WAIT):
                read = await session.read_resource(f"snowpea://session/{huge_sid}")
            check("more bytes cut]" in read.contents[0].text and "lines dropped" not in read.contents[0].text,
                  read.contents[0].text[:300])

            # A workdir filter naming no existing directory lists nothing (not an error).
            result = await call(session, "snowpea_sessions", {"workdir": "/nonexistent"})
            check(not result.is_error and result.structured_content["sessions"] == [], text_of(result))
            result = await call(session, "snowpea_sessions", {"workdir": "relative/dir"})
            check(result.is_error and "workdir" in text_of(result), text_of(result))

            # A scheduled job, then the list of jobs.
            result = await call(session, "snowpea_schedule", {"spec": "0 9 * * 1", "prompt": "weekly check", "workdir": WORKDIR})
            check(not result.is_error and result.structured_content["jobId"], f"schedule: {text_of(result)}")
            job_id = result.structured_content["jobId"]
            result = await call(session, "snowpea_jobs", {})
            check(job_id in text_of(result) and "weekly check" in text_of(result), f"jobs: {text_of(result)}")
            result = await call(session, "snowpea_schedule", {"spec": "0 9 * * 1", "prompt": "x", "workdir": "relative/dir"})
            check(result.is_error and "workdir" in text_of(result), text_of(result))

            # Resources: the session's transcript; the list changed when sessions appeared.
            uris = [str(r.uri) for r in (await session.list_resources()).resources]
            uri = f"snowpea://session/{sid}"
            check(uri in uris, f"resources {uris}")
            with anyio.fail_after(WAIT):
                read = await session.read_resource(uri)
            check("user: write the file" in read.contents[0].text, read.contents[0].text)
            check("ResourceListChangedNotification" in host.notices, f"notices {host.notices}")

            # Bad arguments: a tool error naming the field.
            result = await call(session, "snowpea_prompt", {"text": 5})
            check(result.is_error and "text" in text_of(result), text_of(result))
            result = await call(session, "snowpea_session_history", {})
            check(result.is_error and "sessionId" in text_of(result), text_of(result))
            result = await call(session, "snowpea_prompt", {"text": "x", "mode": "yolo"})
            check(result.is_error and "mode" in text_of(result), text_of(result))
            result = await call(session, "snowpea_sessions", {})
            check(sid in text_of(result), text_of(result))


async def plain_host():
    """A host without elicitation: the approval waits for another client (the Rust test's
    native client answers it)."""
    host = Host()
    async with stdio_client(server()) as (read, write):
        async with host.session(read, write) as session:
            with anyio.fail_after(WAIT):
                await session.initialize()
            progress = []

            async def on_progress(value, total, message):
                progress.append(message or "")

            result = await call(session, "snowpea_prompt", {"text": "run the native command", "workdir": WORKDIR}, on_progress)
            text = text_of(result)
            check("Native ran." in text and "tools run: shell" in text, f"native: {text}")
            check(any(m.startswith("waiting for approval of shell") for m in progress), f"progress {progress}")
            with open(os.path.join(WORKDIR, "native.txt")) as f:
                check(f.read().strip() == "native", "native.txt")


async def main():
    await main_host()
    await plain_host()
    say("done")


if __name__ == "__main__":
    try:
        anyio.run(main)
    except BaseException as e:  # noqa: BLE001 - report everything, then fail
        import traceback
        traceback.print_exc()
        sys.exit(1)
