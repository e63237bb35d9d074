"""pytest plugin: a running kafkawire broker for your tests (filled in with the server)."""
