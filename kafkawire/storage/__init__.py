"""The runtime around log/: formatting and meta.properties, the flusher, cleaner, log-dir mover, retention and expiration drivers. May import kafkawire.config.broker_config, ops, net."""
