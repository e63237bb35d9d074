"""Configuration: Kafka's config keys, defaults, validation, dynamic and resource configs. Imports only protocol/, log/, kraft/ and the standard library."""
