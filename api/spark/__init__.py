"""The PySpark data source ``frontier``: Spark writes into Frontier inputs and reads outputs.

``register(spark)`` makes ``format("frontier")`` available in a session. pyspark is imported
only when the data source is used (:mod:`api.spark.options` needs no pyspark).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from api.spark.datasource import FrontierDataSource


def register(spark: Any) -> None:
    """Register the ``frontier`` data source with a SparkSession."""
    from api.spark.datasource import FrontierDataSource

    spark.dataSource.register(FrontierDataSource)


def __getattr__(name: str) -> Any:
    if name == "FrontierDataSource":
        from api.spark.datasource import FrontierDataSource

        return FrontierDataSource
    raise AttributeError(f"module 'api.spark' has no attribute {name!r}")


__all__ = ["FrontierDataSource", "register"]
