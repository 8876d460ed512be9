"""The columnar operators: records with a schema, handled one Arrow batch at a time.

A typed input (``scope.new_input(schema=...)``) sends its records as
:class:`~operators.runtime.Columns` of one struct type. These operators take such batches as
they are (:meth:`~operators.ports.InputPort.containers`) and call pyarrow once per batch,
never Python per record:

* ``map_columns(fn)`` and ``filter_columns(fn)`` (:mod:`operators.columnar.stateless`): a
  function of a ``pa.RecordBatch``, once per batch;
* ``exchange_columns(keys)``: records to workers by the stable hash of key fields, the
  same worker their rows would go to;
* ``count_columns()``, ``count_by_columns(keys)`` and ``aggregate_columns(keys, ...)``
  (:mod:`operators.columnar.counting`): per time, emitted once the time is complete; each
  batch is pre-aggregated with pyarrow's ``group_by`` before its partial results are
  exchanged;
* ``join_columns(other, left_keys, right_keys)`` (:mod:`operators.columnar.join`): the
  row ``join``'s equijoin per time, on columns.

A list batch reaching one of them (an untyped stream) is converted once per batch
(``pa.RecordBatch.from_pylist``). Importing :mod:`operators` attaches them to
:class:`~operators.stream.Stream`; ``docs/library.md`` shows them in use.
"""

from operators.columnar import counting, join, stateless

__all__ = ["counting", "join", "stateless"]
