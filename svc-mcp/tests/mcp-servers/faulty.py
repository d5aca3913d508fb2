#!/usr/bin/env python3
"""A deliberately broken MCP stdio server for svc-mcp's fault tests (no dependencies).

Usage: faulty.py MODE [ARG]
  exit-start      writes an error to stderr and exits 3 before answering anything
  hang-init       reads requests but never answers (initialize hangs)
  slow-start SEC  waits SEC seconds before answering initialize, then works
  flood           floods stdout with non-JSON lines and stderr with noise, then works
  ok              works: tools echo, sleep{seconds}, crash (exits mid-call), spawn (forks a
                  grandchild that ignores SIGTERM, then answers)

Any tool call with "hang": "now" stops answering everything (that call, later calls, ping)
while the process lives on; "hang": "after" answers the call first, then does the same.
"""
import json
import os
import signal
import subprocess
import sys
import time

mode = sys.argv[1] if len(sys.argv) > 1 else "ok"
arg = sys.argv[2] if len(sys.argv) > 2 else None

if mode == "exit-start":
    sys.stderr.write("faulty: cannot open database /nonexistent/db.sqlite\n")
    sys.stderr.flush()
    sys.exit(3)

TOOLS = [
    {"name": "echo", "description": "Echoes its text", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}},
    {"name": "sleep", "description": "Sleeps", "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}, "marker": {"type": "string"}}}},
    {"name": "crash", "description": "Exits mid-call", "inputSchema": {"type": "object"}},
    {"name": "spawn", "description": "Starts a stubborn grandchild", "inputSchema": {"type": "object"}},
]


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def hang_forever():
    sys.stderr.write("faulty: hanging on purpose\n")
    sys.stderr.flush()
    while True:
        time.sleep(3600)


if mode == "flood":
    for i in range(20000):
        sys.stdout.write("garbage line %d that is not JSON-RPC at all\n" % i)
        sys.stderr.write("noise %d\n" % i)
    sys.stdout.flush()
    sys.stderr.flush()

for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    msg = json.loads(line)
    if "id" not in msg:
        continue
    method = msg.get("method")
    if mode == "hang-init":
        continue
    if method == "initialize":
        if mode == "slow-start":
            time.sleep(float(arg or "3"))
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {
            "protocolVersion": msg["params"].get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "faulty", "version": "0"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {"tools": TOOLS}})
    elif method == "tools/call":
        name = msg["params"]["name"]
        args = msg["params"].get("arguments") or {}
        if args.get("hang") == "now":
            hang_forever()
        if name == "crash":
            sys.stderr.write("faulty: crashing on purpose\n")
            sys.stderr.flush()
            os._exit(9)
        if name == "sleep":
            if args.get("marker"):
                # Tells a test the call is under way (instead of a fixed wait).
                open(args["marker"], "w").close()
            time.sleep(float(args.get("seconds", 1)))
        if name == "spawn":
            subprocess.Popen([sys.executable, "-c",
                              "import signal,time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(3600)"])
        text = args.get("text", "pid=%d" % os.getpid())
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {"content": [{"type": "text", "text": text}]}})
        if args.get("hang") == "after":
            hang_forever()
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {}})
    else:
        send({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "no " + str(method)}})
