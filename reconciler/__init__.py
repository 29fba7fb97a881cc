"""The imperative shell: CLI, Git, Kubernetes, webhook, simulator driver. Owns the clock and files."""
