"""Producer inputs: sessions pushing timestamped records, retries and transactions.

Split by concept: :mod:`~service.app.inputs.sessions`, :mod:`~service.app.inputs.transactions`
(with their expiry), the input's :mod:`~service.app.inputs.capabilities`, what each operation
journals (:mod:`~service.app.inputs.journaling`), and the :class:`ProducerInput` that offers
them (:mod:`~service.app.inputs.producer`).
"""

from service.app.inputs.capabilities import InputListener
from service.app.inputs.chunks import Chunk, Columns
from service.app.inputs.core import Session
from service.app.inputs.journaling import Replayed, ReplayError, replay
from service.app.inputs.producer import ProducerInput, Raw, producer_input
from service.app.inputs.times import meet
from service.app.inputs.transactions import (
    Expiry,
    Transaction,
    TransactionExpired,
    rfc3339,
)
from service.app.views import Ack

__all__ = [
    "Ack",
    "Chunk",
    "Columns",
    "Expiry",
    "InputListener",
    "ProducerInput",
    "Raw",
    "ReplayError",
    "Replayed",
    "Session",
    "Transaction",
    "TransactionExpired",
    "meet",
    "producer_input",
    "replay",
    "rfc3339",
]
