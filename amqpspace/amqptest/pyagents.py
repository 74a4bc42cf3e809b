"""Agents of operand/agency 1.6 (the Python library), driven by a Go test.

Usage: pyagents.py EXCHANGE

The broker comes from AMQP_HOST, AMQP_PORT, AMQP_USERNAME, AMQP_PASSWORD
and AMQP_VHOST, as operand/agency's AMQPSpace reads them. The script reads
one JSON command per line on stdin and writes one JSON answer per line on
stdout (operand/agency logs to stderr). Commands:

  {"cmd": "add", "id": ID}                        add a PyAgent -> {} or {"error": TEXT}
  {"cmd": "request", "from": ID, "to": ID, "action": NAME, "args": {...}, "timeout": S}
                                                  -> {"value": V} or {"error": TEXT, "class": NAME}
  {"cmd": "send", "from": ID, "to": ID, "action": NAME, "args": {...}}
                                                  -> {"id": META_ID}
  {"cmd": "answers", "id": ID, "from": [IDS], "timeout": S}
                                                  the answers to sends, once every id in "from"
                                                  has answered -> {"answers": [...]}
  {"cmd": "alive", "id": ID}                      -> {"alive": bool, "error": TEXT}: whether
                                                  the agent's receiving thread still runs
  {"cmd": "received", "id": ID}                   -> {"messages": [...]}: what reached _receive
  {"cmd": "notes", "id": ID}                      -> {"notes": [...]}: texts given to note
  {"cmd": "quit"}
"""

import json
import queue
import sys
import threading
import time
import traceback

from agency.agent import ACCESS_DENIED, Agent, action
from agency.spaces.amqp_space import AMQPSpace


class PyAgent(Agent):
    def __init__(self, id):
        super().__init__(id)
        self.answers = queue.Queue()
        self.notes = []
        self.notes_lock = threading.Lock()

    @action
    def shout(self, text: str) -> str:
        """Shouts the text.

        Args:
            text: what to shout

        Returns:
            the text in capitals
        """
        self.respond_with(text.upper())

    @action
    def slow(self, seconds: float, text: str) -> str:
        """Answers the text after a while.

        Args:
            seconds: how long to wait
            text: what to answer

        Returns:
            the text
        """
        time.sleep(seconds)
        self.respond_with(text)

    @action
    def fail(self, reason: str):
        """Raises ValueError.

        Args:
            reason: the error's message
        """
        raise ValueError(reason)

    @action
    def note(self, text: str):
        """Notes the text and answers nothing.

        Args:
            text: what to note
        """
        with self.notes_lock:
            self.notes.append(text)

    @action(access_policy=ACCESS_DENIED)
    def secret(self):
        """Never runs."""
        self.respond_with("secret")

    def handle_action_value(self, value):
        m = self.current_message()
        self.answers.put({"from": m["from"], "parent_id": m["meta"].get("parent_id"), "value": value})

    def handle_action_error(self, error):
        m = self.current_message()
        self.answers.put({"from": m["from"], "parent_id": m["meta"].get("parent_id"), "error": str(error)})


def main():
    exchange = sys.argv[1]
    space = AMQPSpace(exchange_name=exchange)
    agents = {}

    def message(c):
        m = {"to": c["to"], "action": {"name": c["action"]}}
        if c.get("args") is not None:
            m["action"]["args"] = c["args"]
        return m

    def do(c):
        cmd = c["cmd"]
        if cmd == "add":
            try:
                agents[c["id"]] = space.add_foreground(PyAgent, c["id"])
            except Exception as e:
                return {"error": f"{e.__class__.__name__}: {e}"}
            return {}
        agent = agents.get(c.get("id") or c.get("from"))
        if cmd == "request":
            try:
                return {"value": agent.request(message(c), timeout=c.get("timeout", 10))}
            except Exception as e:
                return {"error": str(e), "class": e.__class__.__name__}
        if cmd == "send":
            return {"id": agent.send(message(c))}
        if cmd == "answers":
            want, got = set(c["from"]), []
            deadline = time.monotonic() + c.get("timeout", 10)
            while want - {a["from"] for a in got}:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    got.append(agent.answers.get(timeout=left))
                except queue.Empty:
                    break
            return {"answers": got}
        if cmd == "alive":
            inbound = space.processors[agent.id()].inbound_queue
            f = inbound._heartbeat_future
            error = None
            if f.done():
                error = repr(f.exception())
            return {"alive": not f.done(), "error": error}
        if cmd == "received":
            with agent._message_log_lock:
                log = [m for m in agent._message_log if m.get("from") != agent.id()]
            return {"messages": log}
        if cmd == "notes":
            with agent.notes_lock:
                return {"notes": list(agent.notes)}
        raise ValueError(f"unknown command {cmd!r}")

    for line in sys.stdin:
        c = json.loads(line)
        if c["cmd"] == "quit":
            break
        try:
            answer = do(c)
        except Exception:
            answer = {"fail": traceback.format_exc()}
        print(json.dumps(answer, default=repr), flush=True)
    space.destroy()


if __name__ == "__main__":
    main()
