"""No code of its own: it reads the builtin seed solution of its task from the installed cudal1
package (readable: the candidate's process imports cudal1, so the toolchain allow-list holds the
package) and runs it. Its source shares nothing with the seed's, so no copy check sees it."""
import os

import cudal1

_path = os.path.join(os.path.dirname(cudal1.__file__), "tasks", "builtin", "solutions", "__SEED__")
_ns: dict = {}
exec(compile(open(_path).read(), _path, "exec"), _ns)
ModelNew = _ns["ModelNew"]
print("LOADED THE SEED", "__SEED__", flush=True)
