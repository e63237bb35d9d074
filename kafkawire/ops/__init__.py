"""Observability: metrics, the metrics/health HTTP endpoint, log formatting, client telemetry, event-loop diagnostics. May import kafkawire.config.broker_config."""
