"""Authentication and authorization: TLS, SASL mechanisms, JWT checks, the ACL authorizer, listener and inter-broker security settings. May import kafkawire.config.broker_config and ops."""
