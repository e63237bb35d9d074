"""kafkawire/apis."""
