"""World models: backends and the rollout engine."""
