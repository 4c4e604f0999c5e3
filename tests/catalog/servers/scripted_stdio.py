"""A scripted MCP server over stdio, speaking raw JSON-RPC so tests control every byte of tools/list.

Usage: python scripted_stdio.py SCRIPT.json. The script (re-read on every request) holds:
  pages: list of pages, each a list of raw tool objects (anything, even invalid ones);
  fail_on_page: {"2": "exit" | "hang" | "error"} what to do instead of serving that page (1-based);
  error_message: the message of that "error" (default: "page N exploded");
  quote_env: names of variables whose values that "exit" writes to stderr, that "error" adds to its message and a
    tool "quoting" of the first page holds in its description and schema (a careless server quoting its own token);
  loop_cursor: true to hand out the same cursor forever;
  hang_on_connect: true to never answer the handshake;
  hang_methods: methods never answered (e.g. ["tools/call"]);
  delay: seconds to wait before answering each tools/list;
  env_tool: true to add a tool "env" whose description lists the environment's variable names;
  notify_on_list: true to send notifications/tools/list_changed (unasked, as 2025 servers do) after each listing;
  exit_after_lists: exit once this many tools/list requests were answered;
  interrupt_on_list: a process id to send SIGINT to (the client's: a Ctrl-C while it lists) instead of answering;
  call_log: a file each tools/call's params are appended to, one JSON line each (tests count the calls sent);
  call_reply: the tools/call answer as raw text, "ID" standing for the request's id, written as Latin-1 bytes
    (so "\u00ff" is the byte 0xFF: invalid UTF-8 on the wire);
  noise: {"lines": [raw stdout lines], "times": n}: those lines written n times before every answer (unasked
    notifications, objects that are no JSON-RPC message).
It answers server/discover with "method not found", so the client falls back to the initialize handshake.
"""

import json
import os
import signal
import sys
import time


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main() -> None:
    script_path = sys.argv[1]
    lists_answered = 0
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        with open(script_path) as fh:
            script = json.load(fh)
        method, msg_id = message.get("method"), message.get("id")
        if msg_id is None:
            continue  # a notification
        noise = script.get("noise")
        if noise:
            sys.stdout.write("".join(line + "\n" for line in noise["lines"]) * noise["times"])
        if script.get("hang_on_connect") and method in ("initialize", "server/discover"):
            continue
        if method in script.get("hang_methods", []):
            continue
        if method == "tools/call" and script.get("call_log"):
            with open(script["call_log"], "a") as log:
                log.write(json.dumps(message.get("params")) + "\n")
        if method == "initialize":
            send(
                {
                    "jsonrpc": "2.0",
                    "id": msg_id,
                    "result": {
                        "protocolVersion": "2025-11-25",
                        "capabilities": {"tools": {"listChanged": True}},
                        "serverInfo": {"name": "scripted", "version": "1"},
                    },
                }
            )
        elif method == "tools/call" and "call_reply" in script:
            raw = script["call_reply"].replace("ID", json.dumps(msg_id)) + "\n"
            sys.stdout.flush()
            sys.stdout.buffer.write(raw.encode("latin-1"))
            sys.stdout.buffer.flush()
        elif method == "tools/list" and script.get("interrupt_on_list"):
            os.kill(script["interrupt_on_list"], signal.SIGINT)
        elif method == "tools/list":
            cursor = (message.get("params") or {}).get("cursor")
            index = 0 if cursor is None else int(cursor.removeprefix("page-"))
            action = script.get("fail_on_page", {}).get(str(index + 1))
            quoted = "".join(f" {name}={os.environ.get(name)}" for name in script.get("quote_env", []))
            if action == "exit":
                sys.stderr.write(f"scripted server: exiting on page {index + 1}{quoted}\n")
                sys.stderr.flush()
                sys.exit(3)
            if action == "hang":
                continue
            if action == "error":
                message = (script.get("error_message") or f"page {index + 1} exploded") + quoted
                error = {"code": -32603, "message": message}
                send({"jsonrpc": "2.0", "id": msg_id, "error": error})
                continue
            time.sleep(script.get("delay", 0))
            pages = script["pages"]
            result = {"tools": list(pages[index])}
            if script.get("quote_env") and index == 0:
                schema = {"type": "object", "properties": {"token": {"type": "string", "default": quoted.strip()}}}
                result["tools"].append(
                    {"name": "quoting", "description": f"Calls the API as{quoted}", "inputSchema": schema}
                )
            if script.get("env_tool") and index == 0:
                result["tools"].append({"name": "env", "description": " ".join(sorted(os.environ))})
            if script.get("loop_cursor"):
                result["nextCursor"] = "page-0"
            elif index + 1 < len(pages):
                result["nextCursor"] = f"page-{index + 1}"
            send({"jsonrpc": "2.0", "id": msg_id, "result": result})
            lists_answered += 1
            if script.get("notify_on_list"):
                send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            if lists_answered == script.get("exit_after_lists"):
                sys.exit(0)
        else:
            error = {"code": -32601, "message": f"method not found: {method}"}
            send({"jsonrpc": "2.0", "id": msg_id, "error": error})


if __name__ == "__main__":
    main()
