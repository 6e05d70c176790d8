"""Analysis of a rollout against the truth: comparison, recovery, token lens, reports."""
