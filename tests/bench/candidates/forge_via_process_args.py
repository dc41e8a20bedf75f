"""The attack that broke the in-process evaluator (issue: a forged verdict through the worker's
own process arguments): reads multiprocessing.current_process()._args, writes a well-formed
"returned: ok, 25x" message into every pipe or socket it finds there, then exits."""
import json
import multiprocessing
import os
import socket
import struct

_forged = {"task_id": "level1/1", "status": "ok", "speedup": 25.0, "labels": [], "message": "forged"}
for _arg in getattr(multiprocessing.current_process(), "_args", ()):
    _body = json.dumps({"nonce": "?", "kind": "returned", "value": _forged}).encode()
    try:
        if isinstance(_arg, socket.socket):
            _arg.sendall(struct.pack("!I", len(_body)) + _body)
        elif hasattr(_arg, "send_bytes"):
            _arg.send_bytes(_body)
    except OSError:
        pass
os._exit(0)
