"""The in-cluster agent (§7.4): one active replica swaps a fenced node's groups onto hot spares at once."""
