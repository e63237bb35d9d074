"""Developer tools that run a broker or talk to one: the CLI, the local cluster, chaos runs, the pytest plugin. Imports the broker; nothing in the broker imports it."""
