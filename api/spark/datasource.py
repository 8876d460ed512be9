"""The ``frontier`` PySpark data source: the sink (batch and streaming) and the source."""

from __future__ import annotations

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from api.spark.options import OptionError, sink_options, source_options, source_schema
from api.spark.rows import typed_struct
from api.spark.sink import FrontierStreamWriter, FrontierWriter
from api.spark.source import FrontierReader, FrontierStreamReader, output_schema

WATERMARK_DELAY = "spark.watermarkDelayMs"
"""The metadata Spark puts on the column of a query's watermark (``withWatermark``)."""


def watermark_delays(schema: StructType) -> dict[str, int]:
    """The query's watermarked columns and their delays (ms), as the writer's schema says.

    Spark keeps a watermark only on a TIMESTAMP column (on an integer column ``withWatermark``
    is refused), so none can be the sink's integer ``timeColumn``: they are only named when
    ``allowedLateness`` is missing.
    """
    return {
        field.name: int(field.metadata[WATERMARK_DELAY])
        for field in schema.fields
        if WATERMARK_DELAY in (field.metadata or {})
    }


class FrontierDataSource(DataSource):  # type: ignore[misc,unused-ignore]
    """Reads completed times of a Frontier output; writes rows into a Frontier input.

    Register it with ``api.spark.register(spark)`` (or ``spark.dataSource.register``), then
    use ``format("frontier")``; the options are in :mod:`api.spark.options`.
    """

    @classmethod
    def name(cls) -> str:
        """The format name."""
        return "frontier"

    def schema(self) -> str | StructType:
        """``time LONG, record STRING``, or ``time LONG`` and the ``recordSchema`` fields.

        Without ``recordSchema``, a typed output (the server shows its schema) is read as
        ``time`` and its records' fields, typed.
        """
        options = source_options(self.options)
        if options.record_schema is None:
            typed = output_schema(options)
            if typed is not None:
                return typed_struct(typed)
        return source_schema(options)

    def reader(self, schema: StructType) -> FrontierReader:
        """A batch reader of an output."""
        return FrontierReader(source_options(self.options), schema)

    def streamReader(self, schema: StructType) -> FrontierStreamReader:
        """A streaming reader of an output."""
        return FrontierStreamReader(source_options(self.options), schema)

    def writer(self, schema: StructType, overwrite: bool) -> FrontierWriter:
        """A batch writer into an input (``mode("append")``: an input only takes more)."""
        if overwrite:
            raise OptionError('the frontier sink only adds records to an input: use mode("append")')
        return FrontierWriter(sink_options(self.options))

    def streamWriter(self, schema: StructType, overwrite: bool) -> FrontierStreamWriter:
        """A streaming writer into an input.

        Spark calls it when it plans the query's first micro-batch (and again for each
        commit): options a stream cannot run with (a ``timeColumn`` without
        ``allowedLateness``, say) stop the query there, before anything is written.
        """
        options = sink_options(self.options, streaming=True, watermarks=watermark_delays(schema))
        return FrontierStreamWriter(options)
