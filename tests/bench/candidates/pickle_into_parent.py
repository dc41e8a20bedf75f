"""Sends the evaluator, through the worker's result pipe, a pickle whose loading creates the
directory __MARKER__: code run by the unsandboxed parent if it unpickles what the worker sends."""

import gc
import multiprocessing.connection
import os
import pickle
import struct


class _Payload:
    def __reduce__(self):
        return (os.mkdir, ("__MARKER__",))


_msg = pickle.dumps(("returned", {"task_id": "level1/1", "status": "runtime_error", "payload": _Payload()}))
for _conn in [o for o in gc.get_objects() if isinstance(o, multiprocessing.connection.Connection)]:
    if _conn.writable and not _conn.closed:
        os.write(_conn.fileno(), struct.pack("!i", len(_msg)) + _msg)
os._exit(0)
