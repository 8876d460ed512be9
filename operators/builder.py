"""The operator builder: any number of inputs and outputs, sparse connectivity, capabilities.

Every operator in the catalogue is built with :class:`OperatorBuilder`::

    builder = OperatorBuilder(stream.scope, "Map")
    input = builder.new_input(stream)
    output, result = builder.new_output()

    def constructor(capabilities):
        for capability in capabilities:
            capability.drop()          # map sends only at the times of its input batches

        def logic():
            for time, records in input.batches():
                output.forward(time, [fn(r) for r in records])

        return logic

    builder.build(constructor)

``build`` hands the constructor one capability per output at the scope's minimum time; the
logic runs each time the operator is scheduled. After each run the operator's consumed,
produced and capability changes are published together. Most operators keep none of those
capabilities (they send only at the times of what they receive): ``build_reactive`` takes a
constructor without arguments and drops them for it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from operators.capability import Capability
from operators.core import Logic, OperatorCore
from operators.ports import InputPort, OutputPort
from operators.progress import Antichain, Connectivity, Source, Target, is_identity
from operators.runtime import ExchangePusher, Interest, Scope, Tee
from operators.runtime.routing import ColumnKey
from operators.stream import Stream


class OperatorBuilder:
    """Declares an operator's ports and connectivity, then installs its logic."""

    def __init__(self, scope: Scope, name: str) -> None:
        self.scope = scope
        self.name = name
        self.index = scope.builder.reserve()
        self.core = OperatorCore(scope, self.index, name)
        self._connections: list[dict[int, Hashable] | None] = []
        self._output_connections: list[dict[int, Hashable] | None] = []
        self._built = False

    def new_input(
        self,
        stream: Stream,
        exchange: Callable[[Any], object] | None = None,
        connection: dict[int, Hashable] | None = None,
        columns: ColumnKey | None = None,
    ) -> InputPort:
        """Add an input reading ``stream``.

        Args:
            stream: A stream of this operator's scope.
            exchange: ``None`` for a pipeline (records stay on their worker), or a key
                function: each record goes to the worker ``stable_hash(key(r)) % peers``.
            connection: The outputs this input reaches and their summaries; ``None`` means
                every output (including ones added later), unchanged.
            columns: With ``exchange``, the same key for batches of
                :class:`~operators.runtime.Columns` (field names, or a function of the
                batch giving its keys: :data:`~operators.runtime.routing.ColumnKey`), so
                they are routed by vectorized kernels and stay columns; equal keys reach
                the same worker as rows or as columns. Without it, columns are routed by
                their rows.
        """
        if stream.scope.builder is not self.scope.builder:
            raise ValueError(
                f"{self.name}: the stream belongs to another scope; "
                "use enter() / leave() to cross scopes"
            )
        port = InputPort(self.core, len(self.core.input_ports))
        target = Target(self.index, port.port)
        builder = self.scope.builder
        if exchange is None and columns is not None:
            raise ValueError(f"{self.name}: a column key needs the row key (exchange=) too")

        def wire(source: Source, tee: Tee) -> None:
            if exchange is None:
                port.queue = builder.connect(source, tee, target).queue
            else:
                _, mine, boxes = builder.connect_exchange(source, target)
                tee.pushers.append(ExchangePusher(boxes, exchange, columns))
                port.queue = mine.queue

        # At once, or (a fused chain's stream) once the chain's operator is built.
        stream.read_by(wire)
        self.core.input_ports.append(port)
        self._connections.append(connection)
        return port

    def new_output(
        self, connection: dict[int, Hashable] | None = None
    ) -> tuple[OutputPort, Stream]:
        """Add an output; return its port and the stream it produces.

        ``connection`` maps the inputs that reach this output to their summaries; ``None``
        means every input whose own connection was left as ``None``, unchanged.
        """
        tee = Tee()
        port = OutputPort(self.core, len(self.core.output_ports), tee)
        self.core.output_ports.append(port)
        self._output_connections.append(connection)
        return port, Stream(self.scope, Source(self.index, port.port), tee)

    def _connectivity(self) -> Connectivity:
        identity = self.scope.identity
        rows: Connectivity = []
        for i, connection in enumerate(self._connections):
            row: dict[int, Antichain[Hashable]] = {}
            for o, out_connection in enumerate(self._output_connections):
                if out_connection is not None:
                    if i in out_connection:
                        row[o] = Antichain([out_connection[i]])
                elif connection is None:
                    row[o] = Antichain([identity])
                elif o in connection:
                    row[o] = Antichain([connection[o]])
            rows.append(row)
        return rows

    def build(
        self,
        constructor: Callable[[list[Capability]], Logic],
        interest: Interest = Interest.NEVER,
    ) -> None:
        """Install the logic: ``constructor(capabilities)`` returns the function to run.

        ``interest`` says whether input frontier changes alone should schedule it.
        """
        if self._built:
            raise RuntimeError(f"{self.name} is already built")
        self._built = True
        core = self.core
        core.connectivity = self._connectivity()
        core.identity_paths = [
            {o for o, summaries in row.items() if any(is_identity(s) for s in summaries)}
            for row in core.connectivity
        ]
        core.interest = interest
        minimum = self.scope.minimum
        capabilities = [Capability(minimum, out, out.internal) for out in core.output_ports]
        for out in core.output_ports:
            # The +1 each capability counted is already in the initial ``peers`` per output.
            out.internal.clear()
        core.logic = constructor(capabilities)
        self.scope.builder.place(self.index, core)

    def build_reactive(
        self, constructor: Callable[[], Logic], interest: Interest = Interest.NEVER
    ) -> None:
        """Install logic that holds no capability of its own: ``constructor()`` returns it.

        The operator's initial capabilities are dropped before the constructor runs, so it
        sends only at the times of the capabilities its inputs' messages bring (``map``,
        ``count_by``, ``join``, ...).
        """

        def dropping(capabilities: list[Capability]) -> Logic:
            for capability in capabilities:
                capability.drop()
            return constructor()

        self.build(dropping, interest)
