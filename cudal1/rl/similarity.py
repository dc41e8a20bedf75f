"""When two candidates are the same program: `normalized_code`, an alpha-normalised AST.

Contrastive RL shows the policy earlier solutions and pays it for beating them, so a response
that hands a shown solution back with cosmetic edits must be recognized as the same program. Two
codes are the same here when their `normalized_code` strings are equal. The normal form is the
Python AST (so formatting and comments are gone) after:

1. **No-op statements dropped**: docstrings and every other bare constant expression (a string
   used as a comment, `...`, a number), `pass` beside other statements, self-assignments
   (`x = x`, `self.w = self.w`), and dead assignments: an assignment (plain, annotated or
   augmented) outside a class body (there it defines an attribute) to a name that is never read
   anywhere in the module and whose value calls nothing (a call may have effects, so it is kept). Dropping repeats until nothing changes, so a chain
   `a = 1; b = a` with `b` unread goes entirely.
2. **Bound identifiers renamed by first occurrence** (alpha-normalisation, as for lambda terms:
   `x` -> `_v0`, the next new name -> `_v1`, ...): every name the code itself binds (functions,
   classes, arguments, assigned names, loop, `with`, `except` and comprehension targets, import
   aliases) and every use of it, keyword arguments included; attributes assigned through
   `obj.attr = ...` are renamed the same way in their own namespace (`_a0`, ...), so
   `self.ext = ext` and `self.module = ext` normalize alike. Names the code does not bind (`torch`'s functions, builtins, attributes it only
   reads) keep their spelling: `torch.relu(x)` and `torch.tanh(x)` stay different programs.
   `import torch` and `import torch as t` both bind one alias and normalize alike.
3. **Embedded C/CUDA sources normalized**: a string constant that looks like C (it holds
   `__global__`, `#include` or `torch::`) loses its `//` and `/* */` comments and its formatting,
   and the identifiers it declares (a name right after a type-like token and right before one of
   `= ; , ) [ (`) are renamed by first occurrence (`_c0`, `_c1`, ...), one renaming for all the
   program's C sources and for the Python strings and attributes that spell one of their
   functions (`functions=["scale"]`, `ext.scale`) or an extension's module name (the first
   argument or `name=` of a `load_inline`/`load` call). Calls of functions it does not declare
   (`expf`, `__shfl_down_sync`) keep their names.
4. **Annotations dropped and imports sorted**: `x: T = v` is `x = v` (an annotation alone is
   kept), argument and return annotations go, and each run of consecutive top-level imports is
   sorted (their order would rename the aliases they bind).

What it does not catch (limits, by design of a syntactic check): reordered statements or
methods, an expression rewritten into an equivalent one (`x + x` for `2 * x`), dead code with a
call in it, dead branches (`if False:`), and C identifiers declared in forms the heuristic does
not see (macros, templates). Code that does not parse is compared with its whitespace collapsed.

Pure functions: no I/O.
"""

from __future__ import annotations

import ast
import functools
import re

__all__ = ["normalized_code", "normalized_c"]

_C_MARKERS = ("__global__", "#include", "torch::")
_C_TOKEN = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])*'|[A-Za-z_]\w*|\d[\w.]*|\S", re.DOTALL)
_C_NOT_A_TYPE = frozenset(
    {
        "return",
        "else",
        "case",
        "goto",
        "sizeof",
        "new",
        "delete",
        "throw",
        "co_return",
        "typedef",
        "using",
        "namespace",
        "if",
        "while",
        "for",
        "switch",
        "do",
    }
)
_C_AFTER_DECLARED = frozenset({"=", ";", ",", ")", "[", "("})
_C_KEYWORDS = frozenset(
    {
        "auto",
        "bool",
        "break",
        "char",
        "const",
        "constexpr",
        "continue",
        "default",
        "double",
        "extern",
        "float",
        "half",
        "inline",
        "int",
        "long",
        "short",
        "signed",
        "static",
        "struct",
        "template",
        "typename",
        "unsigned",
        "void",
        "volatile",
        "register",
        "restrict",
        "__restrict__",
        "__global__",
        "__device__",
        "__host__",
        "__shared__",
        "__constant__",
        "__forceinline__",
        "size_t",
        "int64_t",
        "int32_t",
        "uint32_t",
        "uint64_t",
        "true",
        "false",
        "nullptr",
        "this",
        "class",
        "public",
        "private",
        "protected",
        "operator",
        "virtual",
        "override",
        "enum",
        "union",
        "friend",
        "mutable",
        "explicit",
        "noexcept",
        "decltype",
        *_C_NOT_A_TYPE,
    }
)


def normalized_c(source: str, names: dict[str, str] | None = None, declared: set[str] | None = None) -> str:
    """A C/C++/CUDA source without comments or formatting, its declared identifiers renamed by
    first occurrence (see the module docstring, step 3); tokens joined by single spaces.
    `declared`: the identifiers to rename (None: those this source declares); `names`: the
    renaming so far, extended in place (None: a fresh one), so that the C sources of one program
    and the Python strings and attributes naming their functions share one renaming."""
    tokens = _c_tokens(source)
    declared = _c_declared(tokens) if declared is None else declared
    names = {} if names is None else names
    out = []
    for t in tokens:
        if t in declared:
            t = names.setdefault(t, f"_c{len(names)}")
        out.append(t)
    return " ".join(out)


def _c_tokens(source: str) -> list[str]:
    return [t for t in _C_TOKEN.findall(source) if not t.startswith(("//", "/*"))]


def _c_declared(tokens: list[str], functions: bool = False) -> set[str]:
    """The identifiers a C token list declares (a name right after a type-like token and right
    before one of `= ; , ) [ (`); with `functions`, only those right before `(`."""
    declared: set[str] = set()
    for i in range(1, len(tokens) - 1):
        t, before, after = tokens[i], tokens[i - 1], tokens[i + 1]
        if (
            _is_c_name(t)
            and t not in _C_KEYWORDS
            and after in (("(",) if functions else _C_AFTER_DECLARED)
            and (before in ("*", "&") or (_is_c_name(before) and before not in _C_NOT_A_TYPE))
        ):
            declared.add(t)
    return declared


def _is_c_name(token: str) -> bool:
    return token[:1].isalpha() or token[:1] == "_"


def _looks_like_c(text: str) -> bool:
    return any(marker in text for marker in _C_MARKERS)


def _is_noop_expr(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)


def _same_target(target: ast.AST, value: ast.AST) -> bool:
    """`target` and `value` denote the same place (`x = x`, `self.w = self.w`)."""

    def key(node: ast.AST) -> str:
        return ast.dump(node, annotate_fields=False, include_attributes=False).replace("Store()", "Load()")

    return isinstance(target, (ast.Name, ast.Attribute)) and key(target) == key(value)


def _calls(node: ast.AST | None) -> bool:
    return node is not None and any(
        isinstance(n, (ast.Call, ast.Await, ast.Yield, ast.YieldFrom)) for n in ast.walk(node)
    )


def _read_names(tree: ast.AST) -> set[str]:
    """Names read anywhere (a Load, a `global`/`nonlocal` declaration, or an augmented target,
    which reads before it writes is not counted: `x += 1` alone keeps x unread)."""
    read = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Load, ast.Del))}
    for n in ast.walk(tree):
        if isinstance(n, (ast.Global, ast.Nonlocal)):
            read.update(n.names)
    return read


def _dead(stmt: ast.stmt, read: set[str], in_class: bool) -> bool:
    """A statement that does nothing the program can observe (module docstring, step 1). In a
    class body an assignment defines an attribute, readable from outside: only no-op expressions
    and self-assignments are dead there."""
    if _is_noop_expr(stmt):
        return True
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and _same_target(stmt.targets[0], stmt.value):
        return True
    if in_class:
        return False
    if isinstance(stmt, ast.Assign):
        names = [t for t in stmt.targets if isinstance(t, ast.Name)]
        return len(names) == len(stmt.targets) and all(t.id not in read for t in names) and not _calls(stmt.value)
    if isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
        t = stmt.target
        return isinstance(t, ast.Name) and t.id not in read and not _calls(stmt.value)
    return False


def _drop_dead(tree: ast.Module) -> None:
    """Remove dead statements (and `pass`) from every statement list, until none is left; an
    emptied body becomes a single `pass`."""
    while True:
        read, removed = _read_names(tree), False
        for node in list(ast.walk(tree)):
            for field in ("body", "orelse", "finalbody"):
                body = getattr(node, field, None)
                if not isinstance(body, list) or not body or not isinstance(body[0], ast.stmt):
                    continue
                dead = [_dead(s, read, isinstance(node, ast.ClassDef)) for s in body]
                removed = removed or any(dead)
                kept = [s for s, d in zip(body, dead) if not d and not isinstance(s, ast.Pass)]
                setattr(node, field, kept or ([ast.Pass()] if field == "body" else []))
        if not removed:
            return


_EXTENSION_LOADERS = frozenset({"load_inline", "load"})


def _extension_name(node: ast.Call) -> ast.AST | None:
    """The module-name argument of a `torch.utils.cpp_extension.load_inline`/`load` call (its
    first positional argument or `name=`), else None."""
    func = node.func
    called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
    if called not in _EXTENSION_LOADERS:
        return None
    if node.args:
        return node.args[0]
    return next((k.value for k in node.keywords if k.arg == "name"), None)


class _Binder(ast.NodeVisitor):
    """Collects the names and attributes the code binds, the identifiers its C sources declare
    (`c_declared`), and the names Python may use for what they build (`c_names`: the C functions
    and the extension modules' names; strings and attributes spelling one are renamed)."""

    def __init__(self) -> None:
        self.names: set[str] = set()
        self.attrs: set[str] = set()
        self.c_declared: set[str] = set()
        self.c_names: set[str] = set()

    def add(self, name: str | None) -> None:
        if name:
            self.names.add(name)

    def generic_visit(self, node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.add(node.name)
        elif isinstance(node, ast.arg):
            self.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            self.add(node.id)
        elif isinstance(node, ast.alias):
            self.add(node.asname or node.name.split(".")[0])
        elif isinstance(node, ast.ExceptHandler):
            self.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            self.attrs.add(node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _looks_like_c(node.value):
            tokens = _c_tokens(node.value)
            self.c_declared |= _c_declared(tokens)
            self.c_names |= _c_declared(tokens, functions=True)
        elif isinstance(node, ast.Call):
            name = _extension_name(node)
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                self.c_names.add(name.value)
        super().generic_visit(node)


class _Renamer(ast.NodeTransformer):
    """Renames bound names (first occurrence in source order) and C sources in strings."""

    def __init__(self, binder: _Binder) -> None:
        self.map: dict[str, str] = {}
        self.attr_map: dict[str, str] = {}
        self.c_map: dict[str, str] = {}
        self.bound, self.attrs = binder.names, binder.attrs
        self.c_declared, self.c_names = binder.c_declared | binder.c_names, binder.c_names

    def new(self, name: str) -> str:
        if name not in self.bound:
            return name
        return self.map.setdefault(name, f"_v{len(self.map)}")

    def visit_Name(self, node: ast.Name) -> ast.AST:
        node.id = self.new(node.id)
        return node

    def visit_arg(self, node: ast.arg) -> ast.AST:
        node.arg = self.new(node.arg)
        node.annotation = None
        return node

    def visit_keyword(self, node: ast.keyword) -> ast.AST:
        if node.arg is not None:
            node.arg = self.new(node.arg)
        self.generic_visit(node)
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        node.name = self.new(node.name)
        node.returns = None
        self.generic_visit(node)
        return node

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        node.name = self.new(node.name)
        self.generic_visit(node)
        return node

    def visit_alias(self, node: ast.alias) -> ast.AST:
        node.asname = self.new(node.asname or node.name.split(".")[0])
        return node

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> ast.AST:
        if node.name:
            node.name = self.new(node.name)
        self.generic_visit(node)
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if node.attr in self.attrs:
            node.attr = self.attr_map.setdefault(node.attr, f"_a{len(self.attr_map)}")
        elif node.attr in self.c_names:  # `ext.scale`: a function the code's C source declares
            node.attr = self.c_map.setdefault(node.attr, f"_c{len(self.c_map)}")
        self.generic_visit(node)
        return node

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST:
        self.generic_visit(node)
        if node.value is None:
            return node
        return ast.Assign(targets=[node.target], value=node.value)

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        if isinstance(node.value, str) and _looks_like_c(node.value):
            node.value = normalized_c(node.value, self.c_map, self.c_declared)
        elif isinstance(node.value, str) and node.value in self.c_names:  # functions=["scale"], "scale_ext"
            node.value = self.c_map.setdefault(node.value, f"_c{len(self.c_map)}")
        return node


def _sort_imports(tree: ast.Module) -> None:
    """Sort each run of consecutive top-level import statements (their order renames the aliases
    they bind, and rarely matters to the program)."""
    body, out, run = tree.body, [], []
    for stmt in [*body, None]:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            run.append(stmt)
            continue
        out.extend(sorted(run, key=lambda n: ast.dump(n, annotate_fields=False, include_attributes=False)))
        run = []
        if stmt is not None:
            out.append(stmt)
    tree.body = out


@functools.lru_cache(maxsize=1024)
def normalized_code(code: str) -> str:
    """The normal form of a Python candidate (see the module docstring): two codes are the same
    program up to formatting, comments, docstrings, no-op statements and identifier renaming
    exactly when their normal forms are equal. Cached: one step asks for the same codes several
    times (submission, the copy check against every shown exemplar of each response, shared
    prices, the buffer's dedupe)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return " ".join(code.split())
    _drop_dead(tree)
    _sort_imports(tree)
    binder = _Binder()
    binder.visit(tree)
    tree = _Renamer(binder).visit(tree)
    return ast.dump(tree, annotate_fields=False, include_attributes=False)
