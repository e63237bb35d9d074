"""txn: layer 3, the transaction coordinator (sans-I/O).

``state`` has the states of a transactional id and the one table of allowed transitions,
``records`` the ``__transaction_state`` records (Kafka's TransactionLogKey/Value),
``coordinator`` the per-partition coordinator (:class:`txn.coordinator.TxnShard`) that answers
InitProducerId / AddPartitionsToTxn / EndTxn / DescribeTransactions / ListTransactions and
drives the marker phase and the timeouts. The runtime (``kafkawire/coordinators/runtime.py``,
``kafkawire/coordinators/txn.py``) appends the records, writes the markers and keeps time.
"""
