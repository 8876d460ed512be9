"""Compiling calls: functions, methods, ``has``, ``matches`` and the macros."""

from __future__ import annotations

import ast
from typing import Final

from operators.graph.cel.emit import (
    _arguments,
    _call,
    _Code,
    _compare,
    _const,
    _if,
    _load,
    _method,
    _plural,
    _store,
    _type_of,
)
from operators.graph.cel.emitter import _STEPS, _Emitter, _Frame
from operators.graph.cel.regex import _cached_regex
from operators.graph.cel.steps import _SMALL_RANGE
from operators.graph.cel.syntax import _Call, _Ident, _Lit, _Node, _nodes_per_run, _Select
from operators.graph.cel.types import (
    _CONVERSIONS,
    _EXTENSION_METHODS,
    _FUNCTIONS,
    _MACROS,
    _METHODS,
    _NAMESPACED,
    _NUMERIC,
    BOOL,
    DYN,
    INT,
    LIST,
    MAP,
    STRING,
)


class _Calls(_Emitter):
    """Compiles calls."""

    def call(self, node: _Call) -> _Code:
        name, args = node.name, node.args
        if node.target is None:
            if name == "has":
                self.arity(node, (1,))
                return self.has(node, args[0])
            if name == "matches":
                self.arity(node, (2,))
                return self.matches(node, self.expr(args[0]), args[1])
            if name in _NAMESPACED:
                return self.namespaced(node, [self.expr(arg) for arg in args])
            if name not in _FUNCTIONS:
                self.ill_typed(f"unknown function {name!r}", node.pos)
            self.arity(node, (_FUNCTIONS[name],))
            return self.function(node, name, self.expr(args[0]))
        if name in _MACROS:
            self.arity(node, _MACROS[name])
            return self.macro(node, self.expr(node.target))
        if name in _EXTENSION_METHODS:
            return self.extension(node, self.expr(node.target), [self.expr(arg) for arg in args])
        if name not in _METHODS:
            self.ill_typed(f"unknown method {name!r}", node.pos)
        self.arity(node, (_METHODS[name],))
        receiver = self.expr(node.target)
        if name == "size":
            return self.function(node, name, receiver)
        if name == "matches":
            return self.matches(node, receiver, args[0])
        return self.string_method(node, receiver, [self.expr(arg) for arg in args])

    def arity(self, node: _Call, counts: tuple[int, ...]) -> None:
        if len(node.args) not in counts:
            expected = " or ".join(str(count) for count in counts)
            noun = "argument" if counts == (1,) else "arguments"
            self.ill_typed(f"{node.name}() takes {expected} {noun}, got {len(node.args)}", node.pos)

    def function(self, node: _Call, name: str, arg: _Code) -> _Code:
        t = arg.type
        arg_node = node.args[0] if node.target is None else node.target
        if name == "dyn":
            return _Code(arg.expr, DYN)
        if name == "size":
            if t not in (STRING, LIST, MAP, DYN):
                self.ill_typed(f"no such overload: size({t})", node.pos)
            return _Code(_call("_len", arg.expr), INT)
        result, accepted = _CONVERSIONS[name]
        if t not in accepted:
            self.ill_typed(f"no such overload: {name}({t})", node.pos)
        if t == result:
            return arg
        if name != "string" and t in (STRING, DYN):
            self.repeated(arg_node, arg, 1)  # parsing reads the whole string
        return _Code(_call(f"_to_{name}", arg.expr), result)

    def extension(self, node: _Call, receiver: _Code, args: list[_Code]) -> _Code:
        """A method of the strings extension (see ``extensions.py``), checked by its overloads."""
        name = node.name
        assert node.target is not None
        wanted, overloads, result = _EXTENSION_METHODS[name]
        types = [arg.type for arg in args]

        def fits(have: str, want: str) -> bool:
            return have in (want, DYN)

        if not fits(receiver.type, wanted) or not any(
            len(overload) == len(types) and all(map(fits, types, overload))
            for overload in overloads
        ):
            self.ill_typed(
                f"no such overload: {receiver.type}.{name}({', '.join(types)})", node.pos
            )
        # each reads its whole receiver (join: each element), as contains does, and its
        # string arguments (replace copies its new string up to once per character)
        self.repeated(node.target, receiver, 1, deep=wanted == LIST)
        for arg_node, arg in zip(node.args, args, strict=True):
            if arg.type in (STRING, LIST, DYN):
                self.repeated(arg_node, arg, 1)
        return _Code(_call(f"_x_{name}", receiver.expr, *(arg.expr for arg in args)), result)

    def namespaced(self, node: _Call, args: list[_Code]) -> _Code:
        """``math.greatest``, ``math.least`` (numbers, or one list) and ``strings.quote``."""
        name = node.name
        types = [arg.type for arg in args]
        helper = "_x_" + name.replace(".", "_")
        if name == "strings.quote":
            if types not in ([STRING], [DYN]):
                self.ill_typed(f"no such overload: {name}({', '.join(types)})", node.pos)
            return _Code(_call(helper, args[0].expr), STRING)
        if not args:
            self.ill_typed(f"{name}() requires at least one argument", node.pos)
        single_list = len(types) == 1 and types[0] == LIST
        if not single_list and any(t not in _NUMERIC and t != DYN for t in types):
            self.ill_typed(f"no such overload: {name}({', '.join(types)})", node.pos)
        result = types[0] if len(set(types)) == 1 and types[0] in _NUMERIC else DYN
        return _Code(_call(helper, *(arg.expr for arg in args)), result)

    def has(self, node: _Call, arg: _Node) -> _Code:
        if not isinstance(arg, _Select):
            self.fail("has() takes a field selection, such as has(r.field)", node.pos)
        operand = self.expr(arg.operand)
        if operand.type not in (MAP, DYN):
            self.ill_typed(f"no such overload: field selection on {operand.type}", arg.pos)
        if operand.type == MAP:
            return _Code(_compare(_const(arg.name), ast.In(), operand.expr), BOOL)
        first, ref = self.bind(operand.expr)
        guard = _compare(_type_of(first), ast.Is(), _load("_dict"))
        lookup = _compare(_const(arg.name), ast.In(), ref())
        return _Code(_if(guard, lookup, _call("_has", ref(), _const(arg.name))), BOOL)

    def matches(self, node: _Call, subject: _Code, pattern: _Node) -> _Code:
        """RE2's search for ``pattern`` in ``subject``, compiled now if it is a literal."""
        if subject.type not in (STRING, DYN):
            self.ill_typed(f"no such overload: {subject.type}.matches(string)", node.pos)
        if not (isinstance(pattern, _Lit) and pattern.type == STRING):
            dynamic = self.expr(pattern)
            if dynamic.type not in (STRING, DYN):
                self.ill_typed(f"no such overload: string.matches({dynamic.type})", pattern.pos)
            if self.charged(cell=True):
                search = self.counted("_search_dynamic_counted", subject.expr, dynamic.expr)
                return _Code(search, BOOL)
            limit = _const(self.max_steps)
            return _Code(_call("_search_dynamic", subject.expr, dynamic.expr, limit), BOOL)
        text = pattern.value
        assert isinstance(text, str)
        known = self.patterns.get(text)
        if known is None:
            compiled = _cached_regex(text)
            if isinstance(compiled, str):
                self.fail(f"invalid regular expression: {compiled}", pattern.pos)
            name = self.fresh("_re")
            self.namespace[name] = compiled
            known = self.patterns[text] = (name, compiled.program)
        name, program = known
        self.programs[id(pattern)] = program
        if self.charged(cell=True):
            return _Code(self.counted("_search_counted", _load(name), subject.expr), BOOL)
        limit = _const(self.max_steps)
        return _Code(_call("_search", _load(name), limit, subject.expr), BOOL)

    def string_method(self, node: _Call, receiver: _Code, args: list[_Code]) -> _Code:
        name = node.name
        types = [arg.type for arg in args]
        if receiver.type not in (STRING, DYN) or any(t not in (STRING, DYN) for t in types):
            self.ill_typed(
                f"no such overload: {receiver.type}.{name}({', '.join(types)})", node.pos
            )
        assert node.target is not None
        # contains, lower and upper read the whole receiver; startsWith and endsWith at most
        # the shorter of the two strings (both must not depend on the element to add up).
        if name in ("contains", "lower", "upper") or self.invariant(*node.args):
            self.repeated(node.target, receiver, 1)
        if name in ("startsWith", "endsWith") and types == [DYN]:
            helper = "_starts_with" if name == "startsWith" else "_ends_with"
            return _Code(_call(helper, receiver.expr, args[0].expr), BOOL)
        result = STRING if name in ("lower", "upper") else BOOL
        python = {"startsWith": "startswith", "endsWith": "endswith"}.get(name, name)

        def apply(receiver: ast.expr) -> ast.expr:
            if name == "contains":
                return _compare(args[0].expr, ast.In(), receiver)
            return _method(receiver, python, *(arg.expr for arg in args))

        if receiver.type == STRING:
            value = apply(receiver.expr)
        else:
            first, ref = self.bind(receiver.expr)
            guard = _compare(_type_of(first), ast.Is(), _load("_str"))
            fail = _call("_bad_call", _const(name), ref(), *(_const(t) for t in types))
            value = _if(guard, apply(ref()), fail)
        return _Code(value, result)

    def macro(self, node: _Call, target: _Code) -> _Code:
        name = node.name
        variable = node.args[0]
        if not isinstance(variable, _Ident):
            self.fail(f"the first argument of {name}() must be a variable name", variable.pos)
        if target.type not in (LIST, MAP, DYN):
            self.ill_typed(f"no such overload: {target.type}.{name}()", node.pos)
        if self.macro_depth >= self.max_macro_depth:
            limit = _plural(self.max_macro_depth, "level")
            self.fail(f"macros nested too deeply (more than {limit})", node.pos)
        function, container, item = self.fresh("_m"), self.fresh("_c"), self.fresh("_v")
        steps = [_STEPS] if self.cell else []
        params = [container, *steps, *dict.fromkeys(self.scope.values())]
        frame = _Frame("")
        parts = self.macro_parts(node, variable.name, item, frame)
        prologue, iterable = self.macro_prologue(node, container, frame, parts)
        body = prologue + self.macro_body(node, name, item, iterable, parts)
        definition = ast.FunctionDef(
            name=function,
            args=_arguments([ast.arg(arg=param) for param in params]),
            body=body,
            decorator_list=[],
            returns=None,
        )
        self.functions.append(definition)
        call = _call(function, target.expr, *(_load(param) for param in params[1:]))
        return _Code(call, LIST if name in ("map", "filter") else BOOL)

    def macro_parts(self, node: _Call, variable: str, item: str, frame: _Frame) -> list[_Code]:
        """Compile a macro's arguments after its variable, in its scope, into ``frame``."""
        outer = self.scope.get(variable)
        self.scope[variable] = item
        self.macro_depth += 1
        self.loop_variables.append(variable)
        frame.items = self.fresh("_i")
        self.frames.append(frame)
        try:
            return [self.expr(arg) for arg in node.args[1:]]
        finally:
            self.macro_depth -= 1
            self.loop_variables.pop()
            self.frames.pop()
            if outer is None:
                del self.scope[variable]
            else:
                self.scope[variable] = outer

    def macro_prologue(
        self, node: _Call, container: str, frame: _Frame, parts: list[_Code]
    ) -> tuple[list[ast.stmt], ast.expr]:
        """What a macro's function does before its loop, and the range the loop goes over."""
        iterable: ast.expr = _if(
            _compare(_type_of(_load(container)), ast.Is(), _load("_list")),
            _load(container),
            _call("_iterable", _load(container), _const(node.name)),
        )
        prologue: list[ast.stmt] = []
        nested = self.charged(cell=True)
        items = frame.items
        if nested or frame.probes:
            prologue.append(ast.Assign(targets=[_store(items)], value=iterable))
            iterable = _load(items)
        for code, factor, deep in frame.probes:
            prologue += self.probe(code, items, factor, deep)
        if nested:
            # Nested in another comprehension: its whole run is paid for as it starts, its
            # range times the nodes of its body (exists and all may stop early: an upper bound),
            # a call of a helper counting as 5 nodes, as it takes about as long. A range of at
            # most _SMALL_RANGE elements is not: its work per element of the comprehension
            # around it is bounded, as a node's is; and most nested ranges are such.
            calls = sum(_helper_calls(part.expr) for part in parts)
            weight = 1 + sum(_nodes_per_run(arg) for arg in node.args[1:]) + 4 * calls
            size = _call("_len", _load(items))
            charge = self.counted("_charge_items", _load(items), _const(weight))
            large = _compare(size, ast.Gt(), _const(_SMALL_RANGE))
            prologue.append(ast.If(test=large, body=[ast.Expr(value=charge)], orelse=[]))
        return prologue, iterable

    def macro_body(
        self, node: _Call, name: str, item: str, iterable: ast.expr, parts: list[_Code]
    ) -> list[ast.stmt]:
        def predicate(code: _Code) -> ast.expr:
            return self.checked_bool(code, f"the predicate of {name}()", node.pos)

        def loop(body: list[ast.stmt]) -> ast.For:
            return ast.For(target=_store(item), iter=iterable, body=body, orelse=[])

        def returns(value: object) -> ast.Return:
            return ast.Return(value=_const(value))

        if name in ("map", "filter"):
            generator = ast.comprehension(target=_store(item), iter=iterable, ifs=[], is_async=0)
            if name == "filter":
                generator.ifs.append(predicate(parts[0]))
                element: ast.expr = _load(item)
            else:
                if len(parts) == 2:
                    generator.ifs.append(predicate(parts[0]))
                element = parts[-1].expr
            return [ast.Return(value=ast.ListComp(elt=element, generators=[generator]))]
        test = predicate(parts[0])
        if self.absorbing and name in ("all", "exists"):
            return _absorbing_loop(name == "all", item, iterable, test, self.fresh("_e"))
        if name == "all":
            negated = ast.UnaryOp(op=ast.Not(), operand=test)
            return [loop([ast.If(test=negated, body=[returns(False)], orelse=[])]), returns(True)]
        if name == "exists":
            return [loop([ast.If(test=test, body=[returns(True)], orelse=[])]), returns(False)]
        # exists_one evaluates every element, as CEL's expansion of it does: an error after the
        # second true element is still the result (``count += 1`` for each true one).
        count = self.fresh("_n")
        add = ast.AugAssign(target=_store(count), op=ast.Add(), value=_const(1))
        found = ast.If(test=test, body=[add], orelse=[])
        initial = ast.Assign(targets=[_store(count)], value=_const(0))
        result = ast.Return(value=_compare(_load(count), ast.Eq(), _const(1)))
        return [initial, loop([found]), result]


def _absorbing_loop(
    every: bool, item: str, iterable: ast.expr, test: ast.expr, error: str
) -> list[ast.stmt]:
    """``all`` (``every``) or ``exists``, absorbing errors.

    An element that decides the result (false for ``all``, true for ``exists``) decides it
    even after an element that failed; else the first error is raised:

    ``error = None; for item in iterable: try: if [not] test: return not every;
    except _NATURAL as caught: if error is None: error = caught``, then
    ``if error is not None: raise error``, ``return every``.
    """
    decided: ast.expr = ast.UnaryOp(op=ast.Not(), operand=test) if every else test
    decide = ast.If(test=decided, body=[ast.Return(value=_const(not every))], orelse=[])
    keep = ast.If(
        test=_compare(_load(error), ast.Is(), _const(None)),
        body=[ast.Assign(targets=[_store(error)], value=_load("_caught"))],
        orelse=[],
    )
    handler = ast.ExceptHandler(type=_load("_NATURAL"), name="_caught", body=[keep])
    attempt = ast.Try(body=[decide], handlers=[handler], orelse=[], finalbody=[])
    failed = ast.If(
        test=_compare(_load(error), ast.IsNot(), _const(None)),
        body=[ast.Raise(exc=_load(error), cause=None)],
        orelse=[],
    )
    return [
        ast.Assign(targets=[_store(error)], value=_const(None)),
        ast.For(target=_store(item), iter=iterable, body=[attempt], orelse=[]),
        failed,
        ast.Return(value=_const(every)),
    ]


def _helper_calls(code: ast.expr) -> int:
    """The calls in ``code`` of functions written in Python (``type`` and ``len`` are not)."""
    return sum(
        isinstance(n, ast.Call) and not (isinstance(n.func, ast.Name) and n.func.id in _CHEAP)
        for n in ast.walk(code)
    )


_CHEAP: Final = frozenset({"_type", "_len"})
