"""kafkawire."""
