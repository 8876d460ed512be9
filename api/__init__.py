"""The edges: HTTP/WebSocket API, Python client, Spark data source. Built in a later issue."""
